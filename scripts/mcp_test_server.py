"""An MCP server for Agentry's tests, written with the official Python SDK (FastMCP over
Streamable HTTP), on 127.0.0.1 at the port given. Its tools: `add` (adds two numbers),
`explode` (always fails: the result has isError), `slow` (answers after 10 s: a timeout's
test), and a plain `GET /ping` (the benchmark's baseline). Every request must carry `Authorization: Bearer <token>` (the token given), else 401:
the headers a tenant registers reach the server. Prints `ready <port>` once it listens.

    python scripts/mcp_test_server.py PORT TOKEN
"""

import asyncio
import sys

import uvicorn
from mcp.server.fastmcp import FastMCP
from starlette.responses import JSONResponse

port, token = int(sys.argv[1]), sys.argv[2]
mcp = FastMCP("agentry-test", host="127.0.0.1", port=port)


@mcp.tool()
def add(a: int, b: int) -> int:
    """Adds two whole numbers."""
    return a + b


@mcp.tool()
def explode(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ValueError(f"exploded: {reason}")


@mcp.tool()
async def slow() -> str:
    """Answers after ten seconds."""
    await asyncio.sleep(10)
    return "late"


@mcp.custom_route("/ping", methods=["GET"])
async def ping(request):
    """A plain HTTP route: the baseline of the remote tool call's benchmark."""
    return JSONResponse({"ok": True})


app = mcp.streamable_http_app()


class RequireToken:
    """Refuses a request without the bearer token, before the MCP app sees it."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                return
        await self.inner(scope, receive, send)


class Ready(uvicorn.Server):
    async def startup(self, sockets=None):
        await super().startup(sockets)
        print(f"ready {port}", flush=True)


Ready(uvicorn.Config(RequireToken(app), host="127.0.0.1", port=port, log_level="warning")).run()
