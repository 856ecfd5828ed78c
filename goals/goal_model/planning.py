"""Turning checked changes into a write: resolve every target (fail closed), apply the ops to the
working state, give new items their ids, and derive the post-images, the claims the person's words
must make and the version's summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from goals.goal_model.kinds import (
    GOAL,
    GOAL_TRANSITIONS,
    KINDS,
    ORDERED,
    PROJECT,
    REMOVED,
    ItemKind,
    entity_of,
)
from goals.goal_model.state import Labels, Resolution, State, resolve
from goals.goal_model.validation import Op
from operator_site import versioned
from operator_site.display import Named, shown_start, visible_text
from operator_site.evidence import Claim
from operator_site.lineage import Image
from operator_site.models import Principal
from operator_site.refusals import Refusal
from operator_site.versioned import provenance


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
    # The fields were checked against the op's schema (validation.clean_ops): typed, stripped,
    # only the ones the op takes; what is left to check here depends on the state.
    fields = op.fields
    if op.op == "add":
        after: Image = {
            "id": item_id,
            kind.label: fields[kind.label],
            "detail": fields.get("detail", ""),
            "status": "active",
        }
        if kind is PROJECT:
            after["status"] = fields.get("status", "active")
            after["goal"] = _link(state, op, links)
        items[item_id] = after
        if order is not None:
            rank = _rank(op, maximum=len(order) + 1)
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
                for name in (kind.label, "detail", "status"):
                    if name in fields:
                        after[name] = fields[name]
                if "goal" in fields:
                    after["goal"] = _link(state, op, links)
            else:  # rerank (goal) / move (priority)
                assert order is not None
                rank = _rank(op, maximum=len(order))
                state.orders[kind.name] = _placed(order, item_id, rank)
        items[item_id] = after
    order_after = list(state.orders[kind.name]) if kind.name in state.orders else None
    return Effect(op, item_id, before, after, order_before, order_after)


def _rank(op: Op, *, maximum: int) -> int | None:
    """The rank an add or a re-rank/move asks for (a 1-based int, by its schema), within the order as
    it stands: at most one past its end for an add, its length otherwise."""
    name = op.kind.order_field or ""
    value = op.fields.get(name)
    if value is not None and value > maximum:
        raise Refusal(
            f"invalid_{name}",
            f"{op.where}: {name} is a 1-based rank from 1 to {maximum}.",
            index=op.index,
            field=name,
            maximum=maximum,
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
    labels: dict[str, Labels] = {}  # each kind's titles read once for every target of the call

    def labels_of(kind: ItemKind) -> Labels:
        if kind.name not in labels:
            labels[kind.name] = Labels(kind, state.items[kind.name].values())
        return labels[kind.name]

    for op in ops:
        entry: dict[str, Any] = {"index": op.index, "entity": op.kind.name, "op": op.op}
        if op.op == "add":
            new_id = state.new_id()
            label = op.fields[op.kind.label]
            pending[op.kind.name].append({"id": new_id, op.kind.label: label, "status": "active"})
            ids.append(new_id)
            entry.update(target=None, outcome="new")
        else:
            found = resolve(state, op.kind, op.target, pending[op.kind.name], labels_of(op.kind))  # type: ignore[arg-type]
            ids.append(found.id if found.id is not None else 0)
            entry.update(found.as_dict(op.target))
            failed |= found.failed
            ambiguous |= found.outcome == "ambiguous"
        op_links: dict[str, int | None] = {}
        if op.kind is PROJECT and "goal" in op.fields:
            target = op.fields["goal"]  # an id or a title (its schema), or None: unlink
            link = (
                Resolution("none")
                if target is None
                else resolve(state, GOAL, target, pending[GOAL.name], labels_of(GOAL))
            )
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


def plan_write(state: State, ops: Sequence[Op]) -> Planned:
    ids, links, report = _resolve_all(state, ops)
    effects = [
        _apply_op(state, op, item_id, op_links) for op, item_id, op_links in zip(ops, ids, links, strict=True)
    ]
    for effect, entry in zip(effects, report, strict=True):
        entry["id"] = effect.item_id
        entry["changed"] = effect.changed
    return Planned(state, effects, report)


def allocate(planned: Planned, principal: Principal, number: int) -> None:
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


def post_images(base: State, planned: Planned, principal: Principal, number: int) -> dict[str, Image | None]:
    """The post-image of every entity the write changes, with this version's provenance."""
    state = planned.state
    images: dict[str, Image | None] = {}
    for name, items in state.items.items():
        kind = KINDS[name]
        for item_id, image in items.items():
            old = base.items[name].get(item_id)
            if old is not None and all(old.get(f) == image.get(f) for f in kind.content):
                continue
            image.update(provenance(principal, number))
            images[entity_of(kind, item_id)] = image
    for entity, kind in ORDERED.items():
        if state.orders[kind.name] != base.orders[kind.name]:
            images[entity] = {"order": state.orders[kind.name]} if state.orders[kind.name] else None
    return images


_CLAIMED = {"pause": "pause", "resume": "resume", "mark_under_review": "review", "remove": "remove"}


def claims_of(planned: Planned) -> list[Claim]:
    """What the person's words must say for each high-stakes change that changes something: the
    item's title (or name) and, for an add or update, its new title and detail (and a word saying to
    remove a detail it empties; and, for an add placed at a rank other than the end, that rank); a
    pause, resume, review or removal its cue word; a re-rank or move its cue word and the position,
    or the direction from where it was."""
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
            cleared = tuple(
                f
                for f in (kind.label, "detail")
                if effect.before is not None and effect.before.get(f) and not effect.after.get(f)
            )
            # An add placed at a rank of its own (not the end, where an add goes) says that rank too.
            order_after = effect.order_after or []
            placed = (
                op == "add"
                and kind.order_field is not None
                and effect.op.fields.get(kind.order_field) is not None
                and effect.item_id in order_after
                and order_after.index(effect.item_id) + 1 < len(order_after)
            )
            out.append(
                Claim(
                    subject=subject,
                    operation=op,
                    target=target,
                    value=" ".join(said) or None,
                    rank=order_after.index(effect.item_id) + 1 if placed else None,
                    ranked=len(order_after) if placed else None,
                    cleared=cleared,
                )
            )
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


def targets_of(state: State, ops: Sequence[Op]) -> list[str]:
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


def summary_of(planned: Planned, principal: Principal) -> str:
    """The version's summary: what each change that changes something did."""
    parts = []
    for effect in planned.effects:
        if not effect.changed:
            continue
        kind = effect.op.kind
        title = effect.after[kind.label]  # cut to 50 characters as shown: the verb stays in view
        label = title if len(visible_text(title)) <= 50 else shown_start(title, 49).rstrip() + "…"
        text = f"” {_VERBS[effect.op.op]}"
        if effect.op.op in ("rerank", "move") or (effect.op.op == "add" and effect.order_after):
            text += f" (#{effect.order_after.index(effect.item_id) + 1})" if effect.order_after else ""
        parts.append((Named(f"{kind.name} “", label, text), kind.high_stakes))
    return versioned.summary_text(parts, principal, shown=5)
