"""`/mcp`: one stateless, bearer-protected POST route on the official MCP SDK.

The answers, in order of precedence — a request is answered by the first that applies:

1. method: only POST (GET would open an SSE stream that never ends in stateless mode; DELETE has
   no session to end) → 405 with `Allow: POST`;
2. bearer token → 401 with `WWW-Authenticate: Bearer`, nothing written (a token in the query
   string is never looked at); the same database statement counts the request against the
   principal's rate limit (`face/ratelimit.py`) → 429 with `Retry-After`, nothing else written;
   a database that cannot be reached for this → 503 with `Retry-After` (retryable, nothing done);
3. Host against ALLOWED_HOSTS → 421, Origin against this request's own origin, the public URL's and
   OPERATOR_ALLOWED_ORIGINS, comparing scheme, host and port → 403 (DNS rebinding, other local
   programs' pages);
4. body size while reading → 413; Content-Type other than application/json → 400 / -32600; a
   body that is not UTF-8 JSON (NaN and Infinity are not JSON) → 400 / -32700; a JSON array
   (batch), a non-object body or an object that is not a JSON-RPC 2.0 message (wrong `jsonrpc`,
   non-string `method`, non-object `params`, an `id` that is null, fractional or boolean) → 400 /
   -32600.

The checks of 3 and 4 need no database, so they run first (the body is read, bounded, before the
token is looked up); 2 is answered before any of them all the same. Then a fresh `OperatorServer`
serves the request and is discarded when the response closes: an ordinary request through the SDK's
single-exchange kernel (face/exchange.py), anything else through the SDK's stateless
streamable-HTTP transport (both protocol eras, chosen per request by the SDK from
`MCP-Protocol-Version`). A `tools/call` of a registered tool is admitted (2) inside the call's own
unit of database work, one hand-off to the database for the token and the tool
(face/admission.py); every other request is admitted here before it is served.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import INVALID_REQUEST, PARSE_ERROR, JSONRPCRequest
from starlette.types import Message, Receive, Scope, Send

from operator_site.face import exchange, registry
from operator_site.face.admission import NotAdmitted, Presented, admit, unauthorized
from operator_site.face.auth import parse_bearer
from operator_site.face.db import run_db
from operator_site.face.responses import send_json, send_jsonrpc_error
from operator_site.face.server import OperatorServer

# Host and Origin are checked here against Django's ALLOWED_HOSTS (with Django's own matching
# rules), so the SDK's copy of those checks is switched off rather than configured twice.
_SDK_SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)
# Ordinary stateless requests are answered through the SDK's single-exchange kernel
# (face/exchange.py); False sends every request through the SDK's manager (the comparison tests
# flip it to prove both paths answer alike).
SINGLE_EXCHANGE = True


def _header(scope: Scope, name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope["headers"] if key == name]


def host_allowed(host: str) -> bool:
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) origin or URL, the port made explicit; None for anything
    else (the opaque origin "null", file:, extensions, user info, a malformed port)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    if port == 0:
        return None
    return parts.scheme, parts.hostname.lower().rstrip("."), port or _DEFAULT_PORTS[parts.scheme]


def origin_allowed(origin: str, scope: Scope | None = None) -> bool:
    """Browsers send Origin; a page from a foreign origin must not drive a local operator. The origin
    must equal — scheme, host AND port — this request's own origin (its scheme and Host), the origin
    of OPERATOR_PUBLIC_URL, or one of OPERATOR_ALLOWED_ORIGINS: a page served by another program on
    another port of the same host, or over the other scheme, is a different origin and is refused."""
    seen = origin_of(origin)
    parts = urlsplit(origin)
    if seen is None or origin != origin.strip() or parts.path or parts.query or parts.fragment:
        return False  # an Origin header is scheme://host[:port], nothing more
    allowed = {origin_of(o) for o in (settings.OPERATOR_PUBLIC_URL, *settings.OPERATOR_ALLOWED_ORIGINS)}
    if scope is not None:
        hosts = _header(scope, b"host")
        if len(hosts) == 1:
            allowed.add(origin_of(f"{scope.get('scheme', 'http')}://{hosts[0]}"))
    return seen in allowed


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


def _content_type_ok(scope: Scope) -> bool:
    values = _header(scope, b"content-type")
    return len(values) == 1 and values[0].partition(";")[0].strip().lower() == "application/json"


class NotJsonNumber(ValueError):
    """NaN, Infinity, -Infinity, or a number too large to be finite: not JSON (RFC 8259 §6)."""


def _no_constant(name: str) -> Any:
    raise NotJsonNumber(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: a JSON number no float can hold
        raise NotJsonNumber(text[:40])
    return value


def _parse_message(body: bytes) -> tuple[dict[str, Any] | None, tuple[int, str, Any] | None]:
    """(message, None) if this body may be one JSON-RPC message, else (None, (JSON-RPC code, error
    message, id)).

    The body is parsed here once more than the SDK parses it (a few microseconds for an ordinary
    call) because the SDK answers a malformed envelope with -32602 and a pydantic dump that echoes
    the caller's values, treats a request with a null, fractional or boolean id as a notification
    (202, no answer ever comes), accepts a UTF-16 body, and reads NaN and Infinity as numbers. JSON-RPC
    and MCP say otherwise: invalid JSON (NaN, Infinity and -Infinity included: RFC 8259 has no such
    numbers) or text that is not UTF-8 is -32700; anything else that is not one message object is
    -32600.
    """
    try:
        message = json.loads(body.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite_float)
    except UnicodeDecodeError:
        return None, (PARSE_ERROR, "Parse error: the body is not UTF-8 text", None)
    except NotJsonNumber:
        return None, (
            PARSE_ERROR,
            "Parse error: NaN and Infinity are not JSON numbers (RFC 8259 §6); nor is a number beyond "
            "a double's range accepted",
            None,
        )
    except (ValueError, RecursionError):
        return None, (PARSE_ERROR, "Parse error: the body is not valid JSON (or is nested too deeply)", None)
    if isinstance(message, list):
        return None, (
            INVALID_REQUEST,
            "Invalid Request: JSON-RPC batches are not supported by MCP; send one message per request",
            None,
        )
    if not isinstance(message, dict):
        return None, (INVALID_REQUEST, "Invalid Request: the body must be a JSON-RPC message object", None)
    raw_id = message.get("id")
    id_ = raw_id if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else None
    if message.get("jsonrpc") != "2.0":
        return None, (INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', id_)
    if "method" in message:
        if not isinstance(message["method"], str):
            return None, (INVALID_REQUEST, 'Invalid Request: "method" must be a string', id_)
        if "params" in message and not isinstance(message["params"], dict):
            return None, (INVALID_REQUEST, 'Invalid Request: "params" must be an object', id_)
        if "id" in message and id_ is None:
            return None, (
                INVALID_REQUEST,
                'Invalid Request: "id" must be a string or an integer (MCP: never null)',
                None,
            )
    elif "result" not in message and "error" not in message:
        return None, (
            INVALID_REQUEST,
            'Invalid Request: a message needs a "method" (a request or notification) or a "result" or '
            '"error" (a response)',
            id_,
        )
    return message, None


def _deferrable(request: JSONRPCRequest) -> bool:
    """A `tools/call` of a registered tool: its bearer check runs in the call's own unit of
    database work (face/admission.py). Anything else is admitted before it is served."""
    if request.method != "tools/call" or not isinstance(request.params, dict):
        return False
    name = request.params.get("name")
    return isinstance(name, str) and registry.get(name) is not None


async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["method"] != "POST":
        await send_json(
            send,
            405,
            {"error": "method_not_allowed", "reason": "/mcp answers POST only (stateless)."},
            (b"allow", b"POST"),
        )
        return

    authorization = _header(scope, b"authorization")
    token = parse_bearer(authorization[0]) if len(authorization) == 1 else None
    if token is None:
        await unauthorized().send(send)  # nothing to look up: no token
        return

    # The checks that need no database run first; a request that fails one is still admitted
    # (or refused: 401, 429, 503) before its own answer is sent, so those answers keep their order.
    refusal = _host_or_origin_refusal(scope)
    request: JSONRPCRequest | None = None
    body = b""
    if refusal is None:
        limit = settings.OPERATOR_MAX_BODY_BYTES
        try:
            read = await _read_body(receive, limit)
        except BodyTooLarge:
            refusal = _jsonrpc_refusal(413, INVALID_REQUEST, f"Request body too large (limit {limit} bytes)")
        else:
            if read is None:
                return  # the client went away: nothing was looked up, nothing is answered
            body = read
            message, refusal = _read_message(scope, body)
            if SINGLE_EXCHANGE and message is not None:
                request = exchange.legacy_request(scope, body, message)

    if refusal is None and request is not None and _deferrable(request):
        # One unit of database work for the bearer check and the tool (face/admission.py).
        await exchange.answer(OperatorServer(Presented(token)), scope, request, send)
        return

    try:
        principal = await run_db(admit, token)
    except NotAdmitted as refused:
        await refused.send(send)
        return
    if refusal is not None:
        await refusal(send)
        return

    server = OperatorServer(principal)
    if request is not None:
        await exchange.answer(server, scope, request, send)
        return

    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    manager = StreamableHTTPSessionManager(
        server,
        stateless=True,
        security_settings=_SDK_SECURITY,
        max_request_body_size=settings.OPERATOR_MAX_BODY_BYTES,
    )
    async with manager.run():
        await manager.handle_request(scope, replay, send)


Answer = Callable[[Send], Awaitable[None]]


def _jsonrpc_refusal(status: int, code: int, text: str, id_: Any = None) -> Answer:
    return functools.partial(send_jsonrpc_error, status=status, code=code, message=text, id_=id_)


def _host_or_origin_refusal(scope: Scope) -> Answer | None:
    """421 for a Host outside ALLOWED_HOSTS, 403 for a foreign Origin (DNS rebinding, other local
    programs' pages); None when both are acceptable."""
    hosts = _header(scope, b"host")
    if len(hosts) != 1 or not host_allowed(hosts[0]):
        payload = {"error": "misdirected_request", "reason": "Host is not in ALLOWED_HOSTS."}
        return functools.partial(send_json, status=421, payload=payload)
    origins = _header(scope, b"origin")
    if origins and (len(origins) != 1 or not origin_allowed(origins[0], scope)):
        payload = {"error": "forbidden_origin", "reason": "Requests from this Origin are refused."}
        return functools.partial(send_json, status=403, payload=payload)
    return None


def _read_message(scope: Scope, body: bytes) -> tuple[dict[str, Any] | None, Answer | None]:
    """(the JSON-RPC message, None), or (None, the refusal): 400 for a Content-Type other than
    application/json (-32600) or a body that is not one JSON-RPC message (-32700 / -32600)."""
    if not _content_type_ok(scope):
        text = "Invalid Request: Content-Type must be application/json"
        return None, _jsonrpc_refusal(400, INVALID_REQUEST, text)
    message, problem = _parse_message(body)
    if problem:
        code, text, id_ = problem
        return None, _jsonrpc_refusal(400, code, text, id_)
    return message, None
