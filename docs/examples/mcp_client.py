"""Talk to an Agentry agent from any MCP client; here, the official Python SDK (`pip install mcp`).

    python docs/examples/mcp_client.py http://localhost:8080/mcp agk_… Helper
"""

import asyncio
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

url, api_key, agent = sys.argv[1], sys.argv[2], sys.argv[3]


async def main():
    async with streamablehttp_client(url, headers={"Authorization": f"Bearer {api_key}"}) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = [tool.name for tool in (await session.list_tools()).tools]
            print("tools:", ", ".join(tools))
            reply = await session.call_tool(f"chat_{agent}", {"message": "Hello! Who are you?"})
            print(reply.structuredContent["content"])


asyncio.run(main())
