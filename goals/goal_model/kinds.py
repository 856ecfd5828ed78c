"""The goal model's vocabulary: its three kinds of item, the two orders, the status transitions and
the names the lineage records them under (the ops each kind takes, and their fields, are the
published schema: goals/goal_model/schemas.py)."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from goals.models import Goal, GoalModelItem, Priority, Project
from operator_site import versioned

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

# Goal status transitions: action -> (statuses it may start from, status it leads to).
GOAL_TRANSITIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "pause": (("active", "under_review"), "paused"),
    "resume": (("paused", "under_review"), "active"),
    "mark_under_review": (("active", "paused"), "under_review"),
    "remove": (("active", "paused", "under_review"), "removed"),
}


def entity_of(kind: ItemKind, item_id: int) -> str:
    return versioned.entity(kind.name, item_id)


def split_entity(entity: str) -> tuple[ItemKind, int]:
    name, number = versioned.split(entity)
    return KINDS[name], int(number)


def normalise_label(text: str) -> str:
    """Titles and names compare case-insensitively with whitespace collapsed, and in their plain form
    (NFKC): a title written in full-width letters (stored before the door refused them) is the same
    name as the plain one, so naming either where both exist is ambiguous (refused, with both as
    candidates: name one by id) rather than silently the plain one. Only compared, never stored."""
    plain = unicodedata.normalize("NFKC", text or "")
    return " ".join(unicodedata.normalize("NFKC", plain.casefold()).split())


def is_high_stakes(entity: str) -> bool:
    if entity in ORDERED:
        return True
    return split_entity(entity)[0].high_stakes
