"""The withheld power: approval, and the person's other answers to an intent.

The library function human channels call — the admin approval queue (`intents/admin.py`) and the
human API (`intents/api.py`: a session with CSRF, or a human principal's bearer token) — and nothing
an agent can reach: no tool and no module of the MCP face imports it
(`intents/tests/test_architecture.py`). Each function requires a person, acts only on an intent
still pending with the payload the person saw (or, to withdraw, still approved and unclaimed),
records who decided, and runs in one transaction. docs/gate.md ("Approval: the withheld power") has
the affordances and the rule.
"""

from __future__ import annotations

import copy
from datetime import datetime
from types import EllipsisType
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from beliefs.services import record_instruction
from intents.gate import Verdict
from intents.lifecycle import describe_intent, log_event, move_intent, stamp, withdraw_approval_notice
from intents.models import (
    MAX_AMOUNT_CENTS,
    OPEN_DECISION_STATUSES,
    Decision,
    DecisionStatus,
    Intent,
    IntentStatus,
)
from operator_site import proposals
from operator_site.models import Instruction, Principal
from operator_site.refusals import Refusal

CHANNELS = frozenset({"admin", "api"})
AFFORDANCES = ("accept", "edit", "respond", "ignore", "reject")
MAX_RESPONSE_CHARS = 5000


def human_principal_of(user: Any) -> Principal:
    """The active human principal behind an active staff login — or a human principal itself (the
    human API's bearer token, `intents/api.py`), read again now; refuses anything else, an agent's
    principal first of all."""
    if isinstance(user, Principal):
        fresh = Principal.objects.filter(pk=user.pk).first()
        if fresh is None or not fresh.is_human or not fresh.active:
            raise Refusal(
                "not_human",
                "Only a person decides on an intent: this token is not an active human principal's.",
            )
        return fresh
    if (
        user is None
        or not getattr(user, "is_authenticated", False)
        or not getattr(user, "is_active", False)
        or not getattr(user, "is_staff", False)
    ):
        raise Refusal(
            "not_human", "Only a person signed in with an active staff login can decide on an intent."
        )
    principal = Principal.objects.filter(user_id=user.pk).first()  # read now, not from a cached relation
    if principal is None or not principal.is_human or not principal.active:
        raise Refusal(
            "not_human",
            "This login is not linked to an active human principal: it may look at the queue, never decide.",
        )
    return principal


def _channel(via: str) -> str:
    if via not in CHANNELS:
        raise ValueError(f"unknown human channel {via!r}")
    return via


def _pending(intent: Intent | int, now: datetime, seen: str | None) -> Intent:
    intent_id = intent.pk if isinstance(intent, Intent) else intent
    # Lock order on the intent path: the intent's row, then its decision's (every writer does the
    # same, so concurrent deciders queue instead of deadlocking). The conditional updates below are
    # what make the outcome right; the lock only orders the writers.
    fresh = Intent.objects.select_for_update().filter(id=intent_id).first()
    if fresh is None:
        raise Refusal("not_found", f"There is no intent {intent_id}.")
    if fresh.policy_decision == Verdict.DENY:
        raise Refusal(
            "denied_by_gate", f"The gate denied intent {fresh.id}; a denied intent is never approved."
        )
    if fresh.status != IntentStatus.PENDING_APPROVAL:
        raise Refusal(
            "not_pending",
            f"Intent {fresh.id} is {fresh.status}, not pending approval: there is nothing to decide.",
            status=fresh.status,
        )
    if fresh.expires_at is not None and fresh.expires_at <= now:
        raise Refusal("expired", f"Intent {fresh.id} expired undecided; ask the agent to record it again.")
    if seen is not None and seen != fresh.payload_digest:
        raise Refusal(
            "payload_changed",
            f"Intent {fresh.id} changed after you saw it. Look at what it says now before deciding.",
        )
    return fresh


def _open_decision(intent: Intent) -> Decision:
    decision = Decision.objects.filter(intent=intent).first()
    if decision is None or decision.status not in OPEN_DECISION_STATUSES:
        raise Refusal("decision_closed", f"The question about intent {intent.id} is already closed.")
    return decision


def _conflict(intent: Intent) -> Refusal:
    return Refusal(
        "conflict",
        f"Intent {intent.id} was decided or changed by someone else a moment ago; nothing was changed.",
    )


def _still_pending(intent: Intent, seen: str, now: datetime) -> Any:
    """The conditional part of every decision: still pending, same payload, not expired, not denied."""
    return (
        Intent.objects.filter(id=intent.id, status=IntentStatus.PENDING_APPROVAL, payload_digest=seen)
        .exclude(policy_decision=Verdict.DENY)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    )


def _approve(
    intent: Intent, *, principal: Principal, seen: str, via: str, note: str, now: datetime
) -> Intent:
    decision = _open_decision(intent)
    if not Decision.objects.filter(id=decision.id, status__in=OPEN_DECISION_STATUSES).update(
        status=DecisionStatus.APPROVED,
        decided_by=principal,
        decided_at=now,
        decided_via=via,
        note=note,
        updated_at=now,
    ):
        raise _conflict(intent)
    if not _still_pending(intent, seen, now).update(
        status=IntentStatus.APPROVED,
        approval_decision=decision,
        approved_by=principal,
        approved_at=now,
        updated_at=now,
    ):
        raise _conflict(intent)
    withdraw_approval_notice(intent.id, IntentStatus.APPROVED)
    log_event(
        intent,
        "approved",
        by=principal,
        via=via,
        from_status=IntentStatus.PENDING_APPROVAL,
        to_status=IntentStatus.APPROVED,
        note=note,
        data={"decision_id": decision.id, "payload_digest": seen},
        now=now,
    )
    intent.refresh_from_db()
    if proposals.kind_of(intent.action_type) is not None:
        return _apply_proposal(intent, decision=decision, principal=principal, via=via, now=now)
    return intent


def _apply_proposal(
    intent: Intent, *, decision: Decision, principal: Principal, via: str, now: datetime
) -> Intent:
    """An accepted proposal is applied here, in the approval's transaction, as a new version whose
    evidence is this decision; the intent is then done (`executed`). The executor never touches
    one. If a target changed since the proposal (or it no longer applies), the refusal rolls the
    approval back with it: nothing is merged silently."""
    proposal = proposals.parse(intent.action_type, intent.body)
    evidence = proposals.ApprovalEvidence(
        decision=decision.id, intent=intent.id, by=principal.name, via=via, at=now, proposed_by=intent.actor
    )
    result = proposals.accept(proposal, principal=principal, approval=evidence)
    version = result.get("version")
    return move_intent(
        intent,
        IntentStatus.EXECUTED,
        by=principal,
        via=via,
        note=f"applied as version {version} of the {proposal.kind.label}",
        now=now,
        data={"version": version, "model": proposal.kind.label},
        execution_result={"applied": True, "model": proposal.kind.label, "version": version},
    )


@transaction.atomic
def approve_intent(
    intent: Intent | int, *, by: Any, seen: str, via: str, note: str = "", now: datetime | None = None
) -> Intent:
    """Accept: approve a pending intent exactly as the person saw it (`seen` is its `payload_digest`).

    Single-use: the intent leaves `pending_approval`, so a second approval finds nothing to decide.
    Sets `approval_decision_id` to the decision the person answered.
    """
    principal = human_principal_of(by)
    now = now or timezone.now()
    fresh = _pending(intent, now, seen)
    return _approve(fresh, principal=principal, seen=seen, via=_channel(via), note=note.strip(), now=now)


@transaction.atomic
def edit_and_approve(
    intent: Intent | int,
    *,
    by: Any,
    seen: str,
    via: str,
    title: str | None = None,
    body: str | None = None,
    amount_cents: int | EllipsisType | None = ...,
    note: str = "",
    now: datetime | None = None,
) -> Intent:
    """Edit: change the title, body and/or amount, then approve the edited payload.

    The edit is stamped by the gate again (an edit that the gate denies is refused), gets its new
    idempotency key (refused if an identical intent already exists that day) and payload digest;
    the approval is of exactly the edited payload. `amount_cents=None` removes the amount; leaving
    it out (`...`) keeps it.
    """
    principal = human_principal_of(by)
    via = _channel(via)
    now = now or timezone.now()
    fresh = _pending(intent, now, seen)
    edited = copy.copy(fresh)
    if title is not None:
        edited.title = " ".join(title.split())
        if not edited.title:
            raise Refusal("title_required", "The title cannot be empty.")
        if len(edited.title) > Intent._meta.get_field("title").max_length:
            raise Refusal("title_too_long", "The title is longer than 300 characters.")
    if body is not None:
        edited.body = body
        if proposals.kind_of(fresh.action_type) is not None:
            # An edited proposal is held to the same schema as the agent's.
            edited.body = proposals.parse(fresh.action_type, body).body()
    if amount_cents is not ...:
        if amount_cents is not None and (
            isinstance(amount_cents, bool) or not 0 <= amount_cents <= MAX_AMOUNT_CENTS
        ):
            raise Refusal(
                "invalid_amount",
                f"The amount must be a whole number of cents, from 0 to {MAX_AMOUNT_CENTS:,}.",
            )
        edited.amount_cents = amount_cents
    result = stamp(edited)
    if result.decision == Verdict.DENY:
        raise Refusal(
            "denied_by_gate",
            "The gate denies the edited intent, so it cannot be approved: " + " ".join(result.reasons),
            policy_reasons=list(result.reasons),
        )
    if edited.payload_digest == fresh.payload_digest:
        return _approve(fresh, principal=principal, seen=seen, via=via, note=note.strip(), now=now)
    try:
        with transaction.atomic():
            changed = _still_pending(fresh, seen, now).update(
                title=edited.title,
                body=edited.body,
                amount_cents=edited.amount_cents,
                idempotency_key=edited.idempotency_key,
                payload_digest=edited.payload_digest,
                policy_decision=edited.policy_decision,
                policy_reasons=edited.policy_reasons,
                policy_rules=edited.policy_rules,
                updated_at=now,
            )
    except IntegrityError as exc:
        twin = Intent.objects.filter(
            idempotency_key=edited.idempotency_key, local_day=fresh.local_day
        ).first()
        raise Refusal(
            "duplicate_intent",
            f"An identical intent (#{twin.id if twin else '?'}) already exists that day; decide on that one.",
            duplicate_of=twin.id if twin else None,
        ) from exc
    if not changed:
        raise _conflict(fresh)
    before = {"title": fresh.title, "body": fresh.body, "amount_cents": fresh.amount_cents}
    after = {"title": edited.title, "body": edited.body, "amount_cents": edited.amount_cents}
    log_event(
        fresh,
        "edited",
        by=principal,
        via=via,
        from_status=IntentStatus.PENDING_APPROVAL,
        to_status=IntentStatus.PENDING_APPROVAL,
        data={"before": before, "after": after, "idempotency_key": edited.idempotency_key},
        now=now,
    )
    Decision.objects.filter(intent=fresh, status__in=OPEN_DECISION_STATUSES).update(
        title=f"Approve: {edited.title}"[:300], detail=describe_intent(edited), updated_at=now
    )
    return _approve(
        edited, principal=principal, seen=edited.payload_digest, via=via, note=note.strip(), now=now
    )


@transaction.atomic
def respond_to_intent(
    intent: Intent | int, *, by: Any, text: str, via: str, now: datetime | None = None
) -> Decision:
    """Respond: record the person's own words on the question; the intent stays pending.

    The reply is a human-authored instruction (`operator_site.Instruction`, recorded by the person's
    principal, refs `intent:<id>` and `decision:<id>`): it comes from a person's login, never from a
    token. The decision keeps the latest reply (`response`, `responded_by`, `responded_at`,
    `response_instruction_id`) for the agent to read; the history keeps every one.
    """
    principal = human_principal_of(by)
    via = _channel(via)
    now = now or timezone.now()
    text = text.strip()
    if not text:
        raise Refusal("text_required", "Write the response you want the agent to read.")
    if len(text) > MAX_RESPONSE_CHARS:
        raise Refusal("text_too_long", f"A response is at most {MAX_RESPONSE_CHARS} characters.")
    fresh = _pending(intent, now, None)
    decision = _open_decision(fresh)
    instruction = record_instruction(
        principal=principal,
        text=text,
        kind=Instruction.Kind.INSTRUCTION,
        channel=via,
        refs=[f"intent:{fresh.id}", f"decision:{decision.id}"],
        now=now,
    )
    if not Decision.objects.filter(id=decision.id, status__in=OPEN_DECISION_STATUSES).update(
        response=text,
        responded_by=principal,
        responded_at=now,
        response_instruction_id=instruction.id,
        updated_at=now,
    ):
        raise _conflict(fresh)
    log_event(
        fresh, "responded", by=principal, via=via, note=text, data={"instruction_id": instruction.id}, now=now
    )
    decision.refresh_from_db()
    return decision


@transaction.atomic
def ignore_intent(
    intent: Intent | int, *, by: Any, via: str, note: str = "", now: datetime | None = None
) -> Decision:
    """Ignore: park the question. The intent stays pending (and expires if nobody comes back to it)."""
    principal = human_principal_of(by)
    via = _channel(via)
    now = now or timezone.now()
    fresh = _pending(intent, now, None)
    decision = _open_decision(fresh)
    if not Decision.objects.filter(id=decision.id, status=DecisionStatus.PENDING).update(
        status=DecisionStatus.PARKED,
        decided_by=principal,
        decided_at=now,
        decided_via=via,
        note=note.strip(),
        updated_at=now,
    ):
        raise Refusal("already_parked", f"The question about intent {fresh.id} is already parked.")
    log_event(
        fresh,
        "decision_parked",
        by=principal,
        via=via,
        from_status=decision.status,
        to_status=DecisionStatus.PARKED,
        note=note.strip(),
        now=now,
    )
    decision.refresh_from_db()
    return decision


@transaction.atomic
def reject_intent(
    intent: Intent | int, *, by: Any, via: str, note: str = "", now: datetime | None = None
) -> Intent:
    """Reject: the person says no. The intent becomes `rejected` (terminal), its decision too."""
    principal = human_principal_of(by)
    via = _channel(via)
    now = now or timezone.now()
    fresh = _pending(intent, now, None)
    decision = _open_decision(fresh)
    if not Decision.objects.filter(id=decision.id, status__in=OPEN_DECISION_STATUSES).update(
        status=DecisionStatus.REJECTED,
        decided_by=principal,
        decided_at=now,
        decided_via=via,
        note=note.strip(),
        updated_at=now,
    ):
        raise _conflict(fresh)
    return move_intent(fresh, IntentStatus.REJECTED, by=principal, via=via, note=note.strip(), now=now)


WITHDRAWABLE = (IntentStatus.APPROVED, IntentStatus.QUEUED)


@transaction.atomic
def withdraw_intent(
    intent: Intent | int, *, by: Any, via: str, note: str = "", now: datetime | None = None
) -> Intent:
    """Withdraw: the person takes back an approved intent (or one the gate queued) before the executor
    claims it. It becomes `cancelled` (terminal), its approval decision `withdrawn`, and the history
    records who withdrew it, when and through which channel.

    Refused cleanly — `already_claimed` — once the executor has claimed it: from `executing` on, the
    brain may already be acting, and only the executor finishes it. The move is one conditional
    update on the status read ("only if still approved"); the executor's claim is a compare-and-set on
    the same column, so of a withdrawal and a claim racing, exactly one wins and the other is told so.
    """
    principal = human_principal_of(by)
    via = _channel(via)
    now = now or timezone.now()
    note = note.strip()
    intent_id = intent.pk if isinstance(intent, Intent) else intent
    fresh = Intent.objects.filter(id=intent_id).first()
    if fresh is None:
        raise Refusal("not_found", f"There is no intent {intent_id}.")
    was = fresh.status
    if was not in WITHDRAWABLE:
        raise _not_withdrawable(fresh.id, was)
    # The conditional update: only if still in the status read (see the docstring).
    if not Intent.objects.filter(id=fresh.id, status=was).update(
        status=IntentStatus.CANCELLED, updated_at=now
    ):
        current = Intent.objects.filter(id=fresh.id).values_list("status", flat=True).first()
        raise _not_withdrawable(fresh.id, current or "gone")
    if fresh.approval_decision_id is not None:
        Decision.objects.filter(id=fresh.approval_decision_id, status=DecisionStatus.APPROVED).update(
            status=DecisionStatus.WITHDRAWN,
            note=note or "withdrawn by the person before it was carried out",
            updated_at=now,
        )
    log_event(
        fresh,
        "withdrawn",
        by=principal,
        via=via,
        from_status=was,
        to_status=IntentStatus.CANCELLED,
        note=note,
        now=now,
    )
    fresh.refresh_from_db()
    return fresh


def _not_withdrawable(intent_id: int, status: str) -> Refusal:
    if status == IntentStatus.EXECUTING:
        return Refusal(
            "already_claimed",
            f"Intent {intent_id} was already claimed by the executor (it is executing): it can no longer be "
            "withdrawn. Nothing was changed; its outcome will show on the intent.",
            status=status,
        )
    return Refusal(
        "not_withdrawable",
        f"Intent {intent_id} is {status}: only an approved intent the executor has not claimed yet can be "
        "withdrawn. Nothing was changed.",
        status=status,
    )


def decide(
    intent: Intent | int,
    affordance: str,
    *,
    by: Any,
    via: str,
    seen: str | None = None,
    title: str | None = None,
    body: str | None = None,
    amount_cents: int | EllipsisType | None = ...,
    text: str | None = None,
    note: str = "",
) -> Intent:
    """One entry point for the human channels: the affordance by name. Returns the intent after it."""
    if affordance in {"accept", "edit"} and not seen:
        raise Refusal(
            "seen_required", "Say which version you saw (`seen`, the payload digest shown with the intent)."
        )
    if affordance == "accept":
        return approve_intent(intent, by=by, seen=seen, via=via, note=note)
    if affordance == "edit":
        return edit_and_approve(
            intent, by=by, seen=seen, via=via, title=title, body=body, amount_cents=amount_cents, note=note
        )
    if affordance == "respond":
        decision = respond_to_intent(intent, by=by, text=text or "", via=via)
        return decision.intent
    if affordance == "ignore":
        decision = ignore_intent(intent, by=by, via=via, note=note)
        return decision.intent
    if affordance == "reject":
        return reject_intent(intent, by=by, via=via, note=note)
    raise Refusal("unknown_affordance", f"Choose one of {', '.join(AFFORDANCES)}, not {affordance!r}.")
