"""MCP tools of the goals app: the goal model (gated), the board and the decision log. Thin:
validate, call a service."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from goals import goal_model, services
from goals.goal_model.schemas import GoalModelChange
from operator_site.display import Identifier, IdOrIdentifier, TitleIdentifier
from operator_site.evidence import QUOTE_DESCRIPTION, Confirmed
from operator_site.face.dispatch import ToolCall
from operator_site.face.registry import CLAIMED_ACTOR, ToolArgs, ToolClass, tool


class TaskPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(None, min_length=1, max_length=300, description="What it is.")
    status: Literal["todo", "doing", "blocked", "done", "dropped"] | None = Field(
        None, description="Its state."
    )
    priority: Literal["low", "normal", "high", "urgent"] | None = Field(None, description="How urgent.")
    owner: str | None = Field(None, max_length=100, description="Who does it.")
    blocker: str | None = Field(None, max_length=4000, description="What blocks it; needed when blocked.")
    detail: str | None = Field(None, max_length=20000, description="Notes.")
    lane: str | None = Field(None, max_length=60, description="Board lane.")


class UpdateTaskArgs(ToolArgs):
    id: int | None = Field(None, ge=1, description="Task id.")
    key: Identifier | None = Field(
        None,
        pattern=r"^[a-z0-9][a-z0-9_-]{0,119}$",
        description="Stable slug; an unknown key creates the task (give a title).",
    )
    patch: TaskPatch = Field(default_factory=TaskPatch, description="Only the fields to change.")
    goal: IdOrIdentifier | None = Field(
        None,
        description='Link to a goal: id or a title matching one; "" unlinks.',
    )
    project: IdOrIdentifier | None = Field(
        None,
        description='Link to a project: id or a title matching one; "" unlinks.',
    )
    actor: Any = CLAIMED_ACTOR


@tool(
    "operator_update_task",
    tool_class=ToolClass.WRITE,
    args=UpdateTaskArgs,
    title="Update a task",
    examples=[
        {"key": "renew-passport", "patch": {"title": "Renew passport", "lane": "admin", "priority": "high"}},
        {"key": "renew-passport", "patch": {"status": "blocked", "blocker": "waiting for photos"}},
        {"id": 1, "patch": {"status": "done"}},
        {
            "key": "long-run",
            "patch": {"title": "Sunday long run", "lane": "health"},
            "goal": "Run a marathon",
        },
    ],
)
def update_task(call: ToolCall, args: UpdateTaskArgs) -> dict[str, Any]:
    """Patch a task on the board, by id or key. Returns it and `changed`: the fields and links whose
    value changed (none: nothing written)."""
    patch = args.patch.model_dump(exclude_unset=True)
    result = services.update_task(
        principal=call.principal,
        task_id=args.id,
        key=args.key,
        patch=patch,
        goal=args.goal,
        project=args.project,
    )
    return {
        "ok": True,
        "task": services.task_dict(result.task),
        "changed": result.changed,
        "created": result.created,
    }


class LogDecisionArgs(ToolArgs):
    title: str = Field(min_length=1, max_length=300, description="A short name.")
    decision: str = Field(min_length=1, max_length=20000, description="What was decided.")
    rationale: str = Field(min_length=1, max_length=20000, description="Why.")
    alternatives: list[str] = Field(
        default_factory=list, max_length=50, description="What else was considered."
    )
    context: str | None = Field(None, max_length=20000, description="What led to it.")
    actor: Any = CLAIMED_ACTOR


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
    """Append a strategic decision to the human-readable log: never edited or removed, each entry
    hash-chained to the one before."""
    entry = services.log_decision(
        principal=call.principal,
        title=args.title,
        decision=args.decision,
        rationale=args.rationale,
        alternatives=args.alternatives,
        context=args.context or "",
    )
    return {"ok": True, "entry": services.entry_dict(entry)}


# --- the goal model --------------------------------------------------------------------------------------
QUOTE_FIELD = Field(  # camelCase: the published name
    None,
    max_length=2000,
    description=QUOTE_DESCRIPTION,
)
EXPECTED_FIELD = Field(
    None,
    ge=0,
    description=(
        "The version you read. A newer one (or a race) writes nothing and answers retry: "
        "true, current_version: re-read, try again."
    ),
)


class ApplyGoalChangeArgs(ToolArgs):
    action: Literal["pause", "resume", "add", "remove", "mark_under_review", "rerank"] = Field(
        description=(
            "pause: active/under review → paused; resume: paused/under review → active; "
            "mark_under_review: active/paused → under review; rerank: to importance."
        )
    )
    goal: IdOrIdentifier | None = Field(
        None,
        description="Not for add: id, or a title matching one goal (any case).",
    )
    title: TitleIdentifier | None = Field(None, min_length=1, max_length=300, description="add: its title.")
    detail: str | None = Field(None, max_length=4000, description="add: what it means.")
    importance: int | None = Field(
        None,
        ge=1,
        description="1 = most important; rerank needs it, add defaults to last.",
    )
    confirmedInConversation: Confirmed = None  # camelCase: the published name
    confirmationQuote: str | None = QUOTE_FIELD
    expected_version: int | None = EXPECTED_FIELD
    actor: Any = CLAIMED_ACTOR


@tool(
    "operator_apply_goal_change",
    tool_class=ToolClass.GATED,
    args=ApplyGoalChangeArgs,
    title="Change a goal",
    examples=[
        {
            "action": "add",
            "title": "Run a marathon",
            "detail": "Autumn 2027, under four hours",
            "importance": 1,
            "confirmedInConversation": True,
            "confirmationQuote": "I really want to run a marathon next autumn",
        },
        {
            "action": "pause",
            "goal": "Learn Italian",
            "confirmedInConversation": True,
            "confirmationQuote": "Put the Learn Italian goal on hold until summer.",
            "expected_version": 6,
        },
        {
            "action": "rerank",
            "goal": 3,
            "importance": 1,
            "confirmedInConversation": True,
            "confirmationQuote": "Running the marathon is my top priority now.",
        },
    ],
)
def apply_goal_change(call: ToolCall, args: ApplyGoalChangeArgs) -> dict[str, Any]:
    """Pause, resume, add, remove, mark under review or re-rank one of the person's goals. Goals are
    high-stakes: confirmedInConversation: true and a confirmationQuote; a refusal names the failed
    rule and writes nothing (or propose it: operator_record_action_intent). An ambiguous or missing
    goal is refused with the candidates, an invalid transition with its status. Ranks stay dense and
    unique. Notifies the person with a one-tap revert."""
    return goal_model.apply_goal_change(
        principal=call.principal,
        action=args.action,
        goal=args.goal,
        title=args.title,
        detail=args.detail,
        importance=args.importance,
        confirmed=args.confirmedInConversation,
        quote=args.confirmationQuote,
        expected_version=args.expected_version,
    )


class ReconcileGoalModelArgs(ToolArgs):
    changes: list[GoalModelChange] = Field(
        min_length=1,
        max_length=goal_model.MAX_CHANGES,
        description="In order; all applied, or none.",
    )
    confirmedInConversation: Confirmed = None  # camelCase: the published name
    confirmationQuote: str | None = QUOTE_FIELD
    expected_version: int | None = EXPECTED_FIELD
    actor: Any = CLAIMED_ACTOR


@tool(
    "operator_reconcile_goal_model",
    tool_class=ToolClass.GATED,
    args=ReconcileGoalModelArgs,
    title="Reconcile the goal model",
    examples=[
        {
            "changes": [
                {
                    "entity": "project",
                    "op": "add",
                    "fields": {"title": "Couch to 10k", "goal": "Run a marathon"},
                },
                {"entity": "project", "op": "update", "target": "Garden shed", "fields": {"status": "done"}},
            ]
        },
        {
            "changes": [
                {"entity": "goal", "op": "add", "fields": {"title": "Write a novel", "importance": 2}},
                {"entity": "priority", "op": "add", "fields": {"name": "Health first", "position": 1}},
                {"entity": "goal", "op": "remove", "target": "Learn Italian"},
            ],
            "confirmedInConversation": True,
            "confirmationQuote": "I want to write a novel. Health first, always. Drop learning Italian.",
            "expected_version": 9,
        },
    ],
)
def reconcile_goal_model(call: ToolCall, args: ReconcileGoalModelArgs) -> dict[str, Any]:
    """Change goals, priorities and projects atomically, in one version. Fails closed: a missing or
    ambiguous target (or project goal link) writes nothing, and the answer says how each change
    resolved, with candidates. Goal and priority changes are high-stakes (confirmedInConversation,
    and a confirmationQuote sentence for each); projects apply freely. No change, no version. Each
    change notifies the person with a one-tap revert."""
    return goal_model.reconcile_goal_model(
        principal=call.principal,
        changes=args.changes,  # validated models: the service takes them as they are
        confirmed=args.confirmedInConversation,
        quote=args.confirmationQuote,
        expected_version=args.expected_version,
    )


class RevertGoalModelArgs(ToolArgs):
    to_version: int | None = Field(
        None,
        ge=0,
        description=(
            "Restore the whole goal model to this version instead; an agent only across its "
            "own changes, and never putting back an undone goal or priority change without "
            "the person's fresh words."
        ),
    )
    expected_version: int | None = Field(None, ge=0, description="The version you read.")
    actor: Any = CLAIMED_ACTOR


@tool(
    "operator_revert_goal_model",
    tool_class=ToolClass.WRITE,
    args=RevertGoalModelArgs,
    title="Revert the goal model",
    examples=[{}, {"to_version": 4}],
)
def revert_goal_model(call: ToolCall, args: RevertGoalModelArgs) -> dict[str, Any]:
    """Undo the last unreverted goal-model change — an agent's own, or for the person anyone's —
    restoring exactly what it superseded despite other writes since (revert_conflict if a later
    version changed the same goals, ranking or projects). A revert is a new version and notifies the
    person."""
    return goal_model.REVERTER.revert(
        principal=call.principal, to_version=args.to_version, expected_version=args.expected_version
    )
