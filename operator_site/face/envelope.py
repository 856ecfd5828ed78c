"""The one envelope every tool answers in, the refusal shape, and the version-race wrapper.

Seed §4.1: "Every tool returns the same envelope: a single text content block containing the
result serialised as indented JSON. Advisor writes, which can collide on a version race, are
wrapped so that a rare collision surfaces as {ok:false, retry:true} rather than a rejected call —
the write itself is atomic and rolls back cleanly."

Services signal "no" by raising `Refusal` (or `VersionConflict`). The dispatcher runs every tool
inside one transaction, so raising rolls back everything the call wrote, and the refusal becomes
an ordinary result: `{"ok": false, "error": <code>, "reason": <sentence>, ...}`.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from mcp_types import CallToolResult, TextContent


class Refusal(Exception):
    """A domain "no": becomes `{"ok": false, "error": code, "reason": reason, **extra}`.

    Raising it inside a tool rolls back everything the call wrote.
    """

    def __init__(self, code: str, reason: str, **extra: Any) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.extra = extra

    def as_result(self) -> dict[str, Any]:
        return {"ok": False, "error": self.code, "reason": self.reason, **self.extra}


class VersionConflict(Refusal):
    """A lost optimistic-version race: nothing was written, the caller should re-read and retry."""

    def __init__(
        self,
        reason: str = "Another write landed first; nothing was written. Re-read and retry.",
        **extra: Any,
    ) -> None:
        super().__init__("version_conflict", reason, retry=True, **extra)


class _Encoder(DjangoJSONEncoder):
    def default(self, o: Any) -> Any:
        if isinstance(o, set | frozenset):
            return sorted(o)
        return super().default(o)


def to_json(result: Any) -> str:
    """The envelope's text: indented JSON (seed §4.1), unicode kept readable."""
    return json.dumps(result, indent=2, ensure_ascii=False, cls=_Encoder)


def envelope(result: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    """Exactly one text content block holding the result as indented JSON."""
    return CallToolResult(content=[TextContent(type="text", text=to_json(result))], is_error=is_error)
