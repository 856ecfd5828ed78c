"""Decisions: the questions put to the person. A tool may park, reopen or reject one, never approve.

Rejecting a decision about an intent rejects the intent (docs/gate.md, "Decisions").
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from intents.lifecycle import APPROVAL_IS_HUMAN, log_event, move_intent
from intents.models import OPEN_DECISION_STATUSES, Decision, DecisionStatus, Intent, IntentStatus
from operator_site.models import Principal
from operator_site.refusals import Refusal

# What `operator_update_decision` may set, from where.
DECISION_TOOL_MOVES: dict[str, frozenset[str]] = {
    "pending": frozenset({"pending", "parked", "rejected"}),
    "parked": frozenset({"parked", "pending", "rejected"}),
}
DECISION_TOOL_TARGETS = frozenset({"pending", "parked", "rejected"})


@transaction.atomic
def update_decision(
    *,
    principal: Principal,
    decision_id: int,
    status: str,
    note: str | None = None,
    now: datetime | None = None,
) -> tuple[Decision, bool]:
    """`operator_update_decision`: to pending, parked or rejected; never approved. Returns (decision,
    changed). Rejecting a decision about an intent rejects the intent (conditionally)."""
    now = now or timezone.now()
    if status == DecisionStatus.APPROVED:
        raise Refusal("approval_is_human", APPROVAL_IS_HUMAN)
    if status not in DECISION_TOOL_TARGETS:
        raise Refusal(
            "invalid_status",
            f"{status!r} is not a status this tool sets; use pending, parked or rejected.",
        )
    decision = Decision.objects.filter(id=decision_id).first()
    if decision is None:
        raise Refusal("not_found", f"There is no decision {decision_id}.")
    if decision.intent_id is not None:
        # Lock order on the intent path: the intent's row first, then its decision's (as every
        # other writer does), then read the decision again as it is now.
        Intent.objects.select_for_update().filter(id=decision.intent_id).first()
        decision = Decision.objects.select_related("intent").get(id=decision_id)
    legal = DECISION_TOOL_MOVES.get(decision.status)
    if legal is None:
        raise Refusal(
            "decision_closed",
            f"Decision {decision.id} is {decision.status}; a closed decision never moves again.",
            status=decision.status,
        )
    if status == decision.status:
        return decision, False
    intent = decision.intent
    if (
        status == DecisionStatus.REJECTED
        and intent is not None
        and intent.status != IntentStatus.PENDING_APPROVAL
    ):
        raise Refusal(
            "intent_not_pending",
            f"Intent {intent.id} is {intent.status}, not pending approval: it cannot be rejected.",
            status=intent.status,
        )
    note = (note or "").strip()
    fields: dict[str, Any] = {"status": status, "updated_at": now}
    if note:
        fields["note"] = note
    if status == DecisionStatus.REJECTED:
        fields.update(decided_by=principal, decided_at=now, decided_via="mcp")
    if not Decision.objects.filter(id=decision.id, status=decision.status).update(**fields):
        raise Refusal(
            "conflict",
            f"Decision {decision.id} changed while this call ran; nothing was changed. Re-read it first.",
        )
    if intent is not None:
        if status == DecisionStatus.REJECTED:
            move_intent(intent, IntentStatus.REJECTED, by=principal, via="mcp", note=note, now=now)
        else:
            log_event(
                intent,
                f"decision_{status}",
                by=principal,
                via="mcp",
                from_status=decision.status,
                to_status=status,
                note=note,
                now=now,
            )
    # Read again with its intent, which the answer shows: a plain refresh drops the related row
    # read above, and the answer would load it again on its own.
    decision.refresh_from_db(from_queryset=Decision.objects.select_related("intent"))
    return decision, True


def open_decisions(limit: int = 50) -> list[Decision]:
    """Questions still open (pending, then parked), oldest first."""
    return list(
        Decision.objects.filter(status__in=OPEN_DECISION_STATUSES)
        .select_related("intent")
        .order_by("-status", "created_at", "id")[:limit]
    )
