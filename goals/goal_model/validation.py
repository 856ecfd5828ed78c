"""The shape of a goal-model change, checked before anything is read: which ops each kind takes,
the fields each op carries, and their values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from goals.goal_model.kinds import (
    GOAL,
    GOAL_ACTIONS,
    KINDS,
    MAX_CHANGES,
    OPS,
    PROJECT_SETTABLE_STATUSES,
    ItemKind,
)
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


def clean_ops(changes: Sequence[Mapping[str, Any]]) -> list[Op]:
    if not changes:
        raise Refusal("changes_required", "Give at least one change.")
    if len(changes) > MAX_CHANGES:
        raise Refusal("too_many_changes", f"At most {MAX_CHANGES} changes per call.")
    ops = []
    for index, raw in enumerate(changes):
        name, op_name = raw.get("entity"), raw.get("op")
        where = f"Change {index + 1}"
        if name not in KINDS:
            raise Refusal(
                "invalid_change",
                f"{where}: unknown entity {name!r}; use goal, priority or project.",
                index=index,
            )
        if (name, op_name) not in OPS:
            valid = ", ".join(op for kind, op in OPS if kind == name)
            raise Refusal(
                "invalid_change", f"{where}: a {name} has no op {op_name!r}; use {valid}.", index=index
            )
        fields = dict(raw.get("fields") or {})
        allowed, required = OPS[(name, op_name)]
        unknown = sorted(set(fields) - allowed)
        if unknown:
            raise Refusal(
                "unknown_field",
                f"{where} ({name} {op_name}) takes no field {unknown[0]!r}"
                + (f"; it takes {', '.join(sorted(allowed))}." if allowed else "; it takes no fields."),
                index=index,
                field=unknown[0],
            )
        missing = sorted(required - set(fields))
        if missing:
            raise Refusal(
                "field_required",
                f"{where} ({name} {op_name}) needs {missing[0]}.",
                index=index,
                field=missing[0],
            )
        if op_name == "update" and not fields:
            raise Refusal(
                "field_required",
                f"{where} ({name} update) needs at least one of {', '.join(sorted(allowed))}.",
                index=index,
            )
        target = raw.get("target")
        if op_name == "add" and target is not None:
            raise Refusal("invalid_change", f"{where}: an add takes no target.", index=index, field="target")
        if op_name != "add" and (target is None or target == ""):
            raise Refusal(
                "target_required",
                f"{where}: say which {name} (its id or exact {KINDS[name].label}).",
                index=index,
            )
        if isinstance(target, bool) or not isinstance(target, int | str | None):
            raise Refusal(
                "invalid_change", f"{where}: a target is an id or a title.", index=index, field="target"
            )
        ops.append(Op(index, KINDS[name], op_name, target, fields))
    return ops


def text_field(op: Op, name: str, *, required: bool, limit: int) -> str | None:
    value = op.fields.get(name)
    if value is None:
        if required:
            raise Refusal(
                "field_required", f"{op.where}: {name} cannot be empty.", index=op.index, field=name
            )
        return None
    if not isinstance(value, str):
        raise Refusal("invalid_value", f"{op.where}: {name} must be text.", index=op.index, field=name)
    value = value.strip()
    if required and not value:
        raise Refusal("field_required", f"{op.where}: {name} cannot be blank.", index=op.index, field=name)
    if len(value) > limit:
        raise Refusal(
            "invalid_value", f"{op.where}: {name} is at most {limit} characters.", index=op.index, field=name
        )
    return value


def rank_field(op: Op, name: str, *, maximum: int) -> int | None:
    value = op.fields.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise Refusal(
            f"invalid_{name}",
            f"{op.where}: {name} is a 1-based rank from 1 to {maximum}.",
            index=op.index,
            field=name,
            maximum=maximum,
        )
    return value


def project_status(op: Op) -> str | None:
    value = op.fields.get("status")
    if value is None:
        return None
    if value not in PROJECT_SETTABLE_STATUSES:
        raise Refusal(
            "invalid_value",
            f"{op.where}: a project's status is {', '.join(PROJECT_SETTABLE_STATUSES)} (use op remove to "
            "remove it).",
            index=op.index,
            field="status",
        )
    return value


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
    return Op(0, GOAL, action, goal, fields)
