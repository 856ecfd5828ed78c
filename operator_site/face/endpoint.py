"""`/mcp`: one stateless, bearer-protected POST route on the official MCP SDK (seed §4.1).

The guards run in this order, each answering before the next looks at anything:

1. method: only POST (GET would open an SSE stream that never ends in stateless mode; DELETE has
   no session to end) → 405 with `Allow: POST`;
2. bearer token → 401 with `WWW-Authenticate: Bearer`, nothing written (a token in the query
   string is never looked at);
3. Host against ALLOWED_HOSTS → 421, Origin against the allowed hosts/origins → 403 (DNS
   rebinding);
4. body size while reading → 413; a JSON array (batch) or a non-object body → 400 / -32600.

Then a fresh `OperatorServer` for this principal serves the request through the SDK's stateless
streamable-HTTP transport (both protocol eras, chosen per request by the SDK from
`MCP-Protocol-Version`) and is discarded when the response closes.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import INVALID_REQUEST
from starlette.types import Message, Receive, Scope, Send

from operator_site.face.auth import authenticate, parse_bearer
from operator_site.face.db import run_db
from operator_site.face.server import OperatorServer

# Host and Origin are checked here against Django's ALLOWED_HOSTS (with Django's own matching
# rules), so the SDK's copy of those checks is switched off rather than configured twice.
_SDK_SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, payload: dict[str, Any], *extra: tuple[bytes, bytes]) -> None:
    body = json.dumps(payload).encode()
    await _respond(send, status, body, [(b"content-type", b"application/json"), *extra])


async def _jsonrpc_error(send: Send, status: int, code: int, message: str) -> None:
    await _json(send, status, {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})


def _header(scope: Scope, name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope["headers"] if key == name]


def host_allowed(host: str) -> bool:
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


def origin_allowed(origin: str) -> bool:
    """Browsers send Origin; a page from a foreign origin must not drive a local operator."""
    if origin in settings.OPERATOR_ALLOWED_ORIGINS:
        return True
    parts = urlsplit(origin)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        return False  # includes the opaque origin "null"
    return host_allowed(parts.netloc)


class BodyTooLarge(Exception):
    pass


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, counted while reading; None if the client went away."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _not_an_object(body: bytes) -> str | None:
    """Why this body cannot be a single JSON-RPC message, or None if it may be one.

    Only the first byte is looked at on the normal path; the SDK parses the body itself.
    """
    stripped = body.lstrip()
    if stripped.startswith(b"{"):
        return None
    if stripped.startswith(b"["):
        return "Invalid Request: JSON-RPC batches are not supported by MCP; send one message per request"
    try:
        json.loads(stripped)
    except ValueError:
        return None  # not JSON at all: the SDK answers -32700 Parse error
    return "Invalid Request: the body must be a JSON-RPC message object"


async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["method"] != "POST":
        await _json(
            send,
            405,
            {"error": "method_not_allowed", "reason": "/mcp answers POST only (stateless)."},
            (b"allow", b"POST"),
        )
        return

    authorization = _header(scope, b"authorization")
    token = parse_bearer(authorization[0]) if len(authorization) == 1 else None
    principal = await run_db(authenticate, token) if token else None
    if principal is None:
        await _json(
            send,
            401,
            {
                "error": "unauthorized",
                "reason": "A valid bearer token is required (Authorization: Bearer ...).",
            },
            (b"www-authenticate", b'Bearer realm="operator"'),
        )
        return

    hosts = _header(scope, b"host")
    if len(hosts) != 1 or not host_allowed(hosts[0]):
        await _json(send, 421, {"error": "misdirected_request", "reason": "Host is not in ALLOWED_HOSTS."})
        return
    origins = _header(scope, b"origin")
    if origins and (len(origins) != 1 or not origin_allowed(origins[0])):
        await _json(
            send, 403, {"error": "forbidden_origin", "reason": "Requests from this Origin are refused."}
        )
        return

    limit = settings.OPERATOR_MAX_BODY_BYTES
    try:
        body = await _read_body(receive, limit)
    except BodyTooLarge:
        await _jsonrpc_error(send, 413, INVALID_REQUEST, f"Request body too large (limit {limit} bytes)")
        return
    if body is None:
        return
    problem = _not_an_object(body)
    if problem:
        await _jsonrpc_error(send, 400, INVALID_REQUEST, problem)
        return

    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    manager = StreamableHTTPSessionManager(
        OperatorServer(principal),
        stateless=True,
        security_settings=_SDK_SECURITY,
        max_request_body_size=limit,
    )
    async with manager.run():
        await manager.handle_request(scope, replay, send)
