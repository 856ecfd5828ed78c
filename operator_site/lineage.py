"""Versioning with exact lineage, written once for every reviewable model (the world model, the
goal model): each write records the exact version it superseded, so an undo restores exactly what
that write replaced, even when others wrote in between. The design and the API are in
docs/lineage.md; `operator_site.versioned` builds the rest of a versioned model on it."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db import models
from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from operator_site.display import Named
from operator_site.models import AppendOnlyModel, Notification, Principal
from operator_site.notifications import notify
from operator_site.refusals import Refusal, VersionConflict
from operator_site.sql import (
    Update,
    insert_claiming,
    insert_row,
    insert_rows,
    insert_unless_conflict,
    max_value,
    read_after_lock,
    row_where,
    update_rows,
)

Image = dict[str, Any]


class Operation(models.TextChoices):
    CHANGE = "change", "change"
    UNDO = "undo", "undo of one version"
    RESTORE = "restore", "restore to a version"


class VersionRecord(AppendOnlyModel):
    """One version of a versioned model. Subclass once per model (abstract here)."""

    number = models.PositiveBigIntegerField(primary_key=True)
    supersedes = models.PositiveBigIntegerField(
        unique=True, help_text="The exact version this write extended (0: the empty model)."
    )
    principal = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    actor = models.CharField(max_length=64, help_text="The acting principal's name (never a claim).")
    operation = models.CharField(max_length=8, choices=Operation.choices, default=Operation.CHANGE)
    reverts = models.OneToOneField(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="reverted_by",
        help_text="For an undo: the version it undid.",
    )
    restores_to = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="For a restore: the version whose state it brought back."
    )
    evidence = models.JSONField(null=True, blank=True)
    summary = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        abstract = True
        ordering = ["-number"]
        constraints = [
            models.CheckConstraint(
                condition=Q(number=F("supersedes") + 1), name="%(app_label)s_%(class)s_extends_previous"
            ),
            models.CheckConstraint(
                condition=(Q(operation="undo") & Q(reverts__isnull=False) & Q(restores_to__isnull=True))
                | (Q(operation="restore") & Q(reverts__isnull=True) & Q(restores_to__isnull=False))
                | (Q(operation="change") & Q(reverts__isnull=True) & Q(restores_to__isnull=True)),
                name="%(app_label)s_%(class)s_operation_shape",
            ),
            models.CheckConstraint(
                condition=Q(restores_to__isnull=True) | Q(restores_to__lt=F("supersedes")),
                name="%(app_label)s_%(class)s_restores_back",
            ),
        ]

    def __str__(self) -> str:
        return f"v{self.number} ({self.operation} by {self.actor})"


class ChangeRecord(AppendOnlyModel):
    """What one version did to one entity: the exact pre-image and post-image. Subclass once per
    model and declare `version = models.ForeignKey(<VersionRecord subclass>, on_delete=models.PROTECT,
    related_name="changes")`."""

    entity = models.CharField(max_length=250)
    before = models.JSONField(null=True, blank=True, help_text="The exact pre-image (null: absent).")
    after = models.JSONField(null=True, blank=True, help_text="The post-image (null: removed).")

    class Meta:
        abstract = True
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["entity", "version"], name="%(app_label)s_%(class)s_once"),
        ]

    def __str__(self) -> str:
        return f"{self.entity} @ v{self.version_id}"  # type: ignore[attr-defined]


@dataclass(frozen=True)
class LiveRows:
    """A store whose every entity is at most one row of `model`: the one whose `fields` equal
    `key(entity)`, there exactly when the entity has an image (a removed entity's row is deleted).
    `image(row)` is the row's image, `columns(image, number)` the row's other columns for an image
    written by version `number`. `LiveStore` reads and writes such rows; a lineage whose store has
    them (its `live`) reads a write's pre-images with the base version in one statement
    (`Lineage.begin`) and writes the rows with its claim (`Lineage.commit`).

    `alike`, when the model has one: other `fields` and `probe(entity)`, their values for the rows
    that read as the entity (the world model: the same kind and key fold, `operator_site.lookalikes`).
    `Lineage.begin(alike=...)` reads those rows in the same statement (`Draft.alike`)."""

    model: type[models.Model]
    fields: tuple[str, ...]
    key: Callable[[str], tuple[Any, ...]]
    image: Callable[[Any], Image]
    columns: Callable[[Image, int], dict[str, Any]]
    alike: tuple[tuple[str, ...], Callable[[str], tuple[Any, ...]]] | None = None

    def where(self, entity: str) -> dict[str, Any]:
        return dict(zip(self.fields, self.key(entity), strict=True))

    def write(self, entity: str, before: Image | None, image: Image, number: int) -> models.Model | Update:
        """What makes the entity's row hold `image`, written by version `number`: a new row when it
        had none (`before`, its exact current image, is None), else an update of its row."""
        where, columns = self.where(entity), self.columns(image, number)
        if before is None:
            return self.model(**where, **columns)
        return Update(self.model, columns, where)


class LiveStore:
    """An `EntityStore` of `LiveRows` (a new entity is one INSERT, a changed one one UPDATE, a
    removed one a DELETE), each statement compiled once."""

    def __init__(self, live: LiveRows) -> None:
        self.live = live

    def snapshot(self, entity: str) -> Image | None:
        row = row_where(self.live.model, **self.live.where(entity))
        return None if row is None else self.live.image(row)

    def apply(self, entity: str, before: Image | None, image: Image | None, version: VersionRecord) -> None:
        if image is None:
            self.live.model._base_manager.filter(**self.live.where(entity)).delete()
            return
        write = self.live.write(entity, before, image, version.number)
        if isinstance(write, Update):
            update_rows(write)
        else:
            insert_row(write)


class EntityStore(Protocol):
    """How a lineage reads and writes the live state of its entities. A store may also have `live`,
    `LiveRows` (a `LiveStore` has): how its rows are read and written with a version's own
    statements."""

    def snapshot(self, entity: str) -> Image | None:
        """The entity's current image, or None when it does not exist."""

    def apply(self, entity: str, before: Image | None, image: Image | None, version: VersionRecord) -> None:
        """Make the live state of `entity` equal `image` (None: remove it), written by `version`.
        `before` is its exact current image (read under the claimed version, or with the base
        version in one statement: the same state once the claim holds)."""


@dataclass
class Draft:
    """A write in preparation: the version it extends and the number it will get. `claimed` turns
    true once `commit` holds the number (from then on this transaction is the only writer).
    `images`: the live images of the entities `begin` was given, read in the same statement as
    `base` (so they are the state of version `base`; None: absent). `alike`: the images of the live
    rows that read as one of the entities `begin` was asked to probe (`LiveRows.alike`), in the same
    statement; the entity's own row among them if it has one."""

    base: int
    claimed: bool = False
    images: Mapping[str, Image | None] = field(default_factory=dict)
    alike: Sequence[Image] = ()

    @property
    def number(self) -> int:
        return self.base + 1


@dataclass(frozen=True)
class EntityChange:
    entity: str
    before: Image | None
    after: Image | None


# --- damaged change rows ------------------------------------------------------------------------------
# The lineage writes every image as a JSON object (or null: absent), and nothing but the lineage writes
# change rows. A row holding anything else was damaged or edited by hand below the door. Every reader
# of stored images asks `Lineage.damage` first and reads past such a row: a read that needs it refuses
# (`damaged_row`, naming it), a page shows it as damaged. Nothing reads it as if it were an image.
ImageCheck = Callable[[str, Image], str | None]


def _no_image_check(entity: str, image: Image) -> str | None:
    return None


def _no_entity_check(entity: str) -> str | None:
    return None


def _as_written(image: Image) -> Image:
    return image


def json_kind(value: Any) -> str:
    """What a stored JSON value is, in JSON's words: "an array", "a string", "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


@dataclass(frozen=True)
class Damage:
    """Why one stored change row cannot be read as the lineage wrote it."""

    row: int
    version: int
    entity: str
    why: str  # "its after image is not an object (it is an array)"

    @property
    def text(self) -> str:
        """The marker a page shows in its place: ``damaged row #12: its after image is ...``."""
        return f"damaged row #{self.row}: {self.why}"

    def as_dict(self) -> dict[str, Any]:
        return {"row": self.row, "version": self.version, "entity": self.entity, "why": self.why}


# What a model's `check_image` asks of the fields its readers read: each test takes the stored value.
FieldTest = Callable[[Any], bool]
BIGINT_MAX = 2**63 - 1  # what every integer column (and SQLite's binding) holds


def is_text(value: Any) -> bool:
    return isinstance(value, str)


def is_text_up_to(length: int) -> FieldTest:
    """Text a column of `length` characters holds (PostgreSQL refuses longer text)."""
    return lambda value: isinstance(value, str) and len(value) <= length


def is_whole(value: Any) -> bool:
    """A whole number a bigint column holds (never a boolean: JSON's true is not 1)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= BIGINT_MAX


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def optional(test: FieldTest) -> FieldTest:
    return lambda value: value is None or test(value)


def one_of(values: Iterable[Any]) -> FieldTest:
    allowed = frozenset(values)
    return lambda value: isinstance(value, str) and value in allowed


def field_problem(image: Mapping[str, Any], tests: Mapping[str, FieldTest], within: str = "") -> str | None:
    """The first of `tests`' fields that `image` lacks or holds in another shape, as the end of a
    sentence ('has no "value"', 'has an unreadable "status" (an array)'); None if every one passes.
    A field the readers read with ``.get`` (it may be left out) is not in `tests`, or passes None."""
    for name, test in tests.items():
        shown = f"{within}{name}"
        if name not in image:
            return f'has no "{shown}"'
        if not test(image[name]):
            return f'has an unreadable "{shown}" ({json_kind(image[name])})'
    return None


def damaged_history(label: str, damages: Sequence[Damage], what: str) -> Refusal:
    """The refusal of a read or a revert that needs a damaged row: it names the rows (at most five in
    the sentence, every one in `damaged_rows`), and `what` says what could not be done."""
    named = "; ".join(f"damaged row #{d.row} (version {d.version}, {d.entity}): {d.why}" for d in damages[:5])
    more = f"; and {len(damages) - 5} more" if len(damages) > 5 else ""
    return Refusal(
        "damaged_row",
        f"The {label}'s history holds a damaged row, so {what} — {named}{more}. Nothing was changed. "
        "(Only a damaged or hand-edited database holds such a row; the operator never writes one.)",
        damaged_rows=[d.as_dict() for d in damages],
        versions=sorted({d.version for d in damages}),
    )


@dataclass
class Plan:
    """What an undo or a restore would do, computed against the current state."""

    operation: str
    changes: list[EntityChange]
    reverts: VersionRecord | None = None
    restores_to: int | None = None
    undoes: list[int] = field(default_factory=list)
    # Per version in `undoes`: the principal id that wrote it (for "only your own" rules).
    undone_principals: dict[int, int] = field(default_factory=dict)

    @property
    def images(self) -> dict[str, Image | None]:
        return {change.entity: change.after for change in self.changes}


@dataclass
class Committed:
    version: VersionRecord
    changes: list[EntityChange]


@dataclass(frozen=True)
class Lineage:
    """One versioned model: its version table, its change table, and its live entities."""

    label: str
    version_model: type[VersionRecord]
    change_model: type[ChangeRecord]
    store: EntityStore
    # What the model's own readers need of an image beyond being an object (the fields they read and
    # their types), as a sentence saying what is wrong, or None; it may also refuse an entity name
    # that is not one of the model's. The model's snapshots, rows and reverts rely on it.
    check_image: ImageCheck = _no_image_check
    # What is wrong with an entity name the model's live state cannot be read by (None: nothing).
    check_entity: Callable[[str], str | None] = _no_entity_check
    # An image as the live row keeps it (what `store.snapshot` would read back after writing it):
    # an undo compares the two. The identity unless a model's images once held more than its rows.
    kept: Callable[[Image], Image] = _as_written

    # --- damage -------------------------------------------------------------------------------
    def image_damage(self, entity: str, image: Any) -> str | None:
        """Why a stored image cannot be read as one (None: it can; null is "absent", which can)."""
        if image is None:
            return None
        if not isinstance(image, dict):
            return f"is not an object (it is {json_kind(image)})"
        return self.check_image(entity, image)

    def damage(self, row: ChangeRecord, sides: Sequence[str] = ("before", "after")) -> Damage | None:
        """Why a stored change row cannot be read (its `sides` that are asked for), or None."""
        problems = []
        unknown = self.check_entity(row.entity)
        if unknown:
            problems.append(f"its entity {row.entity[:80]!r} {unknown}")
        for side in sides:
            why = self.image_damage(row.entity, getattr(row, side))
            if why:
                problems.append(f"its {side} image {why}")
        if row.before is None and row.after is None:  # whichever side is asked for, it tells nothing
            problems.append("neither its before nor its after image is there (a change of nothing)")
        if not problems:
            return None
        return Damage(row.pk, row.version_id, row.entity, "; ".join(problems))  # type: ignore[attr-defined]

    def refuse_damaged(self, rows: Iterable[ChangeRecord], what: str, sides: Sequence[str]) -> None:
        """Refuse (`damaged_row`) if any of `rows` is damaged in `sides`: `what` could not be done."""
        damages = [d for d in (self.damage(row, sides) for row in rows) if d is not None]
        if damages:
            raise damaged_history(self.label, damages, what)

    # --- reading ------------------------------------------------------------------------------
    def current_version(self) -> int:
        # Read at the start of every write (the seam skips the ORM's compilation of the aggregate).
        return max_value(self.version_model, "number") or 0

    def get(self, number: int) -> VersionRecord:
        version = self.version_model.objects.filter(number=number).select_related("principal").first()
        if version is None:
            raise Refusal(
                "version_not_found",
                f"The {self.label} has no version {number} (current: {self.current_version()}).",
                version=number,
                current_version=self.current_version(),
            )
        return version

    def changes_of(self, version: VersionRecord) -> list[ChangeRecord]:
        return list(self.change_model.objects.filter(version=version.number).order_by("entity"))

    def history(self, entity: str) -> QuerySet:
        return (
            self.change_model.objects.filter(entity=entity).select_related("version").order_by("version_id")
        )

    def rows_as_of(self, number: int, entities: Iterable[str] | None = None) -> list[ChangeRecord]:
        """The change row that set each entity's state at version `number` (its newest at or before
        it), by entity; read as stored, damaged or not."""
        rows = self.change_model.objects.filter(version__lte=number)
        if entities is not None:
            rows = rows.filter(entity__in=list(entities))
        newest = (
            self.change_model.objects.filter(entity=OuterRef("entity"), version__lte=number)
            .order_by("-version_id")
            .values("version_id")[:1]
        )
        return list(rows.filter(version=Subquery(newest)).order_by("entity"))

    def state_as_of(self, number: int, entities: Iterable[str] | None = None) -> dict[str, Image]:
        """Every entity's image as it stood at version `number` (entities absent then are omitted).
        Refuses (`damaged_row`) when a post-image it needs is damaged: that state cannot be rebuilt,
        and a state with the entity left out (or read as something else) would be a wrong one."""
        rows = self.rows_as_of(number, entities)
        self.refuse_damaged(rows, f"its state as of version {number} cannot be rebuilt", sides=("after",))
        return {row.entity: row.after for row in rows if row.after is not None}

    def later_versions(self, version: VersionRecord, rows: Sequence[ChangeRecord] | None = None) -> list[int]:
        """Versions after `version` that changed what it changed (`rows`: its change rows, if read)."""
        entities = [c.entity for c in (self.changes_of(version) if rows is None else rows)]
        later = (
            self.change_model.objects.filter(entity__in=entities, version__gt=version.number)
            .values_list("version", flat=True)
            .distinct()
        )
        return sorted(set(later))

    def touched_since(self, number: int, entities: Iterable[str]) -> list[int]:
        """Versions after `number` that changed any of `entities`."""
        later = self.change_model.objects.filter(version__gt=number, entity__in=list(entities))
        return sorted(set(later.values_list("version", flat=True)))

    def refuse_if_touched_since(self, number: int, entities: Iterable[str]) -> None:
        """A change prepared against version `number` (a proposal the person accepts) must still
        apply to what was shown: refuse (`proposal_stale`) if a later version changed its targets."""
        entities = sorted(set(entities))
        later = self.touched_since(number, entities)
        if later:
            touched = sorted(
                set(
                    self.change_model.objects.filter(version__in=later, entity__in=entities).values_list(
                        "entity", flat=True
                    )
                )
            )
            raise Refusal(
                "proposal_stale",
                f"The {self.label} changed since this was proposed (against version {number}): version(s) "
                f"{', '.join(map(str, later))} changed {', '.join(touched)}. Nothing was applied; the change "
                "has to be proposed again against what the model says now.",
                proposed_against=number,
                versions=later,
                entities=touched,
            )

    def conflicting_versions(
        self, version: VersionRecord, rows: Sequence[ChangeRecord] | None = None
    ) -> list[int]:
        later = self.later_versions(version, rows)
        if not later:
            return []
        undos = dict(
            self.version_model.objects.filter(
                number__in=later, operation=Operation.UNDO, reverted_by__isnull=True
            ).values_list("reverts", "number")
        )
        cancelled = set()
        for target, undo in undos.items():
            if target in later:
                cancelled |= {target, undo}
        return [n for n in later if n not in cancelled]

    def _restores(self) -> list[tuple[int, int]]:
        return list(
            self.version_model.objects.filter(operation=Operation.RESTORE).values_list(
                "restores_to", "number"
            )
        )

    def is_reverted(self, version: VersionRecord, restores: Sequence[tuple[int, int]] | None = None) -> bool:
        if self.version_model.objects.filter(reverts=version.number).exists():
            return True
        spans = self._restores() if restores is None else restores
        return any(start < version.number < end for start, end in spans)

    def last_unreverted(self, principal: Principal | None, scan: int = 500) -> VersionRecord | None:
        """The most recent `change` version that has not been reverted: the principal's own, or
        anyone's when `principal` is None."""
        restores = self._restores()
        changes = self.version_model.objects.filter(operation=Operation.CHANGE, reverted_by__isnull=True)
        if principal is not None:
            changes = changes.filter(principal=principal)
        for version in changes.select_related("principal").order_by("-number")[:scan]:
            if not any(start < version.number < end for start, end in restores):
                return version
        return None

    # --- writing ------------------------------------------------------------------------------
    def begin(
        self, expected_version: int | None = None, entities: Sequence[str] = (), alike: Sequence[str] = ()
    ) -> Draft:
        """The draft of a write extending the current version (or refused: `expected_version` is
        not it), with the live images of `entities` and the rows that read as those in `alike`."""
        draft = self.read_base(entities, alike)
        current = draft.base
        if expected_version is not None and expected_version != current:
            raise VersionConflict(
                reason=(
                    f"The {self.label} is at version {current}, not {expected_version}; nothing was "
                    "written. Re-read it and retry."
                ),
                current_version=current,
                expected_version=expected_version,
            )
        return draft

    def read_base(self, entities: Sequence[str] = (), alike: Sequence[str] = ()) -> Draft:
        """A draft on the version a write extends and, when the store reads its rows many at once
        (`LiveRows`), the live images of `entities` and of the rows that read as those in `alike`
        (`LiveRows.alike`) — ONE statement, so one snapshot: they are the state of that version.

        First, on PostgreSQL, writers of this model take turns here, for the rest of their
        transaction (a transaction-scoped advisory lock), before they read the version to extend:
        the lock and the read travel as one message, and the read, a statement of its own, sees
        every writer that held the lock before (`sql.read_after_lock`). Correctness does not rest
        on the lock (the claim in `commit` decides every race); it keeps `retry: true` rare
        (docs/lineage.md, "Why writers queue anyway"). SQLite's write transactions already run one
        at a time.
        """
        lock = f"operator.lineage:{self.version_model._meta.db_table}"
        live: LiveRows | None = getattr(self.store, "live", None)
        if live is None or not entities:
            current, _ = read_after_lock(lock, self.version_model, "number")
            return Draft(base=current or 0)
        keys = {entity: live.key(entity) for entity in entities}
        also_fields, probe = live.alike if live.alike and alike else ((), None)
        probes = [probe(entity) for entity in alike] if probe else []
        current, rows = read_after_lock(
            lock, self.version_model, "number", live.model, live.fields, [*keys.values()], also_fields, probes
        )
        by_key = {tuple(getattr(row, name) for name in live.fields): row for row in rows}
        images = {entity: _image_or_none(live, by_key.get(key)) for entity, key in keys.items()}
        wanted = set(probes)
        looks = [row for row in rows if wanted and tuple(getattr(row, f) for f in also_fields) in wanted]
        return Draft(base=current or 0, images=images, alike=[live.image(row) for row in looks])

    @contextmanager
    def stable(self, draft: Draft) -> Iterator[None]:
        try:
            yield
        except VersionConflict:
            raise
        except Refusal as refusal:
            if draft.claimed:  # decided after the claim: on a state no one else could change
                raise
            current = self.current_version()
            if current != draft.base:
                raise VersionConflict(
                    reason=(
                        f"The {self.label} changed (version {draft.base} → {current}) while this call "
                        "was being checked; nothing was written. Re-read it and retry."
                    ),
                    current_version=current,
                    refused_with=refusal.code,
                ) from refusal
            raise

    def commit(
        self,
        draft: Draft,
        *,
        principal: Principal,
        images: Mapping[str, Image | None],
        operation: str = Operation.CHANGE,
        reverts: VersionRecord | None = None,
        restores_to: int | None = None,
        evidence: Any = None,
        summary: str = "",
        fields: Mapping[str, Any] | None = None,
    ) -> Committed:
        # Claim the version number first: from here on no other writer can commit a version, so the
        # pre-images read below are exactly what this version supersedes. The primary key decides
        # a race: the loser's insert does nothing (no error, no savepoint needed) and it refuses.
        version = self.version_model(
            number=draft.number,
            supersedes=draft.base,
            principal=principal,
            actor=principal.name,
            operation=operation,
            reverts=reverts,
            restores_to=restores_to,
            evidence=evidence,
            summary=summary[:500],
            **dict(fields or {}),
        )
        known = draft.images
        live: LiveRows | None = getattr(self.store, "live", None)
        if live is not None and images and all(entity in known for entity in images):
            # Every pre-image was read with the base version, in one statement: they are the state
            # of version `draft.base`, and once the claim on `draft.number` holds, exactly what this
            # version supersedes (a writer that changed them would have claimed that number
            # first). So the change rows and the live rows are written with the claim: one
            # statement on PostgreSQL, and nothing written if the claim fails.
            applied = [EntityChange(e, known[e], after) for e, after in images.items() if known[e] != after]
            writes = [
                live.write(c.entity, c.before, c.after, draft.number) for c in applied if c.after is not None
            ]
            if len(writes) < len(applied):  # a removal: the store deletes it, after the claim
                writes = []
            updates = [write for write in writes if isinstance(write, Update)]
            rows = [self._change_row(version, c) for c in applied]
            rows += [write for write in writes if not isinstance(write, Update)]
            updated = insert_claiming(version, "number", rows, updates)
            if updated is None:
                raise self._lost(draft)
            draft.claimed = True
            if not applied:
                raise self._nothing_changed()
            if any(count != 1 for count in updated):  # cannot be: the base showed the row
                raise RuntimeError(f"{self.label}: an entity's row was not where its pre-image said")
            if not writes:
                for change in applied:
                    self.store.apply(change.entity, change.before, change.after, version)
            return Committed(version, applied)
        if not insert_unless_conflict(version, "number"):
            raise self._lost(draft)
        draft.claimed = True
        applied = []
        for entity, after in images.items():
            before = self.store.snapshot(entity)
            if before == after:
                continue
            self.store.apply(entity, before, after, version)
            applied.append(EntityChange(entity, before, after))
        if not applied:
            raise self._nothing_changed()
        insert_rows([self._change_row(version, change) for change in applied])
        return Committed(version, applied)

    def _change_row(self, version: VersionRecord, change: EntityChange) -> ChangeRecord:
        return self.change_model(
            version=version, entity=change.entity, before=change.before, after=change.after
        )

    def _lost(self, draft: Draft) -> VersionConflict:
        return VersionConflict(
            reason=(
                f"Another write extended version {draft.base} of the {self.label} first; nothing "
                "was written. Re-read it and retry."
            ),
            current_version=self.current_version(),
            based_on=draft.base,
        )

    def _nothing_changed(self) -> Refusal:
        return Refusal("nothing_changed", f"That would not change the {self.label}; nothing was written.")

    def plan_undo(self, version: VersionRecord) -> Plan:
        if version.number > self.current_version():
            raise Refusal("version_not_found", f"The {self.label} has no version {version.number}.")
        undone_by = self.version_model.objects.filter(reverts=version.number).values_list("number", flat=True)
        if undone_by:
            raise Refusal(
                "already_reverted",
                f"Version {version.number} of the {self.label} was already undone by version {undone_by[0]}.",
                version=version.number,
                reverted_by=undone_by[0],
            )
        rows = self.changes_of(version)  # read once: for the conflicts, the damage, the plan
        later = self.conflicting_versions(version, rows)
        if later:
            raise Refusal(
                "revert_conflict",
                f"Version {version.number} cannot be undone on its own: version(s) "
                f"{', '.join(map(str, later))} changed the same entries afterwards, and undoing it would "
                "discard their changes. Review them first (or go back to a version as a whole).",
                version=version.number,
                versions=later,
            )
        changes = []
        # An undo puts back a row's pre-image and checks its post-image against the live state: a
        # damaged row gives neither, so the undo is refused before anything is written.
        cannot = (
            f"version {version.number} cannot be undone on its own (going back to an earlier version as "
            "a whole reads only the versions up to it)"
        )
        self.refuse_damaged(rows, cannot, ("before", "after"))
        self._refuse_unchained(version, rows, cannot)
        for change in rows:
            now = self.store.snapshot(change.entity)
            left = None if change.after is None else self.kept(change.after)
            if now != left:  # defensive: the live state must be what this version left
                raise Refusal(
                    "revert_conflict",
                    f"{change.entity} no longer holds what version {version.number} wrote.",
                    version=version.number,
                    versions=[],
                )
            changes.append(EntityChange(change.entity, now, change.before))
        return Plan(
            Operation.UNDO,
            changes,
            reverts=version,
            undoes=[version.number],
            undone_principals={version.number: version.principal_id},
        )

    def _refuse_unchained(self, version: VersionRecord, rows: Sequence[ChangeRecord], cannot: str) -> None:
        """Each pre-image an undo puts back stands for what the entity's previous change left: the
        lineage records that state, so where the previous row left an object the pre-image is one,
        and where it left nothing (a removal) the pre-image is null. A row where they disagree — a
        null where an object is expected, say — was edited by hand, and so was one following a damaged
        row: undoing it would write a state the model never had, so it is refused, naming the row.
        (Their contents are not compared: a pre-image is read back from the live row, which keeps
        less of an approval's evidence than the post-image recorded.) One statement."""
        previous = {row.entity: row for row in self.rows_as_of(version.number - 1, [r.entity for r in rows])}
        damages = []
        for row in rows:
            prior = previous.get(row.entity)
            if prior is None:  # the entity's first change (or it was written before any lineage)
                continue
            left = f"#{prior.pk}, version {prior.version_id}"  # type: ignore[attr-defined]
            if self.damage(prior, ("after",)):
                why = f"the entity's row before it ({left}) is damaged, so what that version left is unknown"
            elif (row.before is None) != (prior.after is None):
                had = "nothing" if prior.after is None else "an object"
                why = f"its before image is {json_kind(row.before)}, where the row before ({left}) left {had}"
            else:
                continue
            damages.append(Damage(row.pk, version.number, row.entity, why))
        if damages:
            raise damaged_history(self.label, damages, cannot)

    def plan_restore(self, number: int) -> Plan:
        current = self.current_version()
        if not 0 <= number <= current:
            raise Refusal(
                "version_not_found",
                f"The {self.label} has no version {number} (current: {current}).",
                version=number,
                current_version=current,
            )
        later = self.change_model.objects.filter(version__gt=number).values_list("entity", "id", "version")
        touched_by = {entity: (row, version) for entity, row, version in later}
        touched = sorted(touched_by)
        # The live state of each is read below: an entity name the model does not know (a hand-edited
        # row) cannot be read there, so the restore is refused naming the row first.
        unknown = [
            Damage(row, version, entity, f"its entity {entity[:80]!r} {why}")
            for entity, (row, version) in touched_by.items()
            if (why := self.check_entity(entity))
        ]
        if unknown:
            raise damaged_history(self.label, unknown, f"it cannot be brought back to version {number}")
        then = self.state_as_of(number, touched)
        changes = []
        for entity in touched:
            now = self.store.snapshot(entity)
            target = then.get(entity)
            if now != target:
                changes.append(EntityChange(entity, now, target))
        changed = [c.entity for c in changes]
        undone = dict(
            self.change_model.objects.filter(version__gt=number, entity__in=changed)
            .values_list("version", "version__principal")
            .distinct()
        )
        return Plan(
            Operation.RESTORE,
            changes,
            restores_to=number,
            undoes=sorted(undone),
            undone_principals=undone,
        )

    def commit_plan(
        self,
        draft: Draft,
        plan: Plan,
        *,
        principal: Principal,
        evidence: Any = None,
        summary: str = "",
        fields: Mapping[str, Any] | None = None,
    ) -> Committed:
        return self.commit(
            draft,
            principal=principal,
            images=plan.images,
            operation=plan.operation,
            reverts=plan.reverts,
            restores_to=plan.restores_to,
            evidence=evidence,
            summary=summary,
            fields=fields,
        )


def _image_or_none(live: LiveRows, row: Any) -> Image | None:
    return None if row is None else live.image(row)


def diff_images(
    before: Image | None,
    after: Image | None,
    fields: Sequence[str],
    *,
    absent: str = "(absent)",
    identifiers: Collection[str] = (),
) -> list[dict[str, Any]]:
    """Field-by-field differences of two images: [{"field", "before", "after"}]. An absent side is
    shown as `absent` once, not field by field. So is a side that is not an object (a damaged stored
    row: its readers ask `Lineage.damage` first, this is the net under them): shown as what it is,
    never read as an image. A side shown whole is a `Named` whose `identifiers` fields' values (a
    title) are shown as identifiers."""
    if before is None and after is None:
        return []
    if not isinstance(before, dict) or not isinstance(after, dict):
        return [
            {
                "field": "*",
                "before": _whole_side(before, fields, absent, identifiers),
                "after": _whole_side(after, fields, absent, identifiers),
            }
        ]
    return [
        {"field": f, "before": before.get(f), "after": after.get(f)}
        for f in fields
        if before.get(f) != after.get(f)
    ]


def _whole_side(image: Any, fields: Sequence[str], absent: str, identifiers: Collection[str]) -> str:
    """One side of a change shown whole: its non-empty `fields` ("title=…, detail=…"), `absent`, or
    what a damaged side is."""
    if image is None:
        return absent
    if not isinstance(image, dict):
        return f"(damaged: not an object, it is {json_kind(image)})"
    shown = [(f, image.get(f)) for f in fields if image.get(f) not in (None, "")]
    return Named.join(
        ", ", [Named(f"{f}=", v) if f in identifiers else Named(f"{f}=").then(v) for f, v in shown]
    )


# --- notices ----------------------------------------------------------------------------------------
UNDO_IT = "If this is not what you meant, undo it: it is one tap away."


def notify_version(
    lineage: Lineage,
    scope: str,
    committed: Committed,
    lines: Sequence[str],
    *,
    confirmation: Any = None,
    closing: str = UNDO_IT,
    safety: bool = True,
) -> Notification:
    """The notice of one version — a change or a revert — carrying the one-tap revert link
    (subject ``scope``/version number): who did what, the app's ``lines`` (what changed), the
    ``confirmation`` it relied on (its ``notice_lines()``: a `operator_site.evidence.Confirmation`'s
    instruction and quoted span, or an `ApprovalEvidence`'s decision), then ``closing``. Kind
    ``<scope>_change`` or ``<scope>_revert``; titled "<Label> v<n>: <summary>".
    A safety notice (`operator_site.notifications`) unless ``safety=False``: a version that touched
    nothing high-stakes makes an ordinary notice (held, capped and digested like any other)."""
    version = committed.version
    if version.operation == Operation.CHANGE:
        kind = f"{scope}_change"
        opening = f"Version {version.number} (superseding {version.supersedes}), written by {version.actor}:"
    else:
        kind = f"{scope}_revert"
        what = (
            f"undid version {version.reverts_id}"
            if version.operation == Operation.UNDO
            else f"restored the state of version {version.restores_to}"
        )
        opening = f"Version {version.number}: {version.actor} {what}."
    body = [opening, "", *lines]
    if confirmation:
        body += ["", *confirmation.notice_lines()]
    body += ["", closing]
    # The person's own write (an undo or restore from the admin or the one-tap link, a change made
    # with their token, an accepted proposal) is acknowledged by the act itself, in this transaction:
    # it is still delivered, but it never waits in "Needs you" for them to acknowledge what they did.
    principal = version.principal
    notice, _ = notify(
        kind=kind,
        title=f"{lineage.label[:1].upper()}{lineage.label[1:]} v{version.number}: {version.summary}",
        body="\n".join(body),
        topic=lineage.label,
        safety=safety,
        subject_kind=scope,
        subject_id=version.number,
        acknowledged_by=principal if principal.is_human and principal.active else None,
    )
    return notice


def evidence_sentence(version: VersionRecord) -> str:
    """The evidence a version relied on, as one sentence for a person (the notice page): the
    person's words it quoted, or the approval that accepted it, or why it needed none."""
    if version.evidence is not None and not isinstance(version.evidence, dict):  # only a hand-edited row
        return (
            f"The evidence recorded with this version is damaged (not an object: it is "
            f"{json_kind(version.evidence)}), so it cannot be shown."
        )
    evidence = version.evidence or {}
    approval = evidence.get("approval")
    if isinstance(approval, dict):
        proposer = f" from {approval.get('proposed_by')}" if approval.get("proposed_by") else ""
        return (
            f"{approval.get('by', 'The person')} accepted proposal #{approval.get('intent')}{proposer} "
            f"(decision #{approval.get('decision')}) via {approval.get('via', 'the console')}."
        )
    if evidence.get("span"):
        return (
            f"“{evidence['span']}” — said by {evidence.get('recorded_by', 'the person')} "
            f"(instruction #{evidence.get('instruction')}, "
            f"{str(evidence.get('recorded_at', ''))[:16].replace('T', ' ')} UTC)."
        )
    if version.operation != Operation.CHANGE:
        return f"{version.actor} asked for this {version.get_operation_display()}: a revert needs no quote."
    return "No quote was needed: it touched nothing high-stakes."
