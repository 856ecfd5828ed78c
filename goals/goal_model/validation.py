"""A goal-model change as an op of a write: validated by the published schema
(goals/goal_model/schemas.py) before anything is read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from goals.goal_model.kinds import GOAL_ACTIONS, KINDS, ItemKind
from goals.goal_model.schemas import CHANGES
from operator_site.refusals import Refusal


# --- one change of a write -------------------------------------------------------------------------
@dataclass
class Op:
    index: int
    kind: ItemKind
    op: str
    target: int | str | None
    fields: dict[str, Any]

    @property
    def where(self) -> str:
        return f"Change {self.index + 1} ({self.kind.name} {self.op})"


def clean_ops(changes: Any) -> list[Op]:
    """The changes as ops, validated by the one schema the tool publishes (`schemas.CHANGES`): plain
    dicts (the admin, proposals, tests) or the tool's already validated models. A bad shape is a
    `Refusal` naming the change and the field; what depends on the model's state is planning's."""
    return [_op(index, change) for index, change in enumerate(CHANGES.validate(changes))]


def _op(index: int, change: Any) -> Op:
    fields = change.fields.model_dump(exclude_unset=True)
    return Op(index, KINDS[change.entity], change.op, getattr(change, "target", None), fields)


def goal_action_op(
    action: str,
    *,
    goal: int | str | None,
    title: str | None,
    detail: str | None,
    importance: int | None,
) -> Op:
    """The one op of `apply_goal_change`, from its flat arguments: only the ones its action takes."""
    if action not in GOAL_ACTIONS:
        raise Refusal("invalid_action", f"Unknown action {action!r}; use {', '.join(GOAL_ACTIONS)}.")
    fields: dict[str, Any] = {}
    given = {"title": title, "detail": detail, "importance": importance}
    allowed = {"add": ("title", "detail", "importance"), "rerank": ("importance",)}.get(action, ())
    for name, value in given.items():
        if value is None:
            continue
        if name not in allowed:
            raise Refusal(
                "unexpected_argument",
                f"{action} takes no {name}" + (f" (only {', '.join(allowed)})." if allowed else "."),
                field=name,
            )
        fields[name] = value
    if action == "add" and goal is not None:
        raise Refusal(
            "unexpected_argument", "add creates a new goal: give title (and detail), not goal.", field="goal"
        )
    if action != "add" and (goal is None or goal == ""):
        raise Refusal(
            "goal_required", f"{action} needs the goal: its id, or a title that matches exactly one goal."
        )
    if action == "add" and not (title or "").strip():
        raise Refusal("title_required", "add needs the new goal's title.", field="title")
    if action == "rerank" and importance is None:
        raise Refusal("importance_required", "rerank needs importance: the 1-based rank to move the goal to.")
    change: dict[str, Any] = {"entity": "goal", "op": action, "fields": fields}
    if action != "add":
        change["target"] = goal
    try:  # the values, by the same schema as a reconciliation's (a service caller skips the door)
        (parsed,) = CHANGES.adapter.validate_python([change])
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        name = {"target": "goal"}.get(str(error["loc"][-1]), str(error["loc"][-1]))
        raise Refusal("invalid_value", f"{name}: {error['msg']}.", field=name) from None
    return _op(0, parsed)
