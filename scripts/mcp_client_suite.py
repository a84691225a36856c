"""Agentry's /mcp endpoint through the official MCP Python SDK's client (Streamable HTTP).

    python scripts/mcp_client_suite.py '{"url": ..., "key": ..., "read_key": ..., "agent_tool": ...,
                                         "hidden_tool": ..., "workflow_id": ...}'

Prints `all checks passed` when every check holds; fails with the first that does not.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

config = json.loads(sys.argv[1])


def check(condition, what):
    if not condition:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}")


def structured(result):
    if result.structuredContent is not None:
        return result.structuredContent
    return json.loads(result.content[0].text)


async def main():
    async with streamablehttp_client(config["url"], headers={"Authorization": f"Bearer {config['key']}"}) as (
        read,
        write,
        get_session_id,
    ):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            check(init.serverInfo.name == "agentry", "initialize names the server")
            check(get_session_id() is not None and get_session_id().startswith("mcps_"), "a session id is issued")
            await s.send_ping()
            names = [t.name for t in (await s.list_tools()).tools]
            check(config["agent_tool"] in names, f"the agent's chat tool is listed: {names}")
            check(config["hidden_tool"] not in names, "another tenant's agent is not listed")
            for tool in ("memory_search", "memory_add", "run_workflow", "get_execution"):
                check(tool in names, f"{tool} is listed")

            first = await s.call_tool(config["agent_tool"], {"message": "My dog is called Biscuit."})
            check(not first.isError, f"a chat answers: {first.content}")
            reply = structured(first)
            check(reply["credits"]["charged"] >= 1, "the chat is charged")
            second = await s.call_tool(
                config["agent_tool"], {"message": "What is my dog called?", "session_id": reply["session_id"]}
            )
            check("Biscuit" in structured(second)["content"], "the second chat sees the first")

            added = await s.call_tool("memory_add", {"content": "Ada likes green tea", "metadata": {"via": "mcp"}})
            check(not added.isError, f"memory_add adds: {added.content}")
            found = await s.call_tool("memory_search", {"query": "green tea"})
            hits = structured(found)["results"]
            check(any("green tea" in h["content"] for h in hits), "memory_search finds it")

            started = structured(await s.call_tool("run_workflow", {"workflow_id": config["workflow_id"], "input": {"x": 1}}))
            check(started["execution_id"].startswith("exe_"), "run_workflow starts an execution")
            execution = structured(await s.call_tool("get_execution", {"execution_id": started["execution_id"]}))
            check(execution["execution_id"] == started["execution_id"], "get_execution reads it")
            waited = structured(
                await s.call_tool("run_workflow", {"workflow_id": config["workflow_id"], "input": {"x": 2}, "wait_seconds": 30})
            )
            check(
                waited["status"] == "completed" and waited["output"] == {"x": 2},
                f"run_workflow with wait_seconds answers the ended execution: {waited}",
            )
            too_long = await s.call_tool("run_workflow", {"workflow_id": config["workflow_id"], "wait_seconds": 61})
            check(too_long.isError and "wait_seconds" in too_long.content[0].text, "a wait over 60 s is a tool error")

            bad = await s.call_tool("memory_search", {"query": 5})
            check(bad.isError and "validation_error" in bad.content[0].text, "bad arguments are a tool error")
            try:
                await s.call_tool("no_such_tool", {})
                check(False, "an unknown tool is refused")
            except Exception as e:  # the SDK raises the JSON-RPC error
                check("unknown tool" in str(e), f"an unknown tool is a JSON-RPC error: {e}")

    async with streamablehttp_client(config["url"], headers={"Authorization": f"Bearer {config['read_key']}"}) as (
        read,
        write,
        _,
    ):
        async with ClientSession(read, write) as s:
            await s.initialize()
            refused = await s.call_tool("memory_add", {"content": "not allowed"})
            check(refused.isError and "forbidden" in refused.content[0].text, "a read-only key is refused memory_add")
            allowed = await s.call_tool("memory_search", {"query": "tea"})
            check(not allowed.isError, "and may search")
    print("all checks passed")


asyncio.run(main())
