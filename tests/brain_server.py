"""A real MCP server standing in for the person's "brain" in tests (not part of the product).

Built with the official SDK, served by uvicorn on loopback in a background thread. It exposes the
brain tool names of the enumerated allowlists plus one tool outside every list, and records every
call it receives with the Authorization header it came with.

Also: `DripFeedServer`, a raw HTTP server that answers with headers and then one byte at a time,
forever — the case a per-read timeout misses and a total deadline must catch.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

BRAIN_TOOLS = (
    "files_write",
    "files_search",
    "memory_recall",
    "actions_workspace_run",
    "actions_shell_run",
    "machines_command_exec",
)
OUTSIDE_EVERY_LIST = "payments_send"


@dataclass
class Call:
    tool: str
    arguments: dict[str, Any]
    authorization: str | None


@dataclass
class TestBrain:
    port: int
    calls: list[Call] = field(default_factory=list)
    connections: int = 0
    stall_s: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _build_app(brain: TestBrain) -> Any:
    server = MCPServer("test-brain", log_level="WARNING")
    current_auth: dict[str, str | None] = {"value": None}

    def make_tool(name: str) -> Any:
        async def tool(payload: str = "", path: str = "", query: str = "", command: str = "") -> str:
            brain.calls.append(
                Call(
                    name,
                    {"payload": payload, "path": path, "query": query, "command": command},
                    current_auth["value"],
                )
            )
            if brain.stall_s:
                await asyncio.sleep(brain.stall_s)
            return f"{name} ok"

        tool.__name__ = name
        return tool

    for name in (*BRAIN_TOOLS, OUTSIDE_EVERY_LIST):
        server.add_tool(
            make_tool(name), name=name, description=f"test brain: {name}", structured_output=False
        )

    app = server.streamable_http_app(
        stateless_http=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            current_auth["value"] = headers.get(b"authorization", b"").decode() or None
        await app(scope, receive, send)

    return recording


@contextlib.contextmanager
def running_brain(stall_s: float = 0.0) -> Any:
    brain = TestBrain(port=_free_port(), stall_s=stall_s)
    config = uvicorn.Config(
        _build_app(brain), host="127.0.0.1", port=brain.port, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("test brain did not start")
        time.sleep(0.02)
    try:
        yield brain
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class ListeningSocket:
    """A port that accepts connections and counts them (for "no connection is opened")."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


class DripFeedServer:
    """Answers any request with 200 text/event-stream headers, then one SSE comment byte-run every
    `interval_s`, never an event and never the end."""

    def __init__(self, interval_s: float = 0.2) -> None:
        self.interval_s = interval_s
        self.port = _free_port()
        self.bytes_sent = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._started.wait(10)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        handlers: set[asyncio.Task] = set()

        async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                await reader.readuntil(b"\r\n\r\n")
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                while True:
                    writer.write(b"2\r\n:\n\r\n")
                    await writer.drain()
                    self.bytes_sent += 2
                    await asyncio.sleep(self.interval_s)

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            handlers.add(task)
            try:
                await drip(reader, writer)
            finally:
                handlers.discard(task)
                writer.close()

        self._stopping = asyncio.Event()
        server = await asyncio.start_server(handle, "127.0.0.1", self.port)
        self._started.set()
        await self._stopping.wait()
        server.close()
        for task in list(handlers):
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

    def close(self) -> None:
        if self._loop:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(timeout=5)
