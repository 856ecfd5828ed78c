"""A versioned model, written once: what the world model and the goal model share on top of their
lineage (`operator_site.lineage`). Each domain configures one `VersionedModel` with its own parts
(its reverter, its evidence gate) and registers it; the kernel never imports a domain.
docs/lineage.md explains the design."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from operator_site import proposals
from operator_site.changes import ChangeList
from operator_site.display import Named, visible_text
from operator_site.lineage import (
    UNDO_IT,
    Committed,
    Draft,
    FieldTest,
    Image,
    Lineage,
    diff_images,
    field_problem,
    is_text,
    is_text_up_to,
    is_whole,
    json_kind,
    notify_version,
    one_of,
    optional,
)
from operator_site.lineage_revert import LineageRevertHandler, Reverter, Rows
from operator_site.models import Notification, Principal
from operator_site.refusals import Refusal
from operator_site.revert_links import register_revert_handler, unacknowledged_safety_notices


# --- entities: "<kind>/<key>" --------------------------------------------------------------------------
def entity(kind: str, key: object) -> str:
    """The name a lineage records an entity under: ``identity/home city``, ``goal/12``."""
    return f"{kind}/{key}"


def split(name: str) -> tuple[str, str]:
    """The kind and the key of an entity's name."""
    kind, _, key = name.partition("/")
    return kind, key


# --- provenance: who set an image, in which version, on what evidence ------------------------------------
def evidence_from_columns(
    instruction_id: int | None, span: str, approval_id: int | None
) -> dict[str, Any] | None:
    """A live row's evidence (a belief's, a goal's) as its image records it: the instruction and
    sentence that said it, or the approval decision that accepted it; None without either."""
    if instruction_id:
        return {"instruction": instruction_id, "span": span}
    if approval_id:
        return {"approval": approval_id, "span": span}
    return None


def evidence_columns(evidence: dict[str, Any] | None) -> dict[str, Any]:
    """The columns a live row keeps of an image's evidence (the inverse of `evidence_from_columns`)."""
    evidence = evidence or {}
    return {
        "evidence_instruction_id": evidence.get("instruction"),
        "evidence_span": evidence.get("span") or "",
        "evidence_approval": evidence.get("approval"),
    }


def as_kept(image: Image) -> Image:
    """An image as a live row keeps it: its evidence reduced to the evidence columns. (Until
    2026-12-07 an accepted proposal's image also held the intent's id, which no row keeps: without
    this, such a version could never be undone.)"""
    evidence = image.get("evidence")
    if not isinstance(evidence, dict):
        return image
    columns = evidence_columns(evidence)
    kept = evidence_from_columns(
        columns["evidence_instruction_id"], columns["evidence_span"], columns["evidence_approval"]
    )
    return {**image, "evidence": kept}


def provenance_of(row: Any) -> Image:
    """The provenance part of a live row's image. The row has the columns every versioned item
    has: ``source_principal``, ``source_name``, ``source_kind``, ``set_in_version`` and the three
    evidence columns."""
    return {
        "source": {"id": row.source_principal_id, "name": row.source_name, "kind": row.source_kind},
        "set_in_version": row.set_in_version,
        "evidence": evidence_from_columns(
            row.evidence_instruction_id, row.evidence_span, row.evidence_approval
        ),
    }


def item_image_problem(image: Image, tests: Mapping[str, FieldTest]) -> str | None:
    """What a versioned item's stored image (a belief's, a goal's) lacks for its readers and for a
    revert that writes it back to its row: its own fields (`tests`, `lineage.field_problem`), then
    its provenance — who set it, in which version, on what evidence (`provenance_of`). None if
    nothing; a model's `Lineage(check_image=...)` is built on it."""
    return field_problem(image, tests) or _provenance_problem(image)


def _provenance_problem(image: Image) -> str | None:
    problem = field_problem(image, {"source": lambda v: isinstance(v, dict), "set_in_version": is_whole})
    if problem:
        return problem
    source = {"id": optional(is_whole), "name": is_text_up_to(64), "kind": one_of(Principal.Kind.values)}
    problem = field_problem(image["source"], source, within="source.")
    if problem:
        return problem
    evidence = image.get("evidence")
    if evidence is None:
        return None
    if not isinstance(evidence, dict):
        return f'has an unreadable "evidence" ({json_kind(evidence)})'
    tests = {"instruction": optional(is_whole), "approval": optional(is_whole), "span": optional(is_text)}
    return field_problem({name: evidence.get(name) for name in tests}, tests, within="evidence.")


def provenance(principal: Principal, number: int) -> Image:
    """The provenance of a post-image written by `principal` as version `number` (its evidence is
    set by `VersionedModel.commit` when the entity is high-stakes)."""
    return {
        "source": {"id": principal.id, "name": principal.name, "kind": principal.kind},
        "set_in_version": number,
        "evidence": None,
    }


def provenance_columns(image: Image, number: int) -> dict[str, Any]:
    """The columns a live row keeps of an image's provenance, written by version `number`."""
    return {
        "source_principal_id": image["source"]["id"],
        "source_name": image["source"]["name"],
        "source_kind": image["source"]["kind"],
        "set_in_version": image["set_in_version"],
        **evidence_columns(image.get("evidence")),
        "last_version": number,
    }


# --- what a version says ---------------------------------------------------------------------------------
# A version's summary (a notice's title, an email's subject) names each change in at most this many
# characters, and a notice's line shows each value in at most NOTICE_VALUE_SHOWN: the notice's page
# shows them whole.
SUMMARY_PART_SHOWN = 80
NOTICE_VALUE_SHOWN = 300


def summary_text(parts: Sequence[tuple[str, bool]], principal: Principal, *, shown: int) -> str:
    """A version's summary: its first `shown` parts (each a change's text and whether it is
    high-stakes), how many more, and who wrote it. The high-stakes changes come first and each part is
    cut short, so that no number or length of low-stakes changes keeps a high-stakes one out of a
    safety notice's title (its email subject is bounded)."""
    ordered = [
        visible_text(text, single_line=True, limit=SUMMARY_PART_SHOWN) for text, _ in _high_first(parts)
    ]
    more = len(ordered) - shown
    return "; ".join(ordered[:shown]) + (f"; and {more} more" if more > 0 else "") + f" (by {principal.name})"


def _high_first(items: Sequence[Any]) -> list[Any]:
    """`items` (each ending in its high-stakes flag) with the high-stakes ones first, else in order."""
    return sorted(items, key=lambda item: not item[-1])


def notice_lines(changes: Sequence[tuple[str, str, str, bool]]) -> list[str]:
    """A notice's lines of what changed, one per (what, before, after, high-stakes): the high-stakes
    ones first, so that no number of low-stakes changes pushes them down."""
    return [notice_line(what, before, after, high=high) for what, before, after, high in _high_first(changes)]


def diff_rows(
    what: Named,
    before: Image | None,
    after: Image | None,
    fields: Sequence[str],
    stakes: str,
    *,
    identifiers: Collection[str] = (),
) -> Rows:
    """Readable before/after rows of one entity: one per changed field ({"what", "before", "after",
    "stakes"}), or one for the whole entity when it appears or disappears. `what` names the entity
    (its key or title shown as an identifier), followed by the field's name; the values of the
    `identifiers` fields (a title, a name) are shown as identifiers too (`Named`)."""
    rows = []
    for diff in diff_images(before, after, fields, identifiers=identifiers):
        whole = diff["field"] == "*"
        sides = []
        for value in (diff["before"], diff["after"]):
            if not whole and diff["field"] in identifiers and value is not None:
                value = Named("", value)
            sides.append("" if value is None else value if isinstance(value, Named) else str(value))
        named = what if whole else what.then(f" · {diff['field']}")
        rows.append({"what": named, "before": sides[0], "after": sides[1], "stakes": stakes})
    return rows


def side(image: Image | None, fields: Sequence[str]) -> dict[str, Any] | None:
    """One side of a change as a tool's answer shows it: the image's `fields`, or None if absent."""
    return None if image is None else {f: image.get(f) for f in fields}


def notice_line(what: str, before: str, after: str, *, high: bool) -> str:
    """One line of a notice: what changed, from what to what. Each part is made one line (a value's
    own line breaks cannot start lines that pose as the notice's) and cut to NOTICE_VALUE_SHOWN."""
    what, before, after = (
        visible_text(part, single_line=True, limit=NOTICE_VALUE_SHOWN) for part in (what, before, after)
    )
    return f"- {'HIGH-STAKES ' if high else ''}{what}: {before} → {after}"


# --- the evidence gate, as the domain that owns it provides it --------------------------------------------
class Evidence(Protocol):
    """What authorised a high-stakes write: the person's words or their approval of a proposal."""

    def image_evidence(self, subject: str) -> dict[str, Any]: ...

    def as_evidence(self) -> dict[str, Any]: ...

    def notice_lines(self) -> list[str]: ...


@dataclass(frozen=True)
class EvidenceGate:
    """`check(confirmed=, quote=, scope=, claims=, now=)` returns the evidence or raises `Refusal`;
    `record_use(evidence, version)` spends it once the version is claimed; `summary(evidence)` is
    what a write's answer says of it."""

    check: Callable[..., Evidence]
    record_use: Callable[[Evidence, int], None]
    summary: Callable[[Evidence | None], dict[str, Any] | None]


@dataclass(frozen=True)
class Grounds:
    """What a gated write stands on, as its caller gave it: the person's words (`confirmed`, with
    `quote` checked against the write's claims) or their `approval` of a proposal, with
    `unchanged_since` the version it was proposed against (a target changed since refuses it);
    `expected_version`, the version the writer read (moved on: a retry); `now`, the clock."""

    confirmed: bool | None = None
    quote: str | None = None
    expected_version: int | None = None
    now: datetime | None = None
    approval: Evidence | None = None
    unchanged_since: int | None = None


@dataclass(frozen=True)
class Written:
    committed: Committed
    evidence: Evidence | None
    high_stakes: bool


@dataclass(frozen=True)
class VersionedModel:
    """One reviewable model: the name its notices and confirmations go by (`scope`), its
    `Reverter` (which binds its lineage and its readable rows) and the evidence gate its
    high-stakes writes pass."""

    scope: str
    reverter: Reverter
    gate: EvidenceGate

    @property
    def lineage(self) -> Lineage:
        return self.reverter.lineage

    def commit(
        self,
        draft: Draft,
        *,
        principal: Principal,
        images: Mapping[str, Image | None],
        summary: str,
        claims: Callable[[], Sequence[Any]],
        grounds: Grounds,
    ) -> Written:
        """Commit a change (inside `lineage.stable(draft)`). If it touches anything high-stakes it
        needs evidence: the person's approval of a proposal, or their words checked against
        `claims()` (`grounds`); every high-stakes image that records evidence keeps it."""
        high = any(self.reverter.is_high(name) for name in images)
        evidence: Evidence | None = None
        if high:
            evidence = grounds.approval or self.gate.check(
                confirmed=grounds.confirmed,
                quote=grounds.quote,
                scope=self.scope,
                claims=claims(),
                now=grounds.now,
            )
            for name, image in images.items():
                if image is not None and "evidence" in image and self.reverter.is_high(name):
                    image["evidence"] = evidence.image_evidence(name)
        committed = self.lineage.commit(
            draft,
            principal=principal,
            images=images,
            evidence=evidence.as_evidence() if evidence else None,
            summary=summary,
            fields={"high_stakes": high, "evidence_instruction": getattr(evidence, "instruction", None)},
        )
        if evidence is not None:
            self.gate.record_use(evidence, committed.version.number)
        return Written(committed, evidence, high)

    def notify(
        self,
        committed: Committed,
        lines: Sequence[str],
        *,
        evidence: Evidence | None = None,
        closing: str = UNDO_IT,
        safety: bool = True,
    ) -> Notification:
        """The notice of a version (`lineage.notify_version`), carrying the one-tap revert link."""
        return notify_version(
            self.lineage, self.scope, committed, lines, confirmation=evidence, closing=closing, safety=safety
        )

    def check_as_of(self, number: int, current: int) -> None:
        """Refuse (`version_not_found`) to show the model as of a version it never had."""
        if not 0 <= number <= current:
            raise Refusal(
                "version_not_found",
                f"The {self.lineage.label} has no version {number} (current: {current}).",
                current_version=current,
            )

    def pending_notices(self, limit: int = 20, *, delivery: bool = False) -> list[dict[str, Any]]:
        """The safety notices about this model the person has not acknowledged yet."""
        notices = unacknowledged_safety_notices().filter(subject_kind=self.scope)[:limit]
        out = []
        for n in notices:
            row = {
                "id": n.id,
                "kind": n.kind,
                "title": n.title,
                "version": n.subject_id,
                "created": n.created_at,
            }
            if delivery:
                row["delivery"] = n.state
            out.append(row)
        return out

    def register(
        self,
        *,
        action_type: str,
        tool: str,
        changes: ChangeList,
        apply: Callable[..., dict[str, Any]],
        identifiers: Sequence[str] = (),
    ) -> None:
        """From the domain's AppConfig.ready: a notice's one-tap link undoes the version it reports,
        and an agent may propose a change (`action_type`, the `changes` `tool` takes; the values of
        its `identifiers` fields are shown as identifiers) for the person to accept."""
        register_revert_handler(self.scope, LineageRevertHandler(self.reverter))
        proposals.register(
            proposals.kind_for(
                action_type=action_type,
                tool=tool,
                reverter=self.reverter,
                changes=changes,
                apply=apply,
                identifiers=tuple(identifiers),
            )
        )
