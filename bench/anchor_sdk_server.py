"""Anchor servers for the benchmarks, built only with the MCP SDK: one trivial tool, stateless.

    python bench/anchor_sdk_server.py --port 9001 --mode fresh    # a fresh server per request (a)
    python bench/anchor_sdk_server.py --port 9002 --mode shared   # one shared server (b)
    python bench/anchor_sdk_server.py --port 9003 --mode floor    # no MCP at all: the floor (c)

(a) does what the seed's design does (and what the operator does): construct a server per request
and close it when the response closes. It is the anchor the operator's ratios are measured against.
(c) is not an MCP server: a bare ASGI app that reads the request and answers one fixed tool result
as an SSE event. It is what uvicorn and the HTTP round trip alone cost, the floor under every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import AsyncIterator

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings


def echo(text: str = "") -> str:
    """Return the text, as indented JSON."""
    return json.dumps({"ok": True, "text": text}, indent=2)


TOOLS = [Tool.from_function(echo, structured_output=False)]
SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        else:
            await send({"type": "lifespan.shutdown.complete"})
            return


async def fresh_app(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    server = MCPServer("anchor", tools=TOOLS, log_level="WARNING")
    manager = StreamableHTTPSessionManager(
        server._lowlevel_server, stateless=True, security_settings=SECURITY
    )
    async with manager.run():
        await manager.handle_request(scope, receive, send)


# What a stateless MCP server answers to a `tools/call`, byte for byte the shape of (a)'s answer.
FLOOR_BODY = (
    b'event: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{}"}],'
    b'"isError":false}}\r\n\r\n'
)
FLOOR_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


async def floor_app(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    # Drain the request body: a keep-alive connection must be left at the next request's start.
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": FLOOR_HEADERS})
    await send({"type": "http.response.body", "body": FLOOR_BODY})


def shared_app():
    server = MCPServer("anchor", tools=TOOLS, log_level="WARNING")
    manager = StreamableHTTPSessionManager(
        server._lowlevel_server, stateless=True, security_settings=SECURITY
    )

    @contextlib.asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with manager.run():
            yield

    state: dict[str, contextlib.AbstractAsyncContextManager] = {}

    async def app(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    state["cm"] = running()
                    await state["cm"].__aenter__()
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await state["cm"].__aexit__(None, None, None)
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await manager.handle_request(scope, receive, send)

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=["fresh", "shared", "floor"], default="fresh")
    opts = parser.parse_args()
    app = shared_app() if opts.mode == "shared" else {"fresh": fresh_app, "floor": floor_app}[opts.mode]
    uvicorn.run(app, host="127.0.0.1", port=opts.port, log_level="warning", access_log=False, lifespan="on")


if __name__ == "__main__":
    main()
