"""MCP tools of the goals app: the board and the decision log. Thin: validate, call a service."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from goals import services
from operator_site.face.dispatch import ToolCall
from operator_site.face.registry import ToolArgs, ToolClass, tool

ACTOR_FIELD = Field(
    None,
    description="Accepted and never trusted: the acting identity is always the bearer token's principal.",
)


class TaskPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(None, min_length=1, max_length=300)
    status: Literal["todo", "doing", "blocked", "done", "dropped"] | None = None
    priority: Literal["low", "normal", "high", "urgent"] | None = None
    owner: str | None = Field(None, max_length=100)
    blocker: str | None = Field(None, max_length=4000, description="Required when status is blocked.")
    detail: str | None = Field(None, max_length=20000)
    lane: str | None = Field(None, max_length=60)


class UpdateTaskArgs(ToolArgs):
    id: int | None = Field(None, ge=1, description="The task's id.")
    key: str | None = Field(
        None,
        pattern=r"^[a-z0-9][a-z0-9_-]{0,119}$",
        description="A stable slug; an unknown key creates the task (give it a title).",
    )
    patch: TaskPatch = Field(description="Only the fields to change; unknown fields are refused.")
    actor: Any = ACTOR_FIELD


@tool(
    "operator_update_task",
    tool_class=ToolClass.WRITE,
    args=UpdateTaskArgs,
    title="Update a task",
    examples=[
        {"key": "renew-passport", "patch": {"title": "Renew passport", "lane": "admin", "priority": "high"}},
        {"key": "renew-passport", "patch": {"status": "blocked", "blocker": "waiting for photos"}},
        {"id": 1, "patch": {"status": "done"}},
    ],
)
def update_task(call: ToolCall, args: UpdateTaskArgs) -> dict[str, Any]:
    """Patch a task on the board: status (todo, doing, blocked, done, dropped), priority (low, normal,
    high, urgent), owner, blocker, detail, lane or title. Find it by `id`, or by a stable `key` — an
    unknown key creates the task, which is how to put work on the board. Returns the task and
    `changed`: the fields whose value actually changed (empty, and nothing written, when the patch
    changes nothing). A blocked task needs a blocker."""
    patch = args.patch.model_dump(exclude_unset=True)
    result = services.update_task(principal=call.principal, task_id=args.id, key=args.key, patch=patch)
    return {
        "ok": True,
        "task": services.task_dict(result.task),
        "changed": result.changed,
        "created": result.created,
    }


class LogDecisionArgs(ToolArgs):
    title: str = Field(min_length=1, max_length=300)
    decision: str = Field(min_length=1, max_length=20000, description="What was decided.")
    rationale: str = Field(min_length=1, max_length=20000, description="Why.")
    alternatives: list[str] = Field(
        default_factory=list, max_length=50, description="What else was considered."
    )
    context: str | None = Field(None, max_length=20000)
    actor: Any = ACTOR_FIELD


@tool(
    "operator_log_decision",
    tool_class=ToolClass.WRITE,
    args=LogDecisionArgs,
    title="Log a strategic decision",
    examples=[
        {
            "title": "Keep the annual plan",
            "decision": "Renew the annual plan instead of switching to monthly.",
            "rationale": "Cheaper over the year and the tool is used daily.",
            "alternatives": ["monthly plan", "cancel"],
        }
    ],
)
def log_decision(call: ToolCall, args: LogDecisionArgs) -> dict[str, Any]:
    """Append a strategic decision to the durable, human-readable decision log: what was decided,
    why, and the alternatives considered. Append-only: entries are never edited or removed, and each
    is chained by hash to the one before it."""
    entry = services.log_decision(
        principal=call.principal,
        title=args.title,
        decision=args.decision,
        rationale=args.rationale,
        alternatives=args.alternatives,
        context=args.context or "",
    )
    return {"ok": True, "entry": services.entry_dict(entry)}
