"""What a goal-model version did, readable: before/after rows (notices, the admin, confirmation
pages) and one change as a tool's answer shows it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from goals.goal_model.kinds import (
    GOAL,
    GOAL_RANKING,
    ORDERED,
    PRIORITY,
    PRIORITY_ORDER,
    PROJECT,
    ItemKind,
    split_entity,
)
from operator_site import versioned
from operator_site.display import Named
from operator_site.lineage import EntityChange, Image


# --- describing (answers, notices, admin pages, the one-tap link) -------------------------------------
def _labels(ids: Sequence[int], kind: ItemKind) -> dict[int, str]:
    return dict(kind.model.everything.filter(id__in=list(ids)).values_list("id", kind.label))


def _order_text(image: Image | None, labels: Mapping[int, str]) -> str:
    """A ranking as the person reads it: "1. <title> · 2. <title> …", each title an identifier."""
    if not image or not image.get("order"):
        return "(none)"
    order = image["order"]
    text = Named.join(" · ", [_label(f"{rank}. ", i, labels) for rank, i in enumerate(order[:20], start=1)])
    return text.then(f" · … ({len(order) - 20} more)" if len(order) > 20 else "")


def _link(goal_id: int, labels: Mapping[int, str]) -> Named:
    """A project's goal: "#3 <title>", or "#3" if it has none."""
    return Named(f"#{goal_id} ", labels[goal_id]) if labels.get(goal_id) else Named(f"#{goal_id}")


def _label(words: str, item_id: int, labels: Mapping[int, str]) -> Named:
    """An item by its title (an identifier) after `words`, or by its id if it has none."""
    return Named(words, labels[item_id]) if labels.get(item_id) else Named(f"{words}#{item_id}")


def readable_rows(changes: Sequence[EntityChange]) -> list[dict[str, Any]]:
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
        name = Named(f"{kind.name} #{item_id} “", present.get(kind.label, ""), "”")

        def shown(image: Image | None, kind: ItemKind = kind) -> Image | None:
            if image is None or kind is not PROJECT:
                return image
            goal_id = image.get("goal")
            return {
                **image,
                "goal": _link(goal_id, goal_labels) if goal_id else None,
            }

        stakes = "high" if kind.high_stakes else "low"
        rows += versioned.diff_rows(
            name, shown(change.before), shown(change.after), kind.content, stakes, identifiers=(kind.label,)
        )
    return rows


def change_dict(change: EntityChange) -> dict[str, Any]:
    if change.entity in ORDERED:
        kind = ORDERED[change.entity]
        return {
            "entity": kind.order_label.replace(" ", "_"),
            "before": (change.before or {}).get("order", []),
            "after": (change.after or {}).get("order", []),
        }
    kind, item_id = split_entity(change.entity)
    return {
        "entity": kind.name,
        "id": item_id,
        "stakes": "high" if kind.high_stakes else "low",
        "before": versioned.side(change.before, kind.content),
        "after": versioned.side(change.after, kind.content),
    }
