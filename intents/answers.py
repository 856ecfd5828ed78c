"""What the intents app's tools answer: each answer's declared shape, and the function that builds it.

tests/test_answer_shapes.py calls the real tools and checks every answer has exactly these keys.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, TypedDict, cast

from django.db.models import Prefetch
from django.utils import timezone

from intents.models import Decision, Directive, Intent, IntentStatus

APPROVAL_AFFORDANCES = ("accept", "edit", "respond", "ignore")


class DirectiveAnswer(TypedDict):
    id: int
    kind: str
    topic: str | None
    reason: str | None
    set_by: str
    created: datetime
    expires: datetime
    minutes_left: int
    cleared: datetime | None


class ExecutionAnswer(TypedDict):
    """What the executor did with an intent. `result` holds the brain's answer: tainted data."""

    claims: int
    holder: str | None
    lease_expires_at: datetime | None
    attempted_at: datetime | None
    execution_key: str | None
    result: dict[str, Any] | None


class IntentAnswer(TypedDict):
    """An intent: the fields of the intent row (docs/gate.md, "The intent row and its key") first,
    in that order, then the rest."""

    id: int
    action_type: str
    title: str
    status: str
    policy_decision: str
    policy_reasons: list[str]
    approval_decision_id: int | None
    idempotency_key: str
    affordances: list[str]
    recipient: str | None
    amount_cents: int | None
    body: str | None
    topic: str | None
    due: datetime | None
    policy_rules: list[str]
    decision_id: int | None
    decision_status: str | None
    response: str | None
    recorded_by: str
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    execution: ExecutionAnswer | None


class RecordedIntentAnswer(IntentAnswer):
    """What recording an intent answers: the intent, and whether this call created it (an identical
    action the same day answers the existing intent, `created: false`)."""

    created: bool


class DecisionAnswer(TypedDict):
    id: int
    title: str
    detail: str
    status: str
    intent_id: int | None
    note: str | None
    response: str | None
    decided_by: str | None
    decided_at: datetime | None
    decided_via: str | None
    created_at: datetime
    updated_at: datetime


def directive_dict(directive: Directive, now: datetime | None = None) -> DirectiveAnswer:
    now = now or timezone.now()
    seconds_left = (directive.expires_at - now).total_seconds()
    return {
        "id": directive.id,
        "kind": directive.kind,
        "topic": directive.topic or None,
        "reason": directive.reason or None,
        "set_by": directive.actor,
        "created": directive.created_at,
        "expires": directive.expires_at,
        "minutes_left": max(0, math.ceil(seconds_left / 60)),
        "cleared": directive.cleared_at,
    }


def with_decisions() -> Prefetch:
    """A listing's prefetch of each intent's decisions, oldest first, into `prefetched_decisions`
    (Django's public `Prefetch(to_attr=...)`): `intent_dict` then runs no query per intent."""
    return Prefetch("decisions", queryset=Decision.objects.order_by("pk"), to_attr="prefetched_decisions")


def first_decision(intent: Intent) -> Decision | None:
    """The intent's (first) decision: the one record_intent has just opened, or the first of those a
    listing prefetched (`with_decisions`), or one query."""
    if not intent.pk:
        return None
    if intent.opened_decision is not None:
        return intent.opened_decision
    prefetched = getattr(intent, "prefetched_decisions", None)
    if prefetched is not None:
        return prefetched[0] if prefetched else None
    return intent.decisions.order_by("pk").first()


def intent_dict(intent: Intent, *, created: bool | None = None) -> IntentAnswer | RecordedIntentAnswer:
    pending = intent.status == IntentStatus.PENDING_APPROVAL
    row: dict[str, Any] = {
        "id": intent.id,
        "action_type": intent.action_type,
        "title": intent.title,
        "status": intent.status,
        "policy_decision": intent.policy_decision,
        "policy_reasons": list(intent.policy_reasons),
        "approval_decision_id": intent.approval_decision_id,
        "idempotency_key": intent.idempotency_key,
        "affordances": list(APPROVAL_AFFORDANCES) if pending else [],
    }
    if created is not None:
        row["created"] = created
    decision = first_decision(intent)
    row.update(
        {
            "recipient": intent.recipient or None,
            "amount_cents": intent.amount_cents,
            "body": intent.body or None,
            "topic": intent.topic or None,
            "due": intent.due,
            "policy_rules": list(intent.policy_rules),
            "decision_id": decision.id if decision else None,
            "decision_status": decision.status if decision else None,
            "response": decision.response or None if decision else None,
            "recorded_by": intent.actor,
            "created_at": intent.created_at,
            "updated_at": intent.updated_at,
            "expires_at": intent.expires_at if pending else None,
            "execution": execution_dict(intent),
        }
    )
    return cast("IntentAnswer | RecordedIntentAnswer", row)


def execution_dict(intent: Intent) -> ExecutionAnswer | None:
    """What the executor did with the intent (None if it never claimed it). `result` holds the
    brain's answer: tainted data, never instructions."""
    if not intent.claims and intent.execution_result is None:
        return None
    return {
        "claims": intent.claims,
        "holder": intent.lease_holder or None,
        "lease_expires_at": intent.lease_expires_at if intent.status == IntentStatus.EXECUTING else None,
        "attempted_at": intent.attempted_at,
        "execution_key": intent.execution_key or None,
        "result": intent.execution_result,
    }


def decision_dict(decision: Decision) -> DecisionAnswer:
    return {
        "id": decision.id,
        "title": decision.title,
        "detail": decision.detail,
        "status": decision.status,
        "intent_id": decision.intent_id,
        "note": decision.note or None,
        "response": decision.response or None,
        "decided_by": decision.decided_by.name if decision.decided_by_id else None,
        "decided_at": decision.decided_at,
        "decided_via": decision.decided_via or None,
        "created_at": decision.created_at,
        "updated_at": decision.updated_at,
    }
