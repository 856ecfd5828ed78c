"""The domain's "no": services, the admin, the human API and the commands raise these.

They belong to the kernel, not to the MCP envelope, so nothing but the MCP face depends on the
transport. The face turns a refusal into an ordinary result (docs/architecture.md, "Refusals").
"""

from __future__ import annotations

from typing import Any


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
