"""Versioning with exact lineage: one module for every reviewable model (the world model, the goal
model), so "which version did this write supersede" and "undo restores exactly what it replaced"
are written once.

Seed §4.4: "Each write records the exact version it superseded, so an undo restores the true
pre-change state even if a batch worker bumped the version in between — not the naive
highest-superseded, which an interleaving worker bump poisons."

The shape
=========

A versioned model is a set of *entities* (strings the domain chooses, e.g. ``"identity/name"``),
each with a current *image* (a JSON-able dict, or ``None`` when the entity does not exist) kept in
the domain's own live table. Every write is one *version* row plus one *change* row per entity it
touched:

- ``VersionRecord`` (abstract; subclass it once per model): ``number`` (the primary key: version
  12 is row 12), ``supersedes`` (the exact version it extended; UNIQUE, and ``number =
  supersedes + 1`` is a CHECK constraint, so two writers can never both extend version N and the
  lineage can never fork), ``principal``/``actor`` (who), ``operation`` (``change``, ``undo``,
  ``restore``), ``reverts`` (an undo: the version it undid; UNIQUE, a version is undone at most
  once), ``restores_to`` (a restore: the version whose state it brought back), ``evidence`` (the
  domain's references, e.g. the instruction and span that authorised it), ``summary``,
  ``created_at``. Append-only.
- ``ChangeRecord`` (abstract; subclass it once per model and declare
  ``version = models.ForeignKey(<your VersionRecord>, on_delete=models.PROTECT,
  related_name="changes")``): ``entity``, ``before`` (the exact pre-image), ``after`` (the
  post-image). UNIQUE (entity, version), which is also the index every lineage query uses.
  Append-only.

The domain provides an ``EntityStore`` — ``snapshot(entity) -> image | None`` and
``apply(entity, image | None, version)`` (make the live row equal the image; ``None`` removes it) —
and binds everything in a ``Lineage``::

    WORLD_MODEL = Lineage("world model", WorldModelVersion, WorldModelChange, BeliefStore())

The API (all of it runs inside the caller's transaction; the MCP dispatcher opens one per call)
===============================================================================================

``lineage.current_version() -> int``
    The newest version number (0: nothing was ever written).
``lineage.begin(expected_version=None) -> Draft``
    Fix the base version of a write. ``expected_version`` that is not the current version raises
    ``VersionConflict`` (``{ok: false, retry: true, current_version}``). ``draft.number`` is the
    number the write will get, so post-images may name it.
``with lineage.stable(draft): ...``
    Wrap the planning between ``begin`` and ``commit`` (reading the live state, deciding what to
    write, refusing). Under READ COMMITTED another writer may commit between ``begin`` and a later
    read, so a refusal computed from that read (``nothing_changed``, "already exists", "not
    found"...) may be an artefact of the race: if the version moved, the refusal becomes
    ``VersionConflict`` (retry) instead. A plan built on such a read never lands either: its
    claim on ``draft.number`` fails.
``lineage.commit(draft, *, principal, images, operation="change", reverts=None, restores_to=None,
evidence=None, summary="", fields=None) -> Committed``
    Claim ``draft.number`` FIRST (insert the version row unless its number exists: a writer
    that lost the race gets ``VersionConflict`` and the dispatcher rolls back everything it
    wrote), then, for each ``entity -> post-image`` in ``images``, read the exact pre-image, apply
    the post-image and record both. Entities whose image does not change are skipped; if nothing
    changes at all it refuses (``nothing_changed``). ``fields`` sets extra columns of a concrete
    version model.
``lineage.plan_undo(version) -> Plan``
    What undoing one version would do: every entity it touched back to its exact pre-image, even
    when other versions were written since on *other* entities. Refuses ``already_reverted``, or
    ``revert_conflict`` (with ``versions``: the later versions that touched the same entities —
    undoing would silently discard them).
``lineage.plan_restore(number) -> Plan``
    What bringing the whole model back to its state at version ``number`` would do (every entity
    changed since, to its image as of ``number``); ``plan.undoes`` lists the versions whose
    effects it removes. Refuses ``version_not_found``. A plan may be empty.
``lineage.commit_plan(draft, plan, *, principal, evidence=None, summary="", fields=None)``
    Commit a plan as a new ``undo``/``restore`` version: a revert is itself a version with lineage.
``lineage.state_as_of(number, entities=None) -> dict[entity, image]``
    The model as it stood at a version (absent entities omitted).
``lineage.later_versions(version) -> list[int]``
    Versions after ``version`` that touched any entity it touched.
``lineage.conflicting_versions(version) -> list[int]``
    The later versions that make undoing ``version`` unsafe: all of ``later_versions`` except a
    version that was itself undone by an undo that still stands, and that undo (the pair cancels
    out exactly: the undo restored the pre-image byte for byte). So "undo my last change" twice
    works, while a later change by anyone else — or a restore — still blocks.
``lineage.is_reverted(version) -> bool``
    Undone by an ``undo`` version, or inside the span a later ``restore`` went back over.
``lineage.last_unreverted(principal) -> VersionRecord | None``
    The most recent ``change`` that is not reverted — the principal's own, or anyone's for
    ``None`` (what "undo the last change" means; undo/restore versions are not candidates, so
    calling it twice undoes two changes, it does not redo the first).
``lineage.history(entity) -> QuerySet[ChangeRecord]``
    Every change of one entity, oldest first.
``lineage.get(number) -> VersionRecord`` / ``lineage.changes_of(version) -> list[ChangeRecord]``
    One version (refuses ``version_not_found``) and its change rows.
``Plan``: ``changes`` (``EntityChange(entity, before=now, after=target)``), ``reverts``,
``restores_to``, ``undoes`` (version numbers) and ``undone_principals`` (number → principal id, for
"an agent may only undo its own changes" rules).
``diff_images(before, after, fields) -> list[dict]``
    A readable field-by-field diff of two images, for notices and confirmation pages.

A write, in full (the world model's `beliefs.services.update_world_model` is the worked example)::

    draft = LINEAGE.begin(expected_version)            # VersionConflict if the caller is stale
    with LINEAGE.stable(draft):                        # refusals caused by a race become retries
        images = {...}                                 # read live state, validate, build post-images
        committed = LINEAGE.commit(draft, principal=p, images=images, summary="...",
                                   fields={"high_stakes": True})
    # and an undo:  plan = LINEAGE.plan_undo(LINEAGE.get(n)); LINEAGE.commit_plan(draft, plan, ...)

Why the database, not a lock: the UNIQUE ``supersedes``/``number`` and the claim-first order make
a lost race a refused claim. Under PostgreSQL's READ COMMITTED the second insert
(``ON CONFLICT (number) DO NOTHING``) waits for the first writer's commit, then inserts nothing;
under SQLite's IMMEDIATE transactions a race is impossible (they serialise writers; a stale
``expected_version`` is still caught by ``begin``). Nothing here keeps state in process memory.

Reverting, and showing what a revert would do (written once: `Reverter`)
========================================================================

An app binds its lineage once with the parts that are its own, e.g. the goal model::

    REVERTER = Reverter(GOAL_MODEL, rows=_rows, change_dict=_change_dict, is_high=is_high_stakes,
                        notify=_notify_revert, undo_note="... before version {number} ...",
                        check_plan=_refuse_dangling, verify=verify_consistency, savepoint=True)

- ``rows(changes) -> [{"what", "before", "after", "stakes"}]``: readable rows (admin diffs,
  confirmation pages, the history of an entity); ``change_dict(change)``: one change as a tool's
  answer shows it; ``is_high(entity)``: its stakes (a revert records ``high_stakes`` on the version
  model, which must have that column); ``notify(committed, high_stakes) -> Notification | None``:
  the notice after a revert (the world model announces only high-stakes ones, the goal model all);
  ``undo_note``: what an undo does, for its confirmation page; ``restore_noop_note``: what the
  page of a restore says when there is nothing to undo (``{label}``, ``{number}``).
- Optional: ``check_plan(plan)`` refuses a plan with a ``Refusal`` (the goal model: an undo may not
  take away a goal a project still links to), on an undo's page and before any revert is
  committed; ``verify()`` checks invariants after a revert is applied (inside the write, so a
  violation rolls it back); ``savepoint=True`` runs each undo/restore/revert in a savepoint of its
  own (the goal model's rule for every write).

``reverter.undo(*, number, principal, expected_version=None)``
    Undo one version (``lineage.plan_undo``). The person may undo anything; an agent only its
    own versions (``revert_not_own``), and never an undo or restore that undid a high-stakes change
    (``reapply_needs_evidence``: putting it back needs the person's fresh words, as a new write).
``reverter.restore(*, number, principal, expected_version=None)``
    Bring the whole model back to version ``number`` (``lineage.plan_restore``), same rule;
    ``nothing_to_revert`` if it already holds that state.
``reverter.revert(*, principal, to_version=None, expected_version=None)``
    A revert tool: with ``to_version``, ``restore``; without, undo the most recent change that is
    not reverted — anyone's for the person, the caller's own for an agent (``nothing_to_revert``
    if there is none).
    All three answer ``{ok, version, supersedes, operation, reverted_version, restored_to,
    undid_versions, changes, high_stakes, notification}``; a revert is itself a version.
``reverter.describe_undo(number)`` / ``reverter.describe_restore(number)``
    For a confirmation page (the admin, the one-tap link): ``{title, changes (rows), note,
    current_version, ...}``, or ``error`` (and, for an undo, ``refusal``) when it cannot be done.
``reverter.version_rows(version)`` / ``reverter.change_rows(change)``
    What a version did (to one entity), as rows.
``LineageRevertHandler``
    The one-tap link of a notice (``operator_site.notifications.RevertHandler``): subclass it and
    set ``reverter``; it describes and undoes the version the notice reports.
``notify_version(lineage, scope, committed, lines, *, confirmation=None, closing=UNDO_IT)``
    The safety notice of a version, change or revert (kind ``<scope>_change`` / ``<scope>_revert``,
    subject ``scope`` and the version number, so it carries the one-tap link): who did what, the
    app's ``lines``, the evidence a change relied on, ``closing``.

The admin side is `operator_site.lineage_admin`: ``LineageVersionAdmin`` (set ``reverter``) and
``history_table(reverter, entity)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db import models, transaction
from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from operator_site.face.envelope import Refusal, VersionConflict
from operator_site.models import AppendOnlyModel, Notification, Principal
from operator_site.notifications import notify
from operator_site.sql import advisory_xact_lock, insert_unless_conflict, lock_key, max_value

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


class EntityStore(Protocol):
    """How a lineage reads and writes the live state of its entities."""

    def snapshot(self, entity: str) -> Image | None:
        """The entity's current image, or None when it does not exist."""

    def apply(self, entity: str, before: Image | None, image: Image | None, version: VersionRecord) -> None:
        """Make the live state of `entity` equal `image` (None: remove it), written by `version`.
        `before` is its exact current image (read under the claimed version)."""


@dataclass
class Draft:
    """A write in preparation: the version it extends and the number it will get. `claimed` turns
    true once `commit` holds the number (from then on this transaction is the only writer)."""

    base: int
    claimed: bool = False

    @property
    def number(self) -> int:
        return self.base + 1


@dataclass(frozen=True)
class EntityChange:
    entity: str
    before: Image | None
    after: Image | None


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

    def state_as_of(self, number: int, entities: Iterable[str] | None = None) -> dict[str, Image]:
        """Every entity's image as it stood at version `number` (entities absent then are omitted)."""
        rows = self.change_model.objects.filter(version__lte=number)
        if entities is not None:
            rows = rows.filter(entity__in=list(entities))
        newest = (
            self.change_model.objects.filter(entity=OuterRef("entity"), version__lte=number)
            .order_by("-version_id")
            .values("version_id")[:1]
        )
        rows = rows.filter(version=Subquery(newest)).order_by("entity")
        return {row.entity: row.after for row in rows if row.after is not None}

    def later_versions(self, version: VersionRecord) -> list[int]:
        entities = [c.entity for c in self.changes_of(version)]
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

    def conflicting_versions(self, version: VersionRecord) -> list[int]:
        later = self.later_versions(version)
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
    def begin(self, expected_version: int | None = None) -> Draft:
        self._queue_writers()
        current = self.current_version()
        if expected_version is not None and expected_version != current:
            raise VersionConflict(
                reason=(
                    f"The {self.label} is at version {current}, not {expected_version}; nothing was "
                    "written. Re-read it and retry."
                ),
                current_version=current,
                expected_version=expected_version,
            )
        return Draft(base=current)

    def _queue_writers(self) -> None:
        """On PostgreSQL, writers of this model wait for each other here, for the rest of their
        transaction (a transaction-scoped advisory lock), before they read the version to extend.

        Correctness does not rest on this: the UNIQUE `supersedes` and the claim-first order of
        `commit` still decide every race (a loser answers the seed's `{ok: false, retry: true}`).
        It keeps races rare, as the seed expects them to be: without a queue, 16 concurrent writers
        fought over every version and most calls came back `retry: true` (bench/perf.py: 393 of
        ~460 world-model writes in 2.5 s); with it, writers that did not pin `expected_version`
        simply take turns, as a lineage's writers must anyway, and a pinned writer sees the true
        current version. SQLite needs nothing: its write transactions (BEGIN IMMEDIATE) already
        run one at a time.
        """
        advisory_xact_lock(lock_key(f"operator.lineage:{self.version_model._meta.db_table}"))

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
        if not insert_unless_conflict(version, "number"):
            raise VersionConflict(
                reason=(
                    f"Another write extended version {draft.base} of the {self.label} first; nothing "
                    "was written. Re-read it and retry."
                ),
                current_version=self.current_version(),
                based_on=draft.base,
            )
        draft.claimed = True
        applied: list[EntityChange] = []
        rows = []
        for entity, after in images.items():
            before = self.store.snapshot(entity)
            if before == after:
                continue
            self.store.apply(entity, before, after, version)
            applied.append(EntityChange(entity, before, after))
            rows.append(self.change_model(version=version, entity=entity, before=before, after=after))
        if not rows:
            raise Refusal("nothing_changed", f"That would not change the {self.label}; nothing was written.")
        self.change_model.objects.bulk_create(rows)
        return Committed(version, applied)

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
        later = self.conflicting_versions(version)
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
        for change in self.changes_of(version):
            now = self.store.snapshot(change.entity)
            if now != change.after:  # defensive: the live state must be what this version left
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

    def plan_restore(self, number: int) -> Plan:
        current = self.current_version()
        if not 0 <= number <= current:
            raise Refusal(
                "version_not_found",
                f"The {self.label} has no version {number} (current: {current}).",
                version=number,
                current_version=current,
            )
        touched = sorted(
            set(self.change_model.objects.filter(version__gt=number).values_list("entity", flat=True))
        )
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


def diff_images(
    before: Image | None, after: Image | None, fields: Sequence[str], *, absent: str = "(absent)"
) -> list[dict[str, Any]]:
    """Field-by-field differences of two images: [{"field", "before", "after"}]. An absent side is
    shown as `absent` once, not field by field."""
    if before is None and after is None:
        return []
    if before is None or after is None:
        present = after if before is None else before
        shown = {f: present.get(f) for f in fields if present.get(f) not in (None, "")}
        text = ", ".join(f"{k}={v}" for k, v in shown.items())
        return [
            {
                "field": "*",
                "before": absent if before is None else text,
                "after": absent if after is None else text,
            }
        ]
    return [
        {"field": f, "before": before.get(f), "after": after.get(f)}
        for f in fields
        if before.get(f) != after.get(f)
    ]


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
    ``confirmation`` it relied on (its ``notice_lines()``: a `beliefs.evidence.Confirmation`'s
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
    evidence = version.evidence if isinstance(version.evidence, dict) else {}
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


# --- reverting, and what a revert would do ------------------------------------------------------------
Rows = list[dict[str, Any]]


def _no_check(plan: Plan) -> None:
    return None


def _nothing_to_verify() -> None:
    return None


@dataclass(frozen=True)
class Reverter:
    """Undo one version, bring the model back to a version, "undo my last change", and describe
    either for a confirmation page: the same for every lineage, written once. An app binds one
    with what is its own (see the module docstring)."""

    lineage: Lineage
    rows: Callable[[Sequence[EntityChange]], Rows]  # readable rows {"what", "before", "after", "stakes"}
    change_dict: Callable[[EntityChange], dict[str, Any]]  # one change, as a tool's answer shows it
    is_high: Callable[[str], bool]  # is this entity high-stakes
    notify: Callable[[Committed, bool], Notification | None]  # the notice after a revert (or None)
    undo_note: str  # the confirmation page of an undo, what happens: "... before version {number} ..."
    restore_noop_note: str = "The {label} already holds the state of version {number}."
    check_plan: Callable[[Plan], None] = _no_check  # raise Refusal to refuse a plan (before committing)
    verify: Callable[[], None] = _nothing_to_verify  # invariants checked after a revert is applied
    savepoint: bool = False  # run each undo / restore / revert in a savepoint of its own

    # --- acting ---------------------------------------------------------------------------------------
    def undo(
        self, *, number: int, principal: Principal, expected_version: int | None = None
    ) -> dict[str, Any]:
        """Undo one version: what it touched goes back to its exact pre-image."""
        with self._atomic():
            draft = self.lineage.begin(expected_version)
            with self.lineage.stable(draft):
                plan = self.lineage.plan_undo(self.lineage.get(number))
                self.check_powers(plan, principal)
                return self._commit(draft, plan, principal)

    def restore(
        self, *, number: int, principal: Principal, expected_version: int | None = None
    ) -> dict[str, Any]:
        """Bring the whole model back to its state at version `number` (itself a new version)."""
        with self._atomic():
            draft = self.lineage.begin(expected_version)
            with self.lineage.stable(draft):
                plan = self.lineage.plan_restore(number)
                self.check_powers(plan, principal)
                return self._commit(draft, plan, principal)

    def revert(
        self, *, principal: Principal, to_version: int | None = None, expected_version: int | None = None
    ) -> dict[str, Any]:
        """A revert tool: without `to_version`, undo the last change that has not been reverted —
        anyone's for the person (a human principal), the caller's own for an agent; with it,
        `restore` that version."""
        with self._atomic():
            if to_version is not None:
                return self.restore(number=to_version, principal=principal, expected_version=expected_version)
            draft = self.lineage.begin(expected_version)
            with self.lineage.stable(draft):
                target = self.lineage.last_unreverted(None if principal.is_human else principal)
                if target is None:
                    label = self.lineage.label.replace(" ", "-")
                    raise Refusal(
                        "nothing_to_revert",
                        f"There is no {label} change that is not already reverted."
                        if principal.is_human
                        else f"{principal.name} has no {label} change that is not already reverted. An "
                        "agent undoes only its own changes; the person reverts anything.",
                        current_version=draft.base,
                    )
                plan = self.lineage.plan_undo(target)
                self.check_powers(plan, principal)
                return self._commit(draft, plan, principal)

    def check_powers(self, plan: Plan, principal: Principal) -> None:
        """What an agent may not revert (the person may revert anything): anyone else's change
        (`revert_not_own`), and an undo or restore that puts back a high-stakes change that was
        itself undone (`reapply_needs_evidence`: that is a new high-stakes write, which needs the
        person's fresh words like any other)."""
        if principal.is_human:
            return
        others = sorted(v for v, who in plan.undone_principals.items() if who != principal.id)
        if others:
            raise Refusal(
                "revert_not_own",
                f"That would undo version(s) {', '.join(map(str, others))}, written by someone else. An "
                "agent can only undo its own changes; the person can revert anything. Nothing was written.",
                versions=others,
            )
        high = [c.entity for c in plan.changes if self.is_high(c.entity)]
        if not high or not plan.undoes:
            return
        lineage = self.lineage
        reverts = lineage.version_model.objects.filter(number__in=plan.undoes).exclude(
            operation=Operation.CHANGE
        )
        replayed = sorted(
            set(
                lineage.change_model.objects.filter(version__in=reverts, entity__in=high).values_list(
                    "entity", flat=True
                )
            )
        )
        if replayed:
            raise Refusal(
                "reapply_needs_evidence",
                f"That would put back high-stakes change(s) to {', '.join(replayed)} that were undone. "
                "Re-applying an undone high-stakes change is a new high-stakes write: make it again with "
                "the person's fresh words (confirmedInConversation and confirmationQuote), or propose it "
                "with operator_record_action_intent for them to approve. Nothing was written.",
                entities=replayed,
            )

    def _atomic(self) -> AbstractContextManager[Any]:
        return transaction.atomic() if self.savepoint else nullcontext()

    def _commit(self, draft: Draft, plan: Plan, principal: Principal) -> dict[str, Any]:
        if not plan.changes:
            raise Refusal(
                "nothing_to_revert",
                f"The {self.lineage.label} already holds the state of version {plan.restores_to}; nothing "
                "was written.",
                current_version=draft.base,
            )
        self.check_plan(plan)
        high = any(self.is_high(c.entity) for c in plan.changes)
        what = f"undo of v{plan.reverts.number}" if plan.reverts else f"restore to v{plan.restores_to}"
        committed = self.lineage.commit_plan(
            draft,
            plan,
            principal=principal,
            summary=f"{what} (by {principal.name})",
            fields={"high_stakes": high},
        )
        self.verify()
        notice = self.notify(committed, high)
        version = committed.version
        return {
            "ok": True,
            "version": version.number,
            "supersedes": version.supersedes,
            "operation": version.operation,
            "reverted_version": version.reverts_id,
            "restored_to": version.restores_to,
            "undid_versions": plan.undoes,
            "changes": [self.change_dict(c) for c in committed.changes],
            "high_stakes": high,
            "notification": notice.id if notice else None,
        }

    # --- describing (admin pages, the one-tap link) ---------------------------------------------------
    def version_rows(self, version: VersionRecord) -> Rows:
        """What a version did, as readable before/after rows."""
        changes = self.lineage.changes_of(version)
        return self.rows([EntityChange(c.entity, c.before, c.after) for c in changes])

    def change_rows(self, change: ChangeRecord) -> Rows:
        """What a version did to one entity, as readable before/after rows."""
        return self.rows([EntityChange(change.entity, change.before, change.after)])

    def describe_undo(self, number: int) -> dict[str, Any]:
        """For a confirmation page: what undoing version `number` would change now, or why it cannot."""
        try:
            version = self.lineage.get(number)
            plan = self.lineage.plan_undo(version)
            self.check_plan(plan)
        except Refusal as refusal:
            return {
                "title": f"Undo version {number} of the {self.lineage.label}",
                "changes": [],
                "note": refusal.reason,
                "error": refusal.reason,
                "refusal": refusal.as_result(),
            }
        return {
            "title": f"Undo version {number}: {version.summary}",
            "changes": self.rows(plan.changes),
            "note": self.undo_note.format(number=number),
            "current_version": self.lineage.current_version(),
        }

    def describe_restore(self, number: int) -> dict[str, Any]:
        """For a confirmation page: what bringing the model back to version `number` would change."""
        try:
            plan = self.lineage.plan_restore(number)
        except Refusal as refusal:
            return {"title": f"Revert to version {number}", "changes": [], "error": refusal.reason}
        out: dict[str, Any] = {
            "title": f"Revert the {self.lineage.label} to version {number}",
            "changes": self.rows(plan.changes),
            "undoes": plan.undoes,
            "current_version": self.lineage.current_version(),
            "note": (
                f"Undoes the effect of version(s) {', '.join(map(str, plan.undoes))}."
                if plan.undoes
                else self.restore_noop_note.format(label=self.lineage.label, number=number)
            ),
        }
        if not plan.changes:
            out["error"] = (
                f"Nothing to revert: the {self.lineage.label} already holds the state of version {number}."
            )
        return out


class LineageRevertHandler:
    """The one-tap link behind a notice (`operator_site.notifications.RevertHandler`): undo the
    version the notice reports. Subclass it and set `reverter`."""

    reverter: Reverter

    def describe(self, subject_id: int) -> dict[str, Any]:
        return self.reverter.describe_undo(subject_id)

    def review(self, subject_id: int) -> dict[str, Any] | None:
        """For the notice page: what the version did (before → after rows), who did it and when, and
        the evidence it relied on as one sentence; None if there is no such version."""
        lineage = self.reverter.lineage
        version = lineage.version_model.objects.filter(number=subject_id).select_related("principal").first()
        if version is None:
            return None
        return {
            "version": version.number,
            "operation": version.operation,
            "summary": version.summary,
            "who": version.actor,
            "who_is_person": version.principal.is_human,
            "at": version.created_at,
            "changes": self.reverter.version_rows(version),
            "evidence": evidence_sentence(version),
            "label": lineage.label,
        }

    def revert(self, subject_id: int, *, by: Principal) -> str:
        result = self.reverter.undo(number=subject_id, principal=by)
        return (
            f"Undid version {subject_id} of the {self.reverter.lineage.label} (now at version "
            f"{result['version']})."
        )
