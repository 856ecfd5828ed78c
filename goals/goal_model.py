"""The goal model's rules: the person's goals, priorities and projects, changed only through one
lineage (`operator_site.lineage`) and, for goals and priorities, only with confirmation evidence
(`beliefs.evidence`, scope ``goal_model``). Plain functions taking the acting principal explicitly;
they run inside the caller's transaction (the MCP dispatcher opens one per call; the admin and the
one-tap link wrap theirs) and each runs in a savepoint of its own, so a `Refusal` leaves nothing
written — no row, no version.

Entities of the lineage (each with an exact pre- and post-image per version):

- ``goal/<id>``: title, detail, status (active | paused | under_review | removed), provenance.
- ``priority/<id>``: name, detail, status (active | removed), provenance.
- ``project/<id>``: title, detail, status (active | paused | done | removed), goal link, provenance.
- ``ranking/goals``: the goals in order of importance (``{"order": [ids]}``): every goal that is
  not removed, so ranks are dense and unique by construction. A goal's ``importance`` column is
  written from this entity only.
- ``ranking/priorities``: the active priorities in order (``position``).

Keeping the order as one entity is what makes undo safe: undoing "add a goal at rank 1" restores
the ranking it superseded, and a later version that re-ranked in between is a ``revert_conflict``
rather than a silent hole in the ranks.

Stakes: goals and priorities (and their order) describe where the person is heading, so they are
high-stakes, exactly as the world model's ``goal`` kind: confirmedInConversation plus a quote that
matches a recent human-authored instruction and mentions the goal (its title) or the new value;
one instruction authorises a change of a given goal once (and the addition of a given title
once). Projects are low-stakes (the world model's ``project`` kind), applied freely. Every change
and every revert notifies the person with a notice carrying a one-tap revert link: a safety notice
when it touched anything high-stakes, an ordinary one when it touched projects only.

Targets are found by id, or by a title (a name, for priorities) compared case-insensitively with
whitespace collapsed: it must match exactly one item. Items that are not removed are searched
first; removed ones only when no live item matches. Missing or ambiguous targets are refused with
the candidates, before anything is written.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from beliefs.evidence import (
    ApprovalEvidence,
    Claim,
    Confirmation,
    check_confirmation,
    evidence_columns,
    evidence_from_columns,
    evidence_summary,
    record_confirmation_use,
)
from goals.models import Goal, GoalModelChange, GoalModelItem, GoalModelVersion, Priority, Project
from operator_site.lineage import (
    Committed,
    EntityChange,
    Image,
    Lineage,
    LineageRevertHandler,
    Plan,
    Reverter,
    diff_images,
    notify_version,
)
from operator_site.models import Notification, Principal
from operator_site.notifications import unacknowledged_safety_notices
from operator_site.refusals import Refusal

SCOPE = "goal_model"  # notification subject kind, confirmation-use scope
MAX_CHANGES = 50
MAX_TITLE_CHARS = 300
MAX_DETAIL_CHARS = 4000
MAX_CANDIDATES = 10
GOAL_ACTIONS = ("pause", "resume", "add", "remove", "mark_under_review", "rerank")


# --- the three kinds of item -----------------------------------------------------------------------
@dataclass(frozen=True)
class ItemKind:
    name: str
    model: type[GoalModelItem]
    label: str  # the field a target may name: "title" or "name"
    statuses: tuple[str, ...]
    order_entity: str | None  # the entity holding this kind's order (None: unordered)
    order_field: str | None  # the live column written from it
    high_stakes: bool

    @property
    def content(self) -> tuple[str, ...]:
        extra = ("goal",) if self.name == "project" else ()
        return (self.label, "detail", "status", *extra)

    @property
    def order_label(self) -> str:
        return "goal ranking" if self.name == "goal" else "priority order"


GOAL_RANKING = "ranking/goals"
PRIORITY_ORDER = "ranking/priorities"
GOAL = ItemKind("goal", Goal, "title", tuple(Goal.Status.values), GOAL_RANKING, "importance", True)
PRIORITY = ItemKind(
    "priority", Priority, "name", tuple(Priority.Status.values), PRIORITY_ORDER, "position", True
)
PROJECT = ItemKind("project", Project, "title", tuple(Project.Status.values), None, None, False)
KINDS: dict[str, ItemKind] = {k.name: k for k in (GOAL, PRIORITY, PROJECT)}
ORDERED: dict[str, ItemKind] = {GOAL_RANKING: GOAL, PRIORITY_ORDER: PRIORITY}
REMOVED = "removed"

# What each op may carry in `fields`, and what it must.
OPS: dict[tuple[str, str], tuple[frozenset[str], frozenset[str]]] = {
    ("goal", "add"): (frozenset({"title", "detail", "importance"}), frozenset({"title"})),
    ("goal", "update"): (frozenset({"title", "detail"}), frozenset()),
    ("goal", "pause"): (frozenset(), frozenset()),
    ("goal", "resume"): (frozenset(), frozenset()),
    ("goal", "mark_under_review"): (frozenset(), frozenset()),
    ("goal", "remove"): (frozenset(), frozenset()),
    ("goal", "rerank"): (frozenset({"importance"}), frozenset({"importance"})),
    ("priority", "add"): (frozenset({"name", "detail", "position"}), frozenset({"name"})),
    ("priority", "update"): (frozenset({"name", "detail"}), frozenset()),
    ("priority", "move"): (frozenset({"position"}), frozenset({"position"})),
    ("priority", "remove"): (frozenset(), frozenset()),
    ("project", "add"): (frozenset({"title", "detail", "status", "goal"}), frozenset({"title"})),
    ("project", "update"): (frozenset({"title", "detail", "status", "goal"}), frozenset()),
    ("project", "remove"): (frozenset(), frozenset()),
}
# Goal status transitions: action -> (statuses it may start from, status it leads to).
GOAL_TRANSITIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "pause": (("active", "under_review"), "paused"),
    "resume": (("paused", "under_review"), "active"),
    "mark_under_review": (("active", "paused"), "under_review"),
    "remove": (("active", "paused", "under_review"), "removed"),
}
PROJECT_SETTABLE_STATUSES = ("active", "paused", "done")


def entity_of(kind: ItemKind, item_id: int) -> str:
    return f"{kind.name}/{item_id}"


def split_entity(entity: str) -> tuple[ItemKind, int]:
    name, _, number = entity.partition("/")
    return KINDS[name], int(number)


def normalise_label(text: str) -> str:
    """Titles and names compare case-insensitively with whitespace collapsed."""
    return " ".join((text or "").split()).casefold()


def is_high_stakes(entity: str) -> bool:
    if entity in ORDERED:
        return True
    return split_entity(entity)[0].high_stakes


# --- entities and images ---------------------------------------------------------------------------
def image_of(kind: ItemKind, row: GoalModelItem) -> Image:
    """An item's live state as the JSON image the lineage records."""
    image: Image = {
        "id": row.pk,
        kind.label: getattr(row, kind.label),
        "detail": row.detail,
        "status": row.status,
    }
    if kind is PROJECT:
        image["goal"] = row.goal_id  # type: ignore[attr-defined]
    image.update(
        source={"id": row.source_principal_id, "name": row.source_name, "kind": row.source_kind},
        set_in_version=row.set_in_version,
        evidence=evidence_from_columns(row.evidence_instruction_id, row.evidence_span, row.evidence_approval),
    )
    return image


def _live_order(kind: ItemKind) -> list[int]:
    column = kind.order_field
    return list(
        kind.model.everything.filter(**{f"{column}__isnull": False})
        .order_by(column)
        .values_list("id", flat=True)
    )


def _apply_order(kind: ItemKind, ids: Sequence[int]) -> None:
    """Write `importance`/`position` from an order without ever holding a rank twice: the rows
    whose rank changes are cleared first, then given their new ranks."""
    column = kind.order_field
    current = dict(kind.model.everything.filter(**{f"{column}__isnull": False}).values_list("id", column))
    target = {item_id: rank for rank, item_id in enumerate(ids, start=1)}
    moving = sorted(i for i in set(current) | set(target) if current.get(i) != target.get(i))
    if not moving:
        return
    kind.model.everything.filter(id__in=moving).update(**{column: None})
    for item_id in moving:
        if item_id in target:
            kind.model.everything.filter(id=item_id).update(**{column: target[item_id]})


class GoalModelStore:
    """The goal model's live entities: goal, priority and project rows, and the two orders."""

    def snapshot(self, entity: str) -> Image | None:
        if entity in ORDERED:
            order = _live_order(ORDERED[entity])
            return {"order": order} if order else None  # an empty order is the absent entity
        kind, item_id = split_entity(entity)
        row = kind.model.everything.filter(pk=item_id, present=True).first()
        return image_of(kind, row) if row else None

    def apply(
        self, entity: str, before: Image | None, image: Image | None, version: GoalModelVersion
    ) -> None:
        if entity in ORDERED:
            _apply_order(ORDERED[entity], image["order"] if image else [])
            return
        kind, item_id = split_entity(entity)
        rows = kind.model.everything.filter(pk=item_id)
        if image is None:  # a tombstone: the id stays taken, links to it stay intact
            rows.update(present=False, last_version=version.number, updated_at=timezone.now())
            return
        values: dict[str, Any] = {
            kind.label: image[kind.label],
            "detail": image["detail"],
            "status": image["status"],
            "present": True,
            "source_principal_id": image["source"]["id"],
            "source_name": image["source"]["name"],
            "source_kind": image["source"]["kind"],
            "set_in_version": image["set_in_version"],
            **evidence_columns(image.get("evidence")),
            "last_version": version.number,
            "updated_at": timezone.now(),
        }
        if kind is PROJECT:
            values["goal_id"] = image["goal"]
        if not rows.update(**values):
            kind.model.everything.create(pk=item_id, **values)


GOAL_MODEL = Lineage("goal model", GoalModelVersion, GoalModelChange, GoalModelStore())


def current_version() -> int:
    """The goal model's newest version number (0: never written). Pass it as `expected_version`."""
    return GOAL_MODEL.current_version()


# --- the working state of one write ----------------------------------------------------------------
@dataclass
class State:
    """Every present item (by kind, by id) and the two orders, as images; changed in memory by the
    ops of one call, then compared with what was loaded. New items get negative ids until the
    write is certain to happen."""

    items: dict[str, dict[int, Image]]
    orders: dict[str, list[int]]
    next_new: int = -1

    @classmethod
    def load(cls) -> State:
        items = {
            kind.name: {row.pk: image_of(kind, row) for row in kind.model.objects.order_by("id")}
            for kind in KINDS.values()
        }
        return cls(items, {GOAL.name: _live_order(GOAL), PRIORITY.name: _live_order(PRIORITY)})

    def copy(self) -> State:
        return State(
            {k: {i: dict(img) for i, img in v.items()} for k, v in self.items.items()},
            {k: list(v) for k, v in self.orders.items()},
            self.next_new,
        )

    def new_id(self) -> int:
        self.next_new -= 1
        return self.next_new + 1


def _brief(kind: ItemKind, image: Image, order: Sequence[int] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": image["id"], kind.label: image[kind.label], "status": image["status"]}
    if order is not None and image["id"] in order:
        out[kind.order_field] = order.index(image["id"]) + 1
    return out


@dataclass
class Resolution:
    outcome: str  # resolved | new | missing | ambiguous | none (an explicit unlink)
    id: int | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.outcome in ("missing", "ambiguous")

    def as_dict(self, target: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"target": target, "outcome": self.outcome}
        if self.id is not None:
            out["id"] = self.id
        if self.candidates or self.failed:
            out["candidates"] = self.candidates
        return out


def _resolve(state: State, kind: ItemKind, target: int | str, pending: Sequence[Image] = ()) -> Resolution:
    """Find one item by id or by its exact title/name (case and spacing ignored). `pending` are
    items added earlier in the same call (they can be named by title, not by id)."""
    items = state.items[kind.name]
    order = state.orders.get(kind.name)
    if isinstance(target, int):
        if target in items:
            return Resolution("resolved", target)
        return Resolution("missing")
    wanted = normalise_label(target)
    pool = [*items.values(), *pending]
    matches = [img for img in pool if wanted and normalise_label(img[kind.label]) == wanted]
    live = [img for img in matches if img["status"] != REMOVED]
    chosen = live or matches
    if len(chosen) == 1:
        return Resolution("resolved", chosen[0]["id"])
    if chosen:
        ranked = sorted(chosen, key=lambda img: img["id"])
        return Resolution(
            "ambiguous", candidates=[_brief(kind, img, order) for img in ranked][:MAX_CANDIDATES]
        )
    names = {normalise_label(img[kind.label]): img for img in pool if img["status"] != REMOVED}
    close = difflib.get_close_matches(wanted, list(names), n=5, cutoff=0.5)
    close += [n for n in names if wanted and (wanted in n or n in wanted) and n not in close]
    return Resolution("missing", candidates=[_brief(kind, names[n], order) for n in close[:5]])


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


@dataclass
class Effect:
    """What one op did to the working state: its item before and after, and its kind's order."""

    op: Op
    item_id: int
    before: Image | None
    after: Image
    order_before: list[int] | None
    order_after: list[int] | None

    @property
    def changed(self) -> bool:
        content = self.op.kind.content
        if self.before is None:
            return True
        if any(self.before.get(f) != self.after.get(f) for f in content):
            return True
        return self.order_before != self.order_after


def _clean_ops(changes: Sequence[Mapping[str, Any]]) -> list[Op]:
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


def _text(op: Op, name: str, *, required: bool, limit: int) -> str | None:
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


def _rank(op: Op, name: str, *, maximum: int) -> int | None:
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


def _placed(order: list[int], item_id: int, rank: int | None) -> list[int]:
    out = [i for i in order if i != item_id]
    out.insert(len(out) if rank is None else rank - 1, item_id)
    return out


def _transition_refusal(op: Op, image: Image, allowed: Sequence[str]) -> Refusal:
    label = op.kind.label
    return Refusal(
        "invalid_transition",
        f"{op.where}: {op.kind.name} #{image['id']} “{image[label]}” is {image['status']}; "
        f"{op.op.replace('_', ' ')} needs it to be {' or '.join(allowed)}. Nothing was written.",
        index=op.index,
        id=image["id"],
        status=image["status"],
        allowed_from=list(allowed),
    )


def _apply_op(state: State, op: Op, item_id: int, links: Mapping[str, int | None]) -> Effect:
    kind, items = op.kind, state.items[op.kind.name]
    order = state.orders.get(kind.name)
    order_before = list(order) if order is not None else None
    before = dict(items[item_id]) if item_id in items else None
    if before is None and op.op != "add":  # added later in this list than the change naming it
        raise Refusal(
            "invalid_change",
            f"{op.where}: it names a {kind.name} that is only added further down the list; put the add "
            "first.",
            index=op.index,
        )
    if op.op == "add":
        after: Image = {
            "id": item_id,
            kind.label: _text(op, kind.label, required=True, limit=MAX_TITLE_CHARS),
            "detail": _text(op, "detail", required=False, limit=MAX_DETAIL_CHARS) or "",
            "status": "active",
        }
        if kind is PROJECT:
            after["status"] = _project_status(op) or "active"
            after["goal"] = _link(state, op, links)
        items[item_id] = after
        if order is not None:
            rank = _rank(op, kind.order_field or "", maximum=len(order) + 1)
            state.orders[kind.name] = _placed(order, item_id, rank)
    else:
        after = dict(before)  # type: ignore[arg-type]
        if op.op in GOAL_TRANSITIONS:
            allowed, result = GOAL_TRANSITIONS[op.op]
            if kind is not GOAL and op.op == "remove":
                allowed = tuple(s for s in kind.statuses if s != REMOVED)
            if after["status"] not in allowed:
                raise _transition_refusal(op, after, allowed)
            after["status"] = result
            if result == REMOVED and order is not None:
                state.orders[kind.name] = [i for i in order if i != item_id]
        else:  # update, rerank, move: only on an item that is not removed
            live = tuple(s for s in kind.statuses if s != REMOVED)
            if after["status"] == REMOVED:
                raise _transition_refusal(op, after, live)
            if op.op == "update":
                label = (
                    _text(op, kind.label, required=True, limit=MAX_TITLE_CHARS)
                    if kind.label in op.fields
                    else None
                )
                detail = _text(op, "detail", required=False, limit=MAX_DETAIL_CHARS)
                if label is not None:
                    after[kind.label] = label
                if detail is not None:
                    after["detail"] = detail
                if kind is PROJECT:
                    status = _project_status(op)
                    if status is not None:
                        after["status"] = status
                    if "goal" in op.fields:
                        after["goal"] = _link(state, op, links)
            else:  # rerank (goal) / move (priority)
                assert order is not None
                rank = _rank(op, kind.order_field or "", maximum=len(order))
                state.orders[kind.name] = _placed(order, item_id, rank)
        items[item_id] = after
    order_after = list(state.orders[kind.name]) if kind.name in state.orders else None
    return Effect(op, item_id, before, after, order_before, order_after)


def _project_status(op: Op) -> str | None:
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


def _link(state: State, op: Op, links: Mapping[str, int | None]) -> int | None:
    goal_id = links.get("goal")
    if goal_id is None:
        return None
    goal = state.items[GOAL.name].get(goal_id)
    if goal is None:
        raise Refusal(
            "invalid_change",
            f"{op.where}: the goal it links to is only added further down the list; put the add first.",
            index=op.index,
            field="goal",
        )
    if goal["status"] == REMOVED:
        raise Refusal(
            "invalid_link",
            f"{op.where}: goal #{goal_id} “{goal['title']}” is removed; a project cannot be linked to it.",
            index=op.index,
            field="goal",
            goal=goal_id,
        )
    return goal_id


# --- planning a write --------------------------------------------------------------------------------
@dataclass
class Planned:
    state: State
    effects: list[Effect]
    resolution: list[dict[str, Any]]


def _resolve_all(
    state: State, ops: Sequence[Op]
) -> tuple[list[int], list[dict[str, int | None]], list[dict]]:
    """Pass one: resolve every target and link (adds get provisional ids). Refuses, listing how
    every change resolved, if any target or link is missing or ambiguous."""
    pending: dict[str, list[Image]] = {name: [] for name in KINDS}
    ids: list[int] = []
    links: list[dict[str, int | None]] = []
    report: list[dict[str, Any]] = []
    failed = ambiguous = False
    for op in ops:
        entry: dict[str, Any] = {"index": op.index, "entity": op.kind.name, "op": op.op}
        if op.op == "add":
            new_id = state.new_id()
            label = op.fields.get(op.kind.label)
            if isinstance(label, str):
                pending[op.kind.name].append({"id": new_id, op.kind.label: label, "status": "active"})
            ids.append(new_id)
            entry.update(target=None, outcome="new")
        else:
            found = _resolve(state, op.kind, op.target, pending[op.kind.name])  # type: ignore[arg-type]
            ids.append(found.id if found.id is not None else 0)
            entry.update(found.as_dict(op.target))
            failed |= found.failed
            ambiguous |= found.outcome == "ambiguous"
        op_links: dict[str, int | None] = {}
        if op.kind is PROJECT and "goal" in op.fields:
            target = op.fields["goal"]
            if target is None or target == "":
                link = Resolution("none")
            elif isinstance(target, bool) or not isinstance(target, int | str):
                raise Refusal(
                    "invalid_value",
                    f"{op.where}: goal is a goal's id or title.",
                    index=op.index,
                    field="goal",
                )
            else:
                link = _resolve(state, GOAL, target, pending[GOAL.name])
            op_links["goal"] = link.id
            entry["links"] = {"goal": link.as_dict(target)}
            failed |= link.failed
            ambiguous |= link.outcome == "ambiguous"
        links.append(op_links)
        report.append(entry)
    if failed:
        bad = [e["index"] for e in report if _entry_failed(e)]
        raise Refusal(
            "ambiguous_target" if ambiguous else "target_not_found",
            "Nothing was written: "
            + "; ".join(_entry_problem(e) for e in report if _entry_failed(e))
            + ". Name each target by its id (see candidates) or by a title that matches exactly one.",
            failed=bad,
            resolution=report,
        )
    seen: dict[tuple[str, int], int] = {}
    for op, item_id in zip(ops, ids, strict=True):
        if (op.kind.name, item_id) in seen:
            first = seen[(op.kind.name, item_id)]
            raise Refusal(
                "duplicate_target",
                f"Changes {first + 1} and {op.index + 1} both change {op.kind.name} #{item_id}: ambiguous, "
                "nothing was written. Make it one change (an add takes its importance or position).",
                indices=[first, op.index],
                resolution=report,
            )
        seen[(op.kind.name, item_id)] = op.index
    return ids, links, report


def _entry_failed(entry: dict[str, Any]) -> bool:
    bad = entry.get("outcome") in ("missing", "ambiguous")
    return bad or any(v["outcome"] in ("missing", "ambiguous") for v in entry.get("links", {}).values())


def _entry_problem(entry: dict[str, Any]) -> str:
    parts = []
    where = f"change {entry['index'] + 1} ({entry['entity']} {entry['op']})"
    if entry.get("outcome") in ("missing", "ambiguous"):
        parts.append(_problem_text(where, entry["entity"], entry))
    for name, link in entry.get("links", {}).items():
        if link["outcome"] in ("missing", "ambiguous"):
            parts.append(_problem_text(f"{where}, its {name} link", name, link))
    return "; ".join(parts)


def _problem_text(where: str, kind: str, found: dict[str, Any]) -> str:
    if found["outcome"] == "ambiguous":
        ids = ", ".join(f"#{c['id']}" for c in found["candidates"])
        return f"{where}: {found['target']!r} matches {len(found['candidates'])} {kind}s ({ids})"
    return f"{where}: no {kind} {found['target']!r}"


def _plan(state: State, ops: Sequence[Op]) -> Planned:
    ids, links, report = _resolve_all(state, ops)
    effects = [
        _apply_op(state, op, item_id, op_links) for op, item_id, op_links in zip(ops, ids, links, strict=True)
    ]
    for effect, entry in zip(effects, report, strict=True):
        entry["id"] = effect.item_id
        entry["changed"] = effect.changed
    return Planned(state, effects, report)


def _allocate(planned: Planned, principal: Principal, number: int) -> None:
    """Give the new items their ids: a tombstone row each (present=False, so the lineage sees no
    pre-image), written only now that the write is certain to be attempted. The ids are never
    reused; the rows roll back with the call if it is refused."""
    state = planned.state
    mapping: dict[str, dict[int, int]] = {name: {} for name in KINDS}
    for name, items in state.items.items():
        kind = KINDS[name]
        for provisional in sorted((i for i in items if i < 0), reverse=True):  # in the order of the changes
            image = items[provisional]
            row = kind.model.everything.create(
                present=False,
                **{kind.label: image[kind.label]},
                detail=image["detail"],
                status=image["status"],
                source_principal=principal,
                source_name=principal.name,
                source_kind=principal.kind,
                set_in_version=number,
                last_version=number,
            )
            mapping[name][provisional] = row.pk
    if not any(mapping.values()):
        return
    for name, items in state.items.items():
        remap = mapping[name]
        state.items[name] = {remap.get(i, i): img for i, img in items.items()}
        for img in state.items[name].values():
            img["id"] = remap.get(img["id"], img["id"])
            if name == PROJECT.name and img.get("goal") is not None:
                img["goal"] = mapping[GOAL.name].get(img["goal"], img["goal"])
    for name, order in state.orders.items():
        state.orders[name] = [mapping[name].get(i, i) for i in order]
    for effect, entry in zip(planned.effects, planned.resolution, strict=True):
        remap = mapping[effect.op.kind.name]
        effect.item_id = remap.get(effect.item_id, effect.item_id)
        effect.after = state.items[effect.op.kind.name][effect.item_id]
        entry["id"] = effect.item_id
        for side in ("order_before", "order_after"):
            order = getattr(effect, side)
            if order is not None:
                setattr(effect, side, [remap.get(i, i) for i in order])
        for link in entry.get("links", {}).values():
            if link.get("id") is not None:
                link["id"] = mapping[GOAL.name].get(link["id"], link["id"])


def _images(base: State, planned: Planned, principal: Principal, number: int) -> dict[str, Image | None]:
    """The post-image of every entity the write changes, with this version's provenance."""
    state = planned.state
    images: dict[str, Image | None] = {}
    for name, items in state.items.items():
        kind = KINDS[name]
        for item_id, image in items.items():
            old = base.items[name].get(item_id)
            if old is not None and all(old.get(f) == image.get(f) for f in kind.content):
                continue
            image.update(
                source={"id": principal.id, "name": principal.name, "kind": principal.kind},
                set_in_version=number,
                evidence=None,
            )
            images[entity_of(kind, item_id)] = image
    for entity, kind in ORDERED.items():
        if state.orders[kind.name] != base.orders[kind.name]:
            images[entity] = {"order": state.orders[kind.name]} if state.orders[kind.name] else None
    return images


_CLAIMED = {"pause": "pause", "resume": "resume", "mark_under_review": "review", "remove": "remove"}


def _claims(planned: Planned) -> list[Claim]:
    """What the person's words must say for each high-stakes change that changes something: the
    item's title (or name) and, for an add or update, its new title and detail; a pause, resume,
    review or removal its cue word; a re-rank or move its cue word (and the position, if the words
    name one)."""
    out = []
    for effect in planned.effects:
        kind, op = effect.op.kind, effect.op.op
        if not kind.high_stakes or not effect.changed:
            continue
        subject = entity_of(kind, effect.item_id)
        label_now = effect.after[kind.label]
        target = effect.before[kind.label] if effect.before else label_now
        if op in ("add", "update"):
            said = [
                effect.after[f]
                for f in (kind.label, "detail")
                if effect.after.get(f) and (effect.before is None or effect.before.get(f) != effect.after[f])
            ]
            out.append(Claim(subject=subject, operation=op, target=target, value=" ".join(said) or None))
        elif op in ("rerank", "move"):
            order_before, order_after = effect.order_before or [], effect.order_after or []
            out.append(
                Claim(
                    subject=subject,
                    operation="rank",
                    target=target,
                    rank=order_after.index(effect.item_id) + 1 if effect.item_id in order_after else None,
                    rank_from=order_before.index(effect.item_id) + 1
                    if effect.item_id in order_before
                    else None,
                    ranked=len(order_after),
                )
            )
        else:
            out.append(Claim(subject=subject, operation=_CLAIMED[op], target=target))
    return out


def _targets(state: State, ops: Sequence[Op]) -> list[str]:
    """The entities a write names as its targets (not the items it adds), resolved on `state`: what
    must not have changed since a proposal of it was made. A re-rank or move also targets its
    order."""
    ids, _, _ = _resolve_all(state, ops)
    out = []
    for op, item_id in zip(ops, ids, strict=True):
        if op.op != "add":
            out.append(entity_of(op.kind, item_id))
        if op.op in ("rerank", "move") and op.kind.order_entity:
            out.append(op.kind.order_entity)
    return out


@dataclass
class Outcome:
    committed: Committed | None
    planned: Planned
    confirmation: Confirmation | ApprovalEvidence | None
    high_stakes: bool
    notice: Notification | None = None


def _write(
    *,
    principal: Principal,
    ops: Sequence[Op],
    confirmed: bool | None,
    quote: str | None,
    expected_version: int | None,
    now: datetime | None,
    refuse_unchanged: bool,
    approval: ApprovalEvidence | None = None,
    unchanged_since: int | None = None,
) -> Outcome:
    """Plan, check and commit one goal-model write; `committed` is None when it changes nothing
    (or, with `refuse_unchanged`, that is refused as `nothing_changed`)."""
    draft = GOAL_MODEL.begin(expected_version)
    with GOAL_MODEL.stable(draft):
        base = State.load()
        if unchanged_since is not None:  # before anything else: what was shown must still hold
            GOAL_MODEL.refuse_if_touched_since(unchanged_since, _targets(base.copy(), ops))
        planned = _plan(base.copy(), ops)
        if not any(effect.changed for effect in planned.effects):
            # "Already so" was decided on a read that another writer may have just changed: only a
            # model still at the base version may answer it (else `stable` turns it into a retry).
            unchanged = Refusal(
                "nothing_changed",
                "The goal model already says exactly that; nothing was written.",
                current_version=draft.base,
            )
            if refuse_unchanged or GOAL_MODEL.current_version() != draft.base:
                raise unchanged
            return Outcome(None, planned, None, False)
        _allocate(planned, principal, draft.number)
        images = _images(base, planned, principal, draft.number)
        high = any(is_high_stakes(entity) for entity in images)
        confirmation: Confirmation | ApprovalEvidence | None = None
        if high:
            confirmation = approval or check_confirmation(
                confirmed=confirmed, quote=quote, scope=SCOPE, claims=_claims(planned), now=now
            )
            for entity, image in images.items():
                if image is not None and entity not in ORDERED and is_high_stakes(entity):
                    image["evidence"] = confirmation.image_evidence(entity)
        committed = GOAL_MODEL.commit(
            draft,
            principal=principal,
            images=images,
            evidence=confirmation.as_evidence() if confirmation else None,
            summary=f"{_summary(planned)} (by {principal.name})",
            fields={
                "high_stakes": high,
                "evidence_instruction": getattr(confirmation, "instruction", None),
            },
        )
        if isinstance(confirmation, Confirmation):
            record_confirmation_use(confirmation, version=committed.version.number)
        verify_consistency()
    outcome = Outcome(committed, planned, confirmation, high)
    outcome.notice = _notify(committed, confirmation)
    return outcome


def verify_consistency() -> None:
    """The invariants every version must leave: the ranking holds exactly the goals that are not
    removed (ranks 1..n), the priority order exactly the active priorities, and no present project
    links to an absent goal. Checked inside the write, so a violation rolls everything back."""
    problems = []
    for kind in (GOAL, PRIORITY):
        ranked = _live_order(kind)
        live = set(kind.model.objects.exclude(status=REMOVED).values_list("id", flat=True))
        if set(ranked) != live:
            problems.append(f"the {kind.order_label} does not hold exactly the live {kind.name}s")
        ranks = list(
            kind.model.everything.filter(**{f"{kind.order_field}__isnull": False})
            .order_by(kind.order_field)
            .values_list(kind.order_field, flat=True)
        )
        if ranks != list(range(1, len(ranks) + 1)):
            problems.append(f"the {kind.order_label} is not dense")
    dangling = Project.objects.filter(goal__isnull=False, goal__present=False).values_list("id", flat=True)
    if dangling:
        problems.append(f"project(s) {', '.join(f'#{i}' for i in dangling)} link to an absent goal")
    if problems:
        raise Refusal(
            "goal_model_inconsistent",
            "This write would leave the goal model inconsistent (" + "; ".join(problems) + "); nothing was "
            "written.",
            problems=problems,
        )


# --- the two gated tools -----------------------------------------------------------------------------
@transaction.atomic
def apply_goal_change(
    *,
    principal: Principal,
    action: str,
    goal: int | str | None = None,
    title: str | None = None,
    detail: str | None = None,
    importance: int | None = None,
    confirmed: bool | None = None,
    quote: str | None = None,
    expected_version: int | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Pause, resume, add, remove, mark under review, or re-rank one goal (high-stakes: confirmation
    evidence required). Invalid transitions are refused with the goal's current status."""
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
    ops = [Op(0, GOAL, action, goal, fields)]
    try:
        outcome = _write(
            principal=principal,
            ops=ops,
            confirmed=confirmed,
            quote=quote,
            expected_version=expected_version,
            now=now,
            refuse_unchanged=True,
        )
    except Refusal as refusal:
        _flatten_single(refusal)
        if refusal.code == "nothing_changed":
            refusal.reason = f"The goal is already at importance {importance}; nothing was written."
        raise
    assert outcome.committed is not None
    effect = outcome.planned.effects[0]
    committed = outcome.committed
    return {
        "ok": True,
        "version": committed.version.number,
        "supersedes": committed.version.supersedes,
        "action": action,
        "goal": goal_dict(_goal_image(effect.item_id)),
        "ranking": ranked_goals(statuses=None),
        "changes": [_change_dict(c) for c in committed.changes],
        "high_stakes": outcome.high_stakes,
        "evidence": evidence_summary(outcome.confirmation),
        "notification": outcome.notice.id if outcome.notice else None,
    }


def _flatten_single(refusal: Refusal) -> None:
    """For the one-goal tool, say the candidates at the top level too (there is only one target)."""
    resolution = refusal.extra.get("resolution")
    if refusal.code in ("ambiguous_target", "target_not_found") and resolution:
        refusal.extra["candidates"] = resolution[0].get("candidates", [])
        refusal.extra["goal"] = resolution[0].get("target")


@transaction.atomic
def reconcile_goal_model(
    *,
    principal: Principal,
    changes: Sequence[Mapping[str, Any]],
    confirmed: bool | None = None,
    quote: str | None = None,
    expected_version: int | None = None,
    now: datetime | None = None,
    approval: ApprovalEvidence | None = None,
    unchanged_since: int | None = None,
) -> dict[str, Any]:
    """Apply changes across goals, priorities and projects all together or not at all. Fails closed:
    a missing or ambiguous target (or goal link) anywhere refuses the whole call before anything is
    written, listing how each change resolved. A reconciliation that changes nothing writes no
    version (and needs no confirmation). `approval` and `unchanged_since`: an accepted proposal
    (see `beliefs.services.update_world_model`)."""
    ops = _clean_ops(changes)
    outcome = _write(
        principal=principal,
        ops=ops,
        confirmed=confirmed,
        quote=quote,
        expected_version=expected_version,
        now=now,
        refuse_unchanged=False,
        approval=approval,
        unchanged_since=unchanged_since,
    )
    if outcome.committed is None:
        return {
            "ok": True,
            "written": False,
            "version": current_version(),
            "note": "The goal model already says exactly that; no version was written.",
            "resolution": outcome.planned.resolution,
            "changes": [],
            "high_stakes": False,
            "evidence": None,
            "notification": None,
        }
    committed = outcome.committed
    return {
        "ok": True,
        "written": True,
        "version": committed.version.number,
        "supersedes": committed.version.supersedes,
        "resolution": outcome.planned.resolution,
        "changes": [_change_dict(c) for c in committed.changes],
        "high_stakes": outcome.high_stakes,
        "evidence": evidence_summary(outcome.confirmation),
        "notification": outcome.notice.id if outcome.notice else None,
    }


_VERBS = {
    "add": "added",
    "update": "updated",
    "pause": "paused",
    "resume": "resumed",
    "mark_under_review": "marked under review",
    "remove": "removed",
    "rerank": "re-ranked",
    "move": "moved",
}


def _summary(planned: Planned) -> str:
    parts = []
    for effect in planned.effects:
        if not effect.changed:
            continue
        kind = effect.op.kind
        text = f"{kind.name} “{effect.after[kind.label]}” {_VERBS[effect.op.op]}"
        if effect.op.op in ("rerank", "move") or (effect.op.op == "add" and effect.order_after):
            text += f" (#{effect.order_after.index(effect.item_id) + 1})" if effect.order_after else ""
        parts.append(text)
    text = "; ".join(parts[:5]) + (f"; and {len(parts) - 5} more" if len(parts) > 5 else "")
    return text


# --- notices ---------------------------------------------------------------------------------------
def _notify(committed: Committed, confirmation: Confirmation | ApprovalEvidence | None) -> Notification:
    """Every version — a change or a revert, whatever its stakes — notifies the person: with a safety
    notice if it touched anything high-stakes (goals, priorities, their rankings), else with an
    ordinary one (projects only: held, capped and digested like any other, so free edits can never
    bury a safety notice)."""
    lines = []
    high = False
    for row in _rows(committed.changes):
        marker = "HIGH-STAKES " if row["stakes"] == "high" else ""
        high = high or row["stakes"] == "high"
        lines.append(f"- {marker}{row['what']}: {row['before'] or '—'} → {row['after'] or '—'}")
    return notify_version(GOAL_MODEL, SCOPE, committed, lines, confirmation=confirmation, safety=high)


# --- describing (answers, notices, admin pages, the one-tap link) -------------------------------------
def _labels(ids: Sequence[int], kind: ItemKind) -> dict[int, str]:
    return dict(kind.model.everything.filter(id__in=list(ids)).values_list("id", kind.label))


def _order_text(image: Image | None, labels: Mapping[int, str]) -> str:
    if not image or not image.get("order"):
        return "(none)"
    order = image["order"]
    text = " · ".join(f"{rank}. {labels.get(i, f'#{i}')}" for rank, i in enumerate(order[:20], start=1))
    return text + (f" · … ({len(order) - 20} more)" if len(order) > 20 else "")


def _rows(changes: Sequence[EntityChange]) -> list[dict[str, Any]]:
    """Readable before/after rows: one per changed field of each item, one per changed order."""
    goal_ids: set[int] = set()
    for change in changes:
        for image in (change.before, change.after):
            if image and change.entity == GOAL_RANKING:
                goal_ids |= set(image["order"])
            if image and change.entity.startswith("project/") and image.get("goal"):
                goal_ids.add(image["goal"])
    goal_labels = _labels(sorted(goal_ids), GOAL)
    priority_ids = {
        i
        for c in changes
        if c.entity == PRIORITY_ORDER
        for img in (c.before, c.after)
        if img
        for i in img["order"]
    }
    priority_labels = _labels(sorted(priority_ids), PRIORITY)
    rows = []
    for change in changes:
        if change.entity in ORDERED:
            kind = ORDERED[change.entity]
            labels = goal_labels if kind is GOAL else priority_labels
            rows.append(
                {
                    "what": kind.order_label,
                    "before": _order_text(change.before, labels),
                    "after": _order_text(change.after, labels),
                    "stakes": "high",
                }
            )
            continue
        kind, item_id = split_entity(change.entity)
        present = change.after or change.before or {}
        name = f"{kind.name} #{item_id} “{present.get(kind.label, '')}”"

        def shown(image: Image | None, kind: ItemKind = kind) -> Image | None:
            if image is None or kind is not PROJECT:
                return image
            goal_id = image.get("goal")
            return {
                **image,
                "goal": f"#{goal_id} {goal_labels.get(goal_id, '')}".strip() if goal_id else None,
            }

        for diff in diff_images(shown(change.before), shown(change.after), kind.content):
            rows.append(
                {
                    "what": name if diff["field"] == "*" else f"{name} · {diff['field']}",
                    "before": "" if diff["before"] is None else str(diff["before"]),
                    "after": "" if diff["after"] is None else str(diff["after"]),
                    "stakes": "high" if kind.high_stakes else "low",
                }
            )
    return rows


def _change_dict(change: EntityChange) -> dict[str, Any]:
    if change.entity in ORDERED:
        kind = ORDERED[change.entity]
        return {
            "entity": kind.order_label.replace(" ", "_"),
            "before": (change.before or {}).get("order", []),
            "after": (change.after or {}).get("order", []),
        }
    kind, item_id = split_entity(change.entity)

    def side(image: Image | None) -> dict[str, Any] | None:
        return None if image is None else {f: image.get(f) for f in kind.content}

    return {
        "entity": kind.name,
        "id": item_id,
        "stakes": "high" if kind.high_stakes else "low",
        "before": side(change.before),
        "after": side(change.after),
    }


# --- reverting (`operator_site.lineage.Reverter`: the admin, the one-tap link and the tool) ------------
def _refuse_dangling(plan: Plan) -> None:
    """A revert that would take away a goal a present project still links to (linked by a version
    the revert does not undo) is a conflict: refuse rather than leave a dangling link."""
    absent = {
        split_entity(c.entity)[1] for c in plan.changes if c.entity.startswith("goal/") and c.after is None
    }
    if not absent:
        return
    planned = {split_entity(c.entity)[1]: c.after for c in plan.changes if c.entity.startswith("project/")}
    linked = {
        p for p in Project.objects.filter(goal__in=absent).values_list("id", flat=True) if p not in planned
    }
    linked |= {p for p, after in planned.items() if after is not None and after.get("goal") in absent}
    if not linked:
        return
    versions = sorted(
        set(
            GOAL_MODEL.change_model.objects.filter(
                entity__in=[entity_of(PROJECT, p) for p in linked]
            ).values_list("version_id", flat=True)
        )
    )
    raise Refusal(
        "revert_conflict",
        f"That would take away goal(s) {', '.join(f'#{g}' for g in sorted(absent))} while project(s) "
        f"{', '.join(f'#{p}' for p in sorted(linked))} still link to them (written by version(s) "
        f"{', '.join(map(str, versions))}). Unlink or undo those first, or revert to a version as a "
        "whole. Nothing was written.",
        projects=sorted(linked),
        versions=versions,
    )


def _notify_revert(committed: Committed, high_stakes: bool) -> Notification:
    """Every revert is announced, whatever its stakes (as every goal-model write is)."""
    return _notify(committed, None)


REVERTER = Reverter(
    GOAL_MODEL,
    rows=_rows,
    change_dict=_change_dict,
    is_high=is_high_stakes,
    notify=_notify_revert,
    undo_note=(
        "What it touched goes back to exactly what it was before version {number}; later versions that "
        "changed other goals, priorities or projects keep their changes."
    ),
    check_plan=_refuse_dangling,
    verify=verify_consistency,
    savepoint=True,  # like every write of the goal model: a Refusal leaves nothing written
)
# Undo one version, bring the whole goal model back to a version, the revert tool (the caller's own
# last change, or `to_version`) and what each would do, for a confirmation page: the lineage's
# (`operator_site.lineage.Reverter`), bound above to the goal model's own parts.
undo_version = REVERTER.undo
restore_version = REVERTER.restore
revert_goal_model = REVERTER.revert
describe_undo = REVERTER.describe_undo
describe_restore = REVERTER.describe_restore


class GoalModelRevertHandler(LineageRevertHandler):
    """The one-tap link behind a goal-model notice: undo the version the notice reports."""

    reverter = REVERTER


# --- reading (the context packet, answers, the admin) ------------------------------------------------
def _goal_image(goal_id: int) -> Image:
    row = Goal.everything.get(pk=goal_id)
    return {**image_of(GOAL, row), "importance": row.importance}


def goal_dict(image: Image) -> dict[str, Any]:
    return {
        "id": image["id"],
        "title": image["title"],
        "detail": image["detail"] or None,
        "status": image["status"],
        "importance": image.get("importance"),
        "source": {"principal": image["source"]["name"], "kind": image["source"]["kind"]},
        "version": image["set_in_version"],
        "evidence": image.get("evidence"),
    }


def ranked_goals(*, statuses: Sequence[str] | None = ("active",), limit: int = 50) -> list[dict[str, Any]]:
    """Goals in order of importance (1 = most important), by default only the active ones; `statuses`
    None gives every ranked goal (active, paused, under review). Removed goals are never ranked.
    Each: id, title, detail, status, importance, source, version, evidence."""

    return ranked_goal_dicts(ranked_goals_query(None if statuses is None else tuple(statuses), limit))


def ranked_goals_query(statuses: tuple[str, ...] | None = ("active",), limit: int = 50) -> QuerySet[Goal]:
    """The rows of `ranked_goals` (also read by the orientation packet in its one statement)."""
    rows = Goal.objects.filter(importance__isnull=False).order_by("importance")
    if statuses is not None:
        rows = rows.filter(status__in=list(statuses))
    return rows[: max(0, limit)]


def ranked_goal_dicts(rows: Iterable[Goal]) -> list[dict[str, Any]]:
    return [goal_dict({**image_of(GOAL, g), "importance": g.importance}) for g in rows]


def ordered_priorities(*, limit: int = 50) -> list[dict[str, Any]]:
    """The person's active priorities in order (position 1 first): id, name, detail, position."""
    return priority_dicts(ordered_priorities_query(limit))


def ordered_priorities_query(limit: int = 50) -> QuerySet[Priority]:
    return Priority.objects.filter(position__isnull=False).order_by("position")[: max(0, limit)]


def priority_dicts(rows: Iterable[Priority]) -> list[dict[str, Any]]:
    return [{"id": p.pk, "name": p.name, "detail": p.detail or None, "position": p.position} for p in rows]


def project_list(
    *, statuses: Sequence[str] | None = ("active",), goal: int | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """Projects (by default the active ones), each with its goal (id and title) if it has one,
    ordered by the importance of their goal (unlinked last), then title."""

    query = project_list_query(None if statuses is None else tuple(statuses), goal, limit)
    return [project_dict(p) for p in query]


def project_list_query(
    statuses: tuple[str, ...] | None = ("active",), goal: int | None = None, limit: int = 100
) -> QuerySet[Project]:
    """The rows of `project_list` (also read by the orientation packet in its one statement)."""
    rows = Project.objects.select_related("goal")
    if statuses is not None:
        rows = rows.filter(status__in=list(statuses))
    if goal is not None:
        rows = rows.filter(goal_id=goal)
    return rows.order_by(F("goal__importance").asc(nulls_last=True), "title", "id")[: max(0, limit)]


def project_dict(project: Project) -> dict[str, Any]:
    goal = project.goal
    return {
        "id": project.pk,
        "title": project.title,
        "detail": project.detail or None,
        "status": project.status,
        "goal": {"id": goal.pk, "title": goal.title, "status": goal.status if goal.present else "absent"}
        if goal
        else None,
        "version": project.set_in_version,
    }


def pending_notices(limit: int = 20) -> list[dict[str, Any]]:
    notices = unacknowledged_safety_notices().filter(subject_kind=SCOPE)[:limit]
    return [
        {"id": n.id, "kind": n.kind, "title": n.title, "version": n.subject_id, "created": n.created_at}
        for n in notices
    ]


def goal_model_snapshot(*, as_of_version: int | None = None, include_removed: bool = False) -> dict[str, Any]:
    """The whole goal model: version, goals in ranking order (then removed ones if asked), priorities
    in order, projects; pending notices. `as_of_version` shows it as it stood then."""
    current = current_version()
    if as_of_version is None:
        state = State.load()
    else:
        if not 0 <= as_of_version <= current:
            raise Refusal(
                "version_not_found",
                f"The goal model has no version {as_of_version} (current: {current}).",
                current_version=current,
            )
        images = GOAL_MODEL.state_as_of(as_of_version)
        state = State({name: {} for name in KINDS}, {GOAL.name: [], PRIORITY.name: []})
        for entity, image in images.items():
            if entity in ORDERED:
                state.orders[ORDERED[entity].name] = list(image["order"])
            else:
                kind, item_id = split_entity(entity)
                state.items[kind.name][item_id] = image
    goal_order = state.orders[GOAL.name]
    goals = [
        goal_dict({**state.items[GOAL.name][i], "importance": rank})
        for rank, i in enumerate(goal_order, start=1)
    ]
    if include_removed:
        goals += [
            goal_dict({**img, "importance": None})
            for i, img in sorted(state.items[GOAL.name].items())
            if img["status"] == REMOVED
        ]
    priorities = [
        {
            **{k: state.items[PRIORITY.name][i][k] for k in ("id", "name", "detail", "status")},
            "position": rank,
        }
        for rank, i in enumerate(state.orders[PRIORITY.name], start=1)
    ]
    titles = {i: img["title"] for i, img in state.items[GOAL.name].items()}
    projects = [
        {
            "id": img["id"],
            "title": img["title"],
            "detail": img["detail"] or None,
            "status": img["status"],
            "goal": {"id": img["goal"], "title": titles.get(img["goal"])} if img.get("goal") else None,
        }
        for _, img in sorted(state.items[PROJECT.name].items())
        if include_removed or img["status"] != REMOVED
    ]
    return {
        "ok": True,
        "version": current,
        "as_of_version": as_of_version,
        "goals": goals,
        "priorities": priorities,
        "projects": projects,
        "pending_notices": pending_notices(),
    }


# --- links from the board ------------------------------------------------------------------------------
def resolve_link(kind_name: str, target: int | str) -> GoalModelItem:
    """The goal or project a task links to: by id, or by a title matching exactly one item (live
    ones first, as everywhere in the goal model). Refuses (`target_not_found`, `ambiguous_target`
    with candidates, `invalid_link` for a removed one) rather than guess."""
    kind = KINDS[kind_name]
    items = {row["id"]: row for row in kind.model.objects.values("id", kind.label, "status")}
    found = _resolve(State({kind.name: items}, {}), kind, target)
    if found.failed:
        what = "matches several" if found.outcome == "ambiguous" else "matches no"
        raise Refusal(
            "ambiguous_target" if found.outcome == "ambiguous" else "target_not_found",
            f"{target!r} {what} {kind.name}s; link by id (see candidates). Nothing was written.",
            field=kind.name,
            target=target,
            candidates=found.candidates,
        )
    row = kind.model.objects.get(pk=found.id)
    if row.status == REMOVED:
        raise Refusal(
            "invalid_link",
            f"{kind.name} #{row.pk} “{getattr(row, kind.label)}” is removed; work cannot be linked to it.",
            field=kind.name,
            target=target,
        )
    return row


__all__ = [
    "GOAL_MODEL",
    "REVERTER",
    "SCOPE",
    "GoalModelRevertHandler",
    "apply_goal_change",
    "current_version",
    "describe_restore",
    "describe_undo",
    "goal_model_snapshot",
    "ordered_priorities",
    "project_list",
    "ranked_goals",
    "reconcile_goal_model",
    "resolve_link",
    "restore_version",
    "revert_goal_model",
    "undo_version",
    "verify_consistency",
]
