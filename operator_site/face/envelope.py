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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
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


@contextmanager
def version_race_guard(**extra: Any) -> Iterator[None]:
    """Run a versioned write; a collision on a lineage/uniqueness constraint becomes VersionConflict.

    Two writers extending the same version both try to insert the row that supersedes it; the
    database's unique constraint lets exactly one in. The loser's IntegrityError is turned into
    `{ok: false, retry: true}`, and because the dispatcher's transaction is rolled back on any
    Refusal, none of the loser's writes survive. Use it around the lineage insert (or around the
    whole write) in every advisor write; raise VersionConflict yourself when a conditional update
    (`.filter(version=expected).update(...)`) touches zero rows.
    """
    try:
        with transaction.atomic():
            yield
    except IntegrityError as exc:
        raise VersionConflict(**extra) from exc


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
