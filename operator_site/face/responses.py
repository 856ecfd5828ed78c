"""Plain HTTP answers of `/mcp` that are not MCP answers (405, 401, 429, 503, 421, 403, 413, 400)."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Send


async def send_body(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, status: int, payload: dict[str, Any], *extra: tuple[bytes, bytes]) -> None:
    body = json.dumps(payload).encode()
    await send_body(send, status, body, [(b"content-type", b"application/json"), *extra])


async def send_jsonrpc_error(send: Send, status: int, code: int, message: str, id_: Any = None) -> None:
    await send_json(send, status, {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}})
