"""The operator as a client of the person's "brain" MCP server: `call_brain(caller, tool, arguments)`.

The tool must be in the caller's enumerated allowlist (`operator_site.powers.DOWNSTREAM`), checked before any
request object, client or connection exists; the call uses `BRAIN_TOKEN` (never the token of whoever
asked the operator to act) under one total deadline (`BRAIN_TIMEOUT_S`), so a brain that stalls or
drip-feeds bytes is abandoned on time. docs/powers.md lists each caller's allowlist.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from operator_site.powers import DOWNSTREAM
from runs.client import ClientError, DeadlineExceeded, call_tool_once, refusal_message


class BrainError(Exception):
    code = "brain_error"


class BrainRefused(BrainError):
    code = "brain_tool_not_allowed"


class BrainNotConfigured(BrainError):
    code = "brain_not_configured"


class BrainTimeout(BrainError):
    code = "brain_timeout"


@dataclass(frozen=True)
class BrainResult:
    tool: str
    is_error: bool
    text: str
    structured: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "is_error": self.is_error,
            "text": self.text,
            "structured": self.structured,
        }


def check_allowed(caller: str, tool: str) -> None:
    """Raise unless `caller` may call `tool` downstream. Runs before anything else."""
    allowed = DOWNSTREAM.get(caller)
    if allowed is None:
        raise BrainRefused(f"{caller} refused: {caller!r} has no enumerated ian-brain tool allowlist")
    if tool not in allowed:
        raise BrainRefused(refusal_message(caller, tool, "ian-brain"))


async def call_brain_async(
    caller: str,
    tool: str,
    arguments: dict[str, Any] | None = None,
    *,
    timeout_s: float | None = None,
    meta: dict[str, Any] | None = None,
) -> BrainResult:
    check_allowed(caller, tool)
    if not settings.BRAIN_URL:
        raise BrainNotConfigured("no brain is configured (BRAIN_URL is empty)")
    deadline = settings.BRAIN_TIMEOUT_S if timeout_s is None else timeout_s
    try:
        # The same core as the operator's own client for runners (runs/client.py): the official
        # SDK client under one total deadline.
        result = await call_tool_once(
            settings.BRAIN_URL, tool, arguments, token=settings.BRAIN_TOKEN, deadline_s=deadline, meta=meta
        )
    except DeadlineExceeded as exc:
        raise BrainTimeout(f"{caller}: {tool} did not answer within {deadline:g} s; abandoned") from exc
    except ClientError as exc:  # connection refused, protocol errors, a 401 from the brain...
        raise BrainError(f"{caller}: {exc}"[:500]) from exc
    text = "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")
    return BrainResult(
        tool=tool, is_error=bool(result.is_error), text=text, structured=result.structured_content
    )


def call_brain(
    caller: str,
    tool: str,
    arguments: dict[str, Any] | None = None,
    *,
    timeout_s: float | None = None,
    meta: dict[str, Any] | None = None,
) -> BrainResult:
    """Synchronous form for management commands and the executor (never call it on an event loop).

    `meta` goes in the request's `_meta` (the executor sends its idempotency key there)."""
    check_allowed(caller, tool)  # refuse before even starting an event loop
    return asyncio.run(call_brain_async(caller, tool, arguments, timeout_s=timeout_s, meta=meta))
