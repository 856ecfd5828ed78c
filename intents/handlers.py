"""The executor's handlers: an intent type → exactly one brain call (a tool and its arguments).

Keys are normalised action types (`intents.gate.normalise_type`); a type without a handler is failed
by the executor with a reason, never guessed. docs/gate.md ("The executor") lists them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from django.conf import settings
from django.utils import timezone

from intents.gate import PROPOSAL_TYPES
from intents.models import Intent
from operator_site.calendar_edge import local_text
from operator_site.powers import EXECUTOR_TOOLS


@dataclass(frozen=True)
class BrainCall:
    tool: str
    arguments: dict[str, Any]


class HandlerError(Exception):
    """The intent cannot be carried out as recorded (said before anything is called)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


@dataclass(frozen=True)
class Handler:
    tool: str
    build: Callable[[Intent], dict[str, Any]]
    does: str  # one line for the docs


def _slug(text: str, limit: int = 48) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "untitled"


def _as_markdown(intent: Intent) -> str:
    lines = [f"# {intent.title}", "", f"- {intent.action_type}, intent #{intent.id}"]
    if intent.recipient:
        lines.append(f"- for: {intent.recipient}")
    if intent.due:
        lines.append(f"- due: {local_text(intent.due)}")
    if intent.topic:
        lines.append(f"- topic: {intent.topic}")
    if intent.body:
        lines += ["", intent.body]
    return "\n".join(lines) + "\n"


def _write_as_file(intent: Intent) -> dict[str, Any]:
    """A note, reminder or draft becomes a Markdown file; a draft is written, never sent."""
    day = timezone.localdate(intent.created_at)
    path = f"operator/{intent.action_type}s/{day:%Y-%m-%d}-intent-{intent.id}-"
    return {"path": path + f"{_slug(intent.title)}.md", "payload": _as_markdown(intent)}


SAFE_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")


def _write_file(intent: Intent) -> dict[str, Any]:
    """The title is the relative path (what the person approved), the body is the content."""
    path = intent.title.strip()
    if not SAFE_PATH.fullmatch(path) or len(path) > 200:
        raise HandlerError(
            "invalid_path",
            f"A file_write intent's title must be the relative path of the file (like notes/plan.md: "
            f"letters, digits, '.', '_', '-' and '/', no leading '/' or '.'), not {path[:80]!r}; "
            "nothing was written.",
        )
    return {"path": path, "payload": intent.body}


def _run_in_workspace(intent: Intent) -> dict[str, Any]:
    if not intent.body.strip():
        raise HandlerError(
            "command_required",
            "A workspace action's body must hold the command to run (the title only names it); "
            "nothing was run.",
        )
    return {"command": intent.body}


def _query(intent: Intent) -> dict[str, Any]:
    return {"query": intent.body.strip() or intent.title}


_FILE = Handler("files_write", _write_as_file, "written as a Markdown file under `operator/<type>s/`")
_WRITE = Handler("files_write", _write_file, "`path` = the title (a relative path), `payload` = the body")
_RUN = Handler("actions_workspace_run", _run_in_workspace, "`command` = the body (required)")
_SEARCH = Handler("files_search", _query, "`query` = the body, or the title if the body is empty")
_RECALL = Handler("memory_recall", _query, "`query` = the body, or the title if the body is empty")

# Keys are normalised action types (intents.gate.normalise_type). Anything else: no handler.
HANDLERS: MappingProxyType[str, Handler] = MappingProxyType(
    {
        "note": _FILE,
        "reminder": _FILE,
        "draft": _FILE,
        "file_write": _WRITE,
        "write_file": _WRITE,
        "workspace_action": _RUN,
        "workspace_run": _RUN,
        "file_search": _SEARCH,
        "search_files": _SEARCH,
        "memory_recall": _RECALL,
        "recall": _RECALL,
    }
)
assert {h.tool for h in HANDLERS.values()} <= EXECUTOR_TOOLS, "a handler outside the executor allowlist"


def handler_for(action_type: str) -> Handler | None:
    return HANDLERS.get(action_type)


def follow_through(action_type: str) -> dict[str, Any]:
    """What happens after the person accepts an intent of this type, in words for the approval page,
    the Accept confirmation and the human API: which handler carries it out, or that nothing will.

    `runs` is True only when accepting leads to something being done: a proposal is applied at
    Accept; a type with a handler is carried out by the executor — if a brain is configured. Without
    `BRAIN_URL` the executor claims nothing (the approved intent waits, and can be withdrawn); a
    type with no handler is failed `no_handler` by the executor (nothing is ever sent or spent)."""
    if action_type in PROPOSAL_TYPES:
        return {
            "runs": True,
            "handler": "proposal",
            "tool": None,
            "text": "Accepting applies this change to your model at once, as a new version whose evidence "
            "is your approval (the executor is not involved).",
        }
    handler = handler_for(action_type)
    does = handler.does.replace("`", "") if handler is not None else ""
    if handler is None:
        return {
            "runs": False,
            "handler": None,
            "tool": None,
            "text": f"Nothing will carry this out: the executor has no handler for {action_type!r} intents "
            "(the brain offers no tool that does it). Accepting records your approval only; the "
            "executor will then mark it failed (no_handler) — nothing is sent, spent or published.",
        }
    if not settings.BRAIN_URL:
        return {
            "runs": False,
            "handler": handler.tool,
            "tool": handler.tool,
            "text": "Nothing will carry this out until a brain is configured (BRAIN_URL is empty): an "
            "accepted intent waits as approved, and you can withdraw it. With a brain, the executor "
            f"would carry it out with one call to the brain's {handler.tool} tool ({does}).",
        }
    return {
        "runs": True,
        "handler": handler.tool,
        "tool": handler.tool,
        "text": f"The executor carries it out on its next pass, with one call to the brain's {handler.tool} "
        f"tool ({does}). Until it claims it, you can withdraw it.",
    }
