"""A loopback proxy that adds `Authorization: Bearer <token>` to every request it forwards.

For test peers that cannot send headers (the MCP conformance runner): production auth stays as it
is; the peer talks to this proxy, the proxy to the operator. Host, Origin and every other header go
through unchanged (the DNS-rebinding scenario depends on that), and responses stream back as they
arrive (SSE included).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx2
import uvicorn

_HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"transfer-encoding",
    b"te",
    b"trailer",
    b"upgrade",
    b"proxy-authorization",
    b"proxy-authenticate",
    b"content-length",
    b"authorization",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AuthProxy:
    def __init__(self, upstream: str, token: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.token = token
        self.port = _free_port()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def app(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": f"{message['type']}.complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP_BY_HOP]
        headers.append((b"authorization", f"Bearer {self.token}".encode()))
        url = (
            self.upstream
            + scope["path"]
            + (("?" + scope["query_string"].decode()) if scope["query_string"] else "")
        )
        async with httpx2.AsyncClient(timeout=60) as client:
            request = client.build_request(scope["method"], url, headers=headers, content=body)
            response = await client.send(request, stream=True)
            out_headers = [
                (k.encode(), v.encode())
                for k, v in response.headers.items()
                if k.lower().encode() not in _HOP_BY_HOP
            ]
            await send(
                {"type": "http.response.start", "status": response.status_code, "headers": out_headers}
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            await response.aclose()

    def __enter__(self) -> AuthProxy:
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on", interface="asgi3"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("auth proxy did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server:
            self._server.should_exit = True
        if self._thread:
            self._thread.join(timeout=10)
