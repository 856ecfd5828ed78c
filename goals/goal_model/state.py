"""The goal model's live state: how the lineage reads and writes it (`GOAL_MODEL`), the working
copy one write changes in memory (`State`), finding an item by id or title, and the invariants
every version must leave."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, IntegerField, Value, When
from django.utils import timezone

from goals.goal_model.kinds import (
    GOAL,
    KINDS,
    MAX_CANDIDATES,
    MAX_TITLE_CHARS,
    ORDERED,
    PRIORITY,
    PROJECT,
    REMOVED,
    ItemKind,
    normalise_label,
    split_entity,
)
from goals.models import GoalModelChange, GoalModelItem, GoalModelVersion, Project
from operator_site import lookalikes, wording
from operator_site.lineage import (
    FieldTest,
    Image,
    Lineage,
    field_problem,
    is_text,
    is_text_up_to,
    is_whole,
    one_of,
    optional,
)
from operator_site.refusals import Refusal
from operator_site.versioned import as_kept, item_image_problem, provenance_columns, provenance_of


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
    image.update(provenance_of(row))
    return image


def live_order(kind: ItemKind) -> list[int]:
    column = kind.order_field
    return list(
        kind.model.everything.filter(**{f"{column}__isnull": False})
        .order_by(column)
        .values_list("id", flat=True)
    )


def _apply_order(kind: ItemKind, ids: Sequence[int]) -> None:
    """Write `importance`/`position` from an order without ever holding a rank twice: the rows
    whose rank changes are cleared first, then given their new ranks — in one statement (a CASE
    over their ids), however many moved: a rank the statement gives is one no row keeps, so the
    unique index never sees it twice."""
    column = kind.order_field
    current = dict(kind.model.everything.filter(**{f"{column}__isnull": False}).values_list("id", column))
    target = {item_id: rank for rank, item_id in enumerate(ids, start=1)}
    moving = sorted(i for i in set(current) | set(target) if current.get(i) != target.get(i))
    if not moving:
        return
    kind.model.everything.filter(id__in=moving).update(**{column: None})
    placed = {item_id: target[item_id] for item_id in moving if item_id in target}
    if placed:
        ranks = Case(
            *(When(id=i, then=Value(rank)) for i, rank in placed.items()), output_field=IntegerField()
        )
        kind.model.everything.filter(id__in=list(placed)).update(**{column: ranks})


class GoalModelStore:
    """The goal model's live entities: goal, priority and project rows, and the two orders."""

    def snapshot(self, entity: str) -> Image | None:
        if entity in ORDERED:
            order = live_order(ORDERED[entity])
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
            **provenance_columns(image, version.number),
            "updated_at": timezone.now(),
        }
        if kind is PROJECT:
            values["goal_id"] = image["goal"]
        if not rows.update(**values):
            kind.model.everything.create(pk=item_id, **values)


def _entity_problem(entity: str) -> str | None:
    """An entity name the goal model's store cannot read (only a hand-edited change row holds one)."""
    if entity in ORDERED:
        return None
    try:
        split_entity(entity)
    except (KeyError, ValueError):
        return "is not one of the goal model's (a goal, priority or project and its id, or a ranking)"
    return None


def _image_problem(entity: str, image: Image) -> str | None:
    """What a goal-model image stored in a change row lacks for its readers (the snapshot as of a
    version, the admin's rows) and for a revert that writes it back (`GoalModelStore.apply`): a
    hand-edited row holding anything else is shown as damaged and refused by those reads
    (`Lineage.damage`, which checks the entity's name first: `_entity_problem`)."""
    if entity in ORDERED:
        return field_problem(image, {"order": lambda v: isinstance(v, list) and all(map(is_whole, v))})
    if _entity_problem(entity):
        return None  # said of the row already
    kind, _ = split_entity(entity)
    tests: dict[str, FieldTest] = {
        "id": is_whole,
        kind.label: is_text_up_to(MAX_TITLE_CHARS),
        "detail": is_text,
        "status": one_of(kind.statuses),
    }
    if kind is PROJECT:
        tests["goal"] = optional(is_whole)
    return item_image_problem(image, tests)


GOAL_MODEL = Lineage(
    "goal model",
    GoalModelVersion,
    GoalModelChange,
    GoalModelStore(),
    check_image=_image_problem,
    check_entity=_entity_problem,
    kept=as_kept,
)


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
        return cls(items, {GOAL.name: live_order(GOAL), PRIORITY.name: live_order(PRIORITY)})

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


def _names(label: str, wanted: str, reads: str) -> bool:
    return normalise_label(label) == wanted or lookalikes.fold(label) == reads


MAX_LIKENESS_SEARCHES = 5


class Labels:
    """The titles (a priority: names) of one kind's items, read once for all the resolutions of a
    call: by their compared form (`normalise_label`) and by what they read as (`lookalikes.fold`),
    and counted once for "did you mean" (`wording.Likeness`). A call of 50 changes among 2,000 items
    folded every title 50 times and counted its letters 50 times more (6-10 s)."""

    def __init__(self, kind: ItemKind, items: Iterable[Image]) -> None:
        self.kind = kind
        self.by_name: dict[str, list[Image]] = {}
        self.by_reading: dict[str, list[Image]] = {}
        self.live: dict[str, Image] = {}  # compared form -> the last item not removed that has it
        for image in items:
            label = image[kind.label]
            name = normalise_label(label)
            self.by_name.setdefault(name, []).append(image)
            self.by_reading.setdefault(lookalikes.fold(label), []).append(image)
            if image["status"] != REMOVED:
                self.live[name] = image
        self._likeness: wording.Likeness | None = None
        # "Did you mean" (likeness) for the first few targets not found in a call; the rest get the
        # titles holding theirs (or held by it) alone. Each costs a pass over every title's counts
        # (60 ms among 2,000): 50 missing targets took 3 s even with the counts read once.
        self.likeness_left = MAX_LIKENESS_SEARCHES

    def named(self, wanted: str, reads: str) -> list[Image]:
        """The items whose title is `wanted` or reads as `reads`."""
        found = {image["id"]: image for image in self.by_name.get(wanted, ())}
        found.update((image["id"], image) for image in self.by_reading.get(reads, ()))
        return list(found.values())

    def likeness(self) -> wording.Likeness:
        if self._likeness is None:
            self._likeness = wording.Likeness(self.live)
        return self._likeness


def resolve(
    state: State,
    kind: ItemKind,
    target: int | str,
    pending: Sequence[Image] = (),
    labels: Labels | None = None,
) -> Resolution:
    """Find one item by id or by its exact title/name (case and spacing ignored). `pending` are
    items added earlier in the same call (they can be named by title, not by id). A title matches
    every item whose title reads the same (`operator_site.lookalikes.fold`: "Run a marathon" with a
    Cyrillic "a"), so where such a twin exists the name is ambiguous (name one by id), never
    silently the one the caller's letters happen to equal. `labels`: the state's items of `kind`
    read once for many resolutions (`Labels`)."""
    items = state.items[kind.name]
    order = state.orders.get(kind.name)
    if isinstance(target, int):
        if target in items:
            return Resolution("resolved", target)
        return Resolution("missing")
    labels = labels or Labels(kind, items.values())
    wanted, reads = normalise_label(target), lookalikes.fold(target)
    matches = labels.named(wanted, reads) if wanted else []
    matches += [img for img in pending if wanted and _names(img[kind.label], wanted, reads)]
    live = [img for img in matches if img["status"] != REMOVED]
    chosen = live or matches
    if len(chosen) == 1:
        return Resolution("resolved", chosen[0]["id"])
    if chosen:
        ranked = sorted(chosen, key=lambda img: img["id"])
        return Resolution(
            "ambiguous", candidates=[_brief(kind, img, order) for img in ranked][:MAX_CANDIDATES]
        )
    added = {normalise_label(img[kind.label]): img for img in pending if img["status"] != REMOVED}
    names = {**labels.live, **added}
    close = []
    if labels.likeness_left > 0:
        labels.likeness_left -= 1
        close = labels.likeness().plus(added).closest(wanted)
    close += [n for n in names if wanted and (wanted in n or n in wanted) and n not in close]
    return Resolution("missing", candidates=[_brief(kind, names[n], order) for n in close[:5]])


def verify_consistency() -> None:
    """The invariants every version must leave: the ranking holds exactly the goals that are not
    removed (ranks 1..n), the priority order exactly the active priorities, and no present project
    links to an absent goal. Checked inside the write, so a violation rolls everything back."""
    problems = []
    for kind in (GOAL, PRIORITY):
        ranked = live_order(kind)
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
