"""One stateless request, one answer: the SDK's own request kernel without its stream machinery.

In stateless mode the SDK's streamable-HTTP manager serves each POST by building a transport, a pair
of in-memory streams, a JSON-RPC dispatcher in a task of its own and an `EventSourceResponse` with
a second task group, then tearing all of it down again — the bulk of a trivial call's cost (a
profile of `operator_list_directives` put it well above the tool and its two database round trips).
None of that machinery does anything for a stateless request: there is no session, no back-channel
and exactly one answer.

So for the common case the face calls the SDK's single-exchange entry, `mcp.server.runner.serve_one`
(the kernel the SDK's own 2026-era HTTP entry uses): the same `ServerRunner`, the same handlers and
validation, the same exception-to-error mapping as the SDK's stateless JSON-RPC dispatcher, and
writes the answer as the SDK's transport would write it — byte for byte (`tests/test_exchange.py`
compares the two paths over a corpus of requests). Everything else goes to the SDK's manager:
`initialize`, notifications and responses, the 2026-07-28 era (which the manager already serves
through `serve_one`), a protocol-version header it does not route to the legacy transport, an
Accept header the transport would refuse, anything that does not validate as a JSON-RPC request.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import pydantic_core
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.runner import serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data, progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    ProgressToken,
    RequestId,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Scope, Send

from operator_site.face.admission import NotAdmitted

logger = logging.getLogger("operator.face")

# What the SDK's legacy transport (through sse-starlette) sends with every SSE answer.
_SSE_HEADERS = [
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"content-type", b"text/event-stream"),
    (b"x-accel-buffering", b"no"),
]
_PROTOCOL_VERSION_HEADER = b"mcp-protocol-version"
# Legacy stateless: the answer goes on this POST's own stream; a server-to-client request would have
# nowhere to come back to (the SDK's manager builds the same context).
_TRANSPORT = TransportContext(kind="streamable-http", can_send_request=False)
# The low-level Server's default lifespan yields an empty state; the manager enters it per server.
_LIFESPAN_STATE: dict[str, Any] = {}


def _sse_frame(message: JSONRPCResponse | JSONRPCError | JSONRPCNotification) -> bytes:
    data = message.model_dump_json(by_alias=True, exclude_unset=True)
    return f"event: message\r\ndata: {data}\r\n\r\n".encode()


@dataclass
class _ExchangeContext:
    """The `DispatchContext` of one stateless request: no back-channel; notifications (progress)
    are framed onto this request's answer ahead of the result, as the SDK's transport orders them."""

    request_id: RequestId
    message_metadata: ServerMessageMetadata
    progress_token: ProgressToken | None = None
    frames: list[bytes] = field(default_factory=list)
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    transport: TransportContext = _TRANSPORT
    can_send_request: bool = False

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> None:
        body = dict(params) if params is not None else None
        self.frames.append(_sse_frame(JSONRPCNotification(jsonrpc="2.0", method=method, params=body)))

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)


def legacy_request(scope: Scope, body: bytes, message: dict[str, Any]) -> JSONRPCRequest | None:
    """The request, if this POST is one the single exchange answers exactly as the SDK would; else None.

    `message` is the body already checked to be one JSON-RPC message object (endpoint guards).
    """
    if "id" not in message or message.get("method") in (None, "initialize"):
        return None
    try:
        # The SDK's transport parses with pydantic's JSON parser, which refuses what Python's json
        # module lets through (a lone surrogate escape such as "\ud800" is a 400/-32700 there):
        # a body it would refuse goes to it, to be refused in its words.
        message = pydantic_core.from_json(body)
    except ValueError:
        return None
    versions = [value for key, value in scope["headers"] if key == _PROTOCOL_VERSION_HEADER]
    if len(versions) > 1 or (versions and versions[0].decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS):
        return None
    has_json, has_sse = check_accept_headers(Request(scope))
    if not (has_json and has_sse):
        return None
    try:
        request = JSONRPCRequest.model_validate(message, by_name=False)
    except ValidationError:
        return None
    return request


async def answer(server: Server[Any], scope: Scope, request: JSONRPCRequest, send: Send) -> None:
    """Serve `request` through the SDK's kernel and write the answer as the legacy transport does."""
    versions = [value for key, value in scope["headers"] if key == _PROTOCOL_VERSION_HEADER]
    protocol_version = versions[0].decode("latin-1") if versions else DEFAULT_NEGOTIATED_VERSION
    dctx = _ExchangeContext(
        request_id=request.id,
        message_metadata=ServerMessageMetadata(request_context=Request(scope)),
        progress_token=progress_token_from_params(request.params),
    )
    connection = Connection.from_envelope(protocol_version, None, None)
    reply: JSONRPCResponse | JSONRPCError
    try:
        result = await serve_one(
            server,
            dctx,
            request.method,
            request.params,
            connection=connection,
            lifespan_state=_LIFESPAN_STATE,
        )
        reply = JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result)
    except NotAdmitted as refused:
        # A tools/call admitted in its own unit of work (face/admission.py) whose token was refused:
        # answered as the endpoint answers it (401, 429 or 503), nothing else was done.
        await refused.send(send)
        return
    except Exception as exc:
        # The SDK's JSON-RPC dispatcher's boundary, unchanged: MCPError carries its own error data, a
        # validation error is INVALID_PARAMS without pydantic text, anything else is logged and
        # answered with code 0 (the SDK's compatibility choice for this era).
        error = handler_exception_to_error_data(exc)
        if error is None:
            logger.exception("handler for %r raised", request.method)
            error = ErrorData(code=0, message=str(exc))
        reply = JSONRPCError(jsonrpc="2.0", id=request.id, error=error)
    body = b"".join(dctx.frames) + _sse_frame(reply)
    await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
    await send({"type": "http.response.body", "body": body, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
