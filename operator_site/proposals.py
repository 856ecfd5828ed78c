"""Proposals: a high-stakes change an agent puts in front of the person instead of quoting them.

When the person's words are not enough (a hedge, another language, words relayed by an agent), an
agent records an action intent of type ``world_model_change`` or ``goal_model_change`` carrying
exactly the ``changes`` the gated tool takes. The gate always asks the person; nothing changes until
they accept the diff on the approval page, and then their decision — not a string match — is the
evidence on the new version (docs/gate.md, "Proposals").

The kernel knows the shape, not the models: each model registers a `ProposalKind` (beliefs and
goals do, in their AppConfig.ready), and the intents app finds it here by action type.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from operator_site.changes import ChangeList
from operator_site.display import identifier_text
from operator_site.models import Principal
from operator_site.refusals import Refusal

MAX_REASON_CHARS = 2000


@dataclass(frozen=True)
class ApprovalEvidence:
    """The evidence of an accepted proposal: the person's approval decision. It stands where a
    quote would (`operator_site.evidence.Confirmation`): what a version, a belief or a goal keeps of it,
    and what its safety notice says."""

    decision: int
    intent: int
    by: str
    via: str
    at: datetime
    proposed_by: str = ""

    @property
    def span(self) -> str:
        return f"Approved by {self.by} ({self.via}): proposal #{self.intent}, decision #{self.decision}"

    def image_evidence(self, subject: str) -> dict[str, Any]:
        # Exactly what a live row keeps of it (`versioned.evidence_columns`): an undo compares the
        # row with the image the version wrote, and an image holding more (the intent's id, which
        # the span names anyway) never matched, so no accepted proposal could be undone.
        return {"approval": self.decision, "span": self.span}

    def notice_lines(self) -> list[str]:
        by = f" from {self.proposed_by}" if self.proposed_by else ""
        return [
            f"Evidence: {self.by} accepted proposal #{self.intent}{by} (decision #{self.decision}) via "
            f"{self.via} at {self.at:%Y-%m-%d %H:%M} UTC."
        ]

    def as_evidence(self) -> dict[str, Any]:
        return {
            "approval": {
                "decision": self.decision,
                "intent": self.intent,
                "by": self.by,
                "via": self.via,
                "at": self.at.isoformat(),
                "proposed_by": self.proposed_by,
            },
            "span": self.span,
        }


# What a preview applies under: never stored (the preview is rolled back).
PREVIEW = ApprovalEvidence(decision=0, intent=0, by="(preview)", via="preview", at=timezone.now())


@dataclass(frozen=True)
class ProposalKind:
    """One model that takes proposals. `validate(changes)` returns the changes in canonical form
    (the gated tool's own per-operation schema) or raises `Refusal`; `apply` writes them as a new
    version with `approval` as the evidence, refusing (`proposal_stale`) if a target changed since
    `unchanged_since`; `rows(version)` is the readable diff of a version (what the revert pages
    show)."""

    action_type: str
    label: str
    tool: str  # the gated tool whose `changes` it carries
    validate: Callable[[Any], list[dict[str, Any]]]
    current_version: Callable[[], int]
    apply: Callable[..., dict[str, Any]]
    rows: Callable[[int], list[dict[str, Any]]]
    identifiers: tuple[str, ...] = ()  # fields of a change whose values are identifiers (a title)


def kind_for(
    *,
    action_type: str,
    tool: str,
    reverter: Any,
    changes: ChangeList,
    apply: Callable[..., dict[str, Any]],
    identifiers: tuple[str, ...] = (),
) -> ProposalKind:
    """A model's proposal kind from its own parts: its `lineage.Reverter` (label, version, the rows
    of a version), the gated tool's changes (`ChangeList`: the one schema the tool publishes) and the
    service that applies changes."""
    schema = changes

    def validate(changes: Any) -> list[dict[str, Any]]:
        if not isinstance(changes, list) or not changes:
            raise Refusal("changes_required", f"A proposal needs at least one change, as {tool} takes them.")
        if len(changes) > schema.max_changes:
            raise Refusal("too_many_changes", f"At most {schema.max_changes} changes per proposal.")
        try:
            parsed = schema.validate(changes, code="invalid_proposal")
        except Refusal as refusal:
            field = refusal.extra["field"]
            where = f"changes.{refusal.extra['index']}" + (f".{field}" if field else "")
            refusal.reason += f" A proposal's changes are exactly what {tool} takes."
            refusal.extra["field"] = where
            raise
        return schema.dump(parsed)

    lineage = reverter.lineage
    return ProposalKind(
        action_type=action_type,
        label=lineage.label,
        tool=tool,
        validate=validate,
        current_version=lineage.current_version,
        apply=apply,
        rows=lambda number: reverter.version_rows(lineage.get(number)),
        identifiers=identifiers,
    )


_KINDS: dict[str, ProposalKind] = {}


def register(kind: ProposalKind) -> None:
    _KINDS[kind.action_type] = kind


def kind_of(action_type: str) -> ProposalKind | None:
    return _KINDS.get(action_type)


def action_types() -> tuple[str, ...]:
    return tuple(sorted(_KINDS))


@dataclass(frozen=True)
class Proposal:
    """What a proposal intent's body holds (canonical JSON: the body is what the person approves)."""

    kind: ProposalKind
    changes: list[dict[str, Any]]
    proposed_against: int
    reason: str

    def body(self) -> str:
        payload = {"changes": self.changes, "proposed_against": self.proposed_against, "reason": self.reason}
        return json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ": "))


def make(action_type: str, changes: Any, proposed_against: int | None, reason: str | None) -> Proposal:
    """A new proposal, validated: the changes by the gated tool's schema, the version it is made
    against no later than the current one (the current one when not given)."""
    kind = kind_of(action_type)
    if kind is None:
        raise Refusal("invalid_proposal", f"{action_type!r} is not a kind of proposal.")
    if changes is None:
        raise Refusal(
            "changes_required",
            f"A {action_type} proposal carries `changes`: exactly what {kind.tool} would take.",
        )
    current = kind.current_version()
    if proposed_against is None:
        proposed_against = current
    if isinstance(proposed_against, bool) or not 0 <= proposed_against <= current:
        raise Refusal(
            "invalid_proposal",
            f"proposed_against must be a version of the {kind.label} (0..{current}), the one the change was "
            "read from.",
            current_version=current,
        )
    reason = " ".join((reason or "").split())
    if len(reason) > MAX_REASON_CHARS:
        raise Refusal("invalid_proposal", f"A reason is at most {MAX_REASON_CHARS} characters.")
    return Proposal(kind, kind.validate(changes), proposed_against, reason)


def parse(action_type: str, body: str) -> Proposal:
    """The proposal an intent's body holds (re-validated: an edited body is checked again)."""
    try:
        payload = json.loads(body)
    except ValueError as exc:
        raise Refusal("invalid_proposal", "The proposal is not valid JSON.") from exc
    if not isinstance(payload, dict) or set(payload) - {"changes", "proposed_against", "reason"}:
        raise Refusal(
            "invalid_proposal", "A proposal holds changes, proposed_against and reason, nothing else."
        )
    return make(action_type, payload.get("changes"), payload.get("proposed_against"), payload.get("reason"))


def change_line(change: dict[str, Any], identifiers: tuple[str, ...] = ()) -> str:
    """One proposed change in words, for notices and decision texts (the page shows the diff). Its
    key, its target and the values of its `identifiers` fields read in the order they are stored
    (`display.identifier_text`)."""
    what = change.get("kind") or change.get("entity") or "?"
    if change.get("key"):  # a key or a title as an identifier: in stored order (display.identifier_text)
        what += f"/{identifier_text(change['key'])}"
    if change.get("target") is not None:
        what += f" “{identifier_text(change['target'])}”"
    text = f"{change.get('op', '?')} {what}"
    if change.get("value") is not None:
        text += f" = {change['value']!r}"
    if change.get("confidence") is not None:
        text += f" (confidence {change['confidence']})"
    if change.get("fields"):
        fields = change["fields"].items()
        text += " " + ", ".join(
            f"{k}=“{identifier_text(v)}”" if k in identifiers and v is not None else f"{k}={v!r}"
            for k, v in fields
        )
    return text


def describe(action_type: str, body: str) -> list[str]:
    """A proposal in plain lines (what a notice and the decision's text show)."""
    try:
        proposal = parse(action_type, body)
    except Refusal as refusal:
        return [f"(an unreadable proposal: {refusal.reason})"]
    lines = [f"Proposed change to the {proposal.kind.label} (against version {proposal.proposed_against}):"]
    lines += [f"- {change_line(c, proposal.kind.identifiers)}" for c in proposal.changes]
    if proposal.reason:
        lines += ["", f"Why: {proposal.reason}"]
    return lines


class _RolledBack(Exception):
    def __init__(self, rows: list[dict[str, Any]], result: dict[str, Any]) -> None:
        self.rows = rows
        self.result = result


def preview(proposal: Proposal, *, principal: Principal) -> dict[str, Any]:
    """What accepting it would do now, as readable rows (before → after), or why it cannot be done:
    the change is applied in a savepoint, read back, and rolled back — so the preview is exactly
    what Accept would write, and writes nothing."""
    try:
        with transaction.atomic():
            result = proposal.kind.apply(
                principal=principal,
                changes=proposal.changes,
                approval=PREVIEW,
                unchanged_since=proposal.proposed_against,
            )
            raise _RolledBack(proposal.kind.rows(result["version"]) if result.get("version") else [], result)
    except _RolledBack as done:
        return {"ok": True, "rows": done.rows, "high_stakes": bool(done.result.get("high_stakes"))}
    except Refusal as refusal:
        return {"ok": False, "rows": [], "error": refusal.code, "reason": refusal.reason}


def accept(proposal: Proposal, *, principal: Principal, approval: ApprovalEvidence) -> dict[str, Any]:
    """Apply an accepted proposal (inside the approval's transaction): a refusal rolls the
    approval back with it."""
    return proposal.kind.apply(
        principal=principal,
        changes=proposal.changes,
        approval=approval,
        unchanged_since=proposal.proposed_against,
    )
