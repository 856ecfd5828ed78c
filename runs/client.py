"""A client for runners and scripts: call the operator's tools from Python, on the official MCP SDK.

`OperatorClient.call(tool, args)` returns the decoded envelope; a refusal raises `Refused`, a tool
outside a local allowlist `ToolNotAllowed` (before any connection exists), one total deadline per
call `DeadlineExceeded`. It imports nothing from Django. docs/client.md shows how to use it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Iterable
from typing import Any

import anyio
import httpx2

DEFAULT_DEADLINE_S = 60.0


class ClientError(Exception):
    """The call did not produce a tool result (transport, protocol, authentication)."""

    code = "client_error"


class ToolNotAllowed(ClientError):
    """The tool is outside this client's allowlist: refused locally, nothing was sent."""

    code = "tool_not_allowed"


class DeadlineExceeded(ClientError):
    """The whole call did not finish within the deadline; it was abandoned."""

    code = "deadline_exceeded"


class BadAnswer(ClientError):
    """The answer was not the operator's envelope (exactly one text block holding JSON)."""

    code = "bad_answer"


class Refused(Exception):
    """The operator said no: `{"ok": false, "error": code, "reason": sentence, ...}`.

    `retry` is True when nothing was written and the same call may simply be made again."""

    def __init__(self, tool: str, result: dict[str, Any]) -> None:
        self.tool = tool
        self.result = result
        self.code = str(result.get("error") or "refused")
        self.reason = str(result.get("reason") or "")
        self.retry = bool(result.get("retry"))
        super().__init__(f"{tool} refused: {self.code}: {self.reason}")


def refusal_message(caller: str, tool: str, server: str) -> str:
    """The message for a tool outside an enumerated allowlist (docs/powers.md)."""
    return f"{caller} refused: {tool} is not in the enumerated {server} tool allowlist"


def check_allowlist(caller: str, server: str, allowlist: Collection[str] | None, tool: str) -> None:
    """Raise ToolNotAllowed unless `tool` is in `allowlist` (None: every tool)."""
    if allowlist is not None and tool not in allowlist:
        raise ToolNotAllowed(refusal_message(caller, tool, server))


async def call_tool_once(
    url: str,
    tool: str,
    arguments: dict[str, Any] | None,
    *,
    token: str = "",
    deadline_s: float = DEFAULT_DEADLINE_S,
    mode: str = "auto",
    meta: dict[str, Any] | None = None,
) -> Any:
    """One `tools/call` through the official SDK client under ONE total deadline; returns the SDK's
    `CallToolResult`. Raises DeadlineExceeded, or ClientError for anything that is not a result."""
    # Imported here: a caller refused by its allowlist never even loads the client machinery.
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    statuses: list[int] = []

    async def keep_status(response: httpx2.Response) -> None:
        # The SDK reports an HTTP error as "Server returned an error response"; keep the status.
        statuses.append(response.status_code)

    try:
        with anyio.fail_after(deadline_s):
            async with (
                httpx2.AsyncClient(
                    headers=headers,
                    timeout=deadline_s,
                    follow_redirects=False,
                    event_hooks={"response": [keep_status]},
                ) as http,
                Client(streamable_http_client(url, http_client=http), mode=mode) as client,
            ):
                return await client.call_tool(tool, arguments or {}, meta=meta)
    except TimeoutError as exc:
        raise DeadlineExceeded(f"{tool} did not answer within {deadline_s:g} s; abandoned") from exc
    except ClientError:
        raise
    except Exception as exc:  # connection refused, a 401, protocol errors...
        raise ClientError(f"{tool} failed: {_describe(exc, statuses)}"[:500]) from exc


def _describe(exc: BaseException, statuses: list[int]) -> str:
    """One line for an exception the SDK or httpx raised (they often wrap the cause in a group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    status = next((code for code in reversed(statuses) if code >= 400), None)
    if status == 401:
        return "the server refused the bearer token (HTTP 401): check the token"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" + (f" (HTTP {status})" if status else "")


def decode_envelope(tool: str, result: Any) -> dict[str, Any]:
    """The envelope's one text block, parsed: what the tool answered."""
    blocks = [block for block in result.content if getattr(block, "type", "") == "text"]
    if len(result.content) != 1 or len(blocks) != 1:
        raise BadAnswer(f"{tool}: expected exactly one text block, got {len(result.content)} blocks")
    try:
        decoded = json.loads(blocks[0].text)
    except ValueError as exc:
        raise BadAnswer(f"{tool}: the text block is not JSON ({exc})") from None
    if not isinstance(decoded, dict):
        raise BadAnswer(f"{tool}: the result is not a JSON object")
    return decoded


class OperatorClient:
    """Calls the operator's tools. See the module docstring."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        allowlist: Iterable[str] | None = None,
        name: str = "client",
        deadline_s: float = DEFAULT_DEADLINE_S,
        mode: str = "auto",
        refusals: str = "raise",
    ) -> None:
        if refusals not in {"raise", "return"}:
            raise ValueError("refusals must be 'raise' or 'return'")
        if deadline_s <= 0:
            raise ValueError("deadline_s must be positive")
        self.url = url
        self._token = token
        self.allowlist = frozenset(allowlist) if allowlist is not None else None
        self.name = name
        self.deadline_s = deadline_s
        self.mode = mode
        self.refusals = refusals

    @classmethod
    def for_runner(cls, role: str, url: str, token: str, **options: Any) -> OperatorClient:
        """A client holding one runner's enumerated allowlist (operator_site/powers.py), e.g. "morning"."""
        from operator_site.powers import ROLES

        key = role if role in ROLES else f"{role}-runner"
        if key not in ROLES:
            raise ValueError(f"no enumerated allowlist for {role!r}; known: {', '.join(ROLES)}")
        return cls(url, token, allowlist=ROLES[key], name=role, **options)

    def __repr__(self) -> str:  # never the token
        return f"OperatorClient({self.url!r}, name={self.name!r}, allowlist={sorted(self.allowlist or [])})"

    async def acall(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call `tool`; the decoded result. Raises ToolNotAllowed (local, nothing sent), Refused,
        DeadlineExceeded, BadAnswer or ClientError."""
        check_allowlist(self.name, "operator", self.allowlist, tool)
        result = await call_tool_once(
            self.url, tool, arguments, token=self._token, deadline_s=self.deadline_s, mode=self.mode
        )
        if result.is_error and not result.content:
            raise ClientError(f"{tool} failed without an answer")
        decoded = decode_envelope(tool, result)
        if decoded.get("ok") is False and self.refusals == "raise":
            raise Refused(tool, decoded)
        return decoded

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """The synchronous form (for scripts; not from inside a running event loop)."""
        check_allowlist(self.name, "operator", self.allowlist, tool)  # before an event loop exists
        return asyncio.run(self.acall(tool, arguments))
