"""The status machine: every legal and illegal transition of `operator_update_action_intent`, terminal
statuses that never move, the decision that follows its intent, and `operator_update_decision`."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from intents import approval
from intents.decisions import update_decision
from intents.lifecycle import move_intent, transition_intent
from intents.models import Decision, Intent, IntentEvent
from operator_site.refusals import Refusal
from tests.fixtures import asgi_http, call, orm

STATUSES = [
    "pending_approval",
    "approved",
    "queued",
    "executing",
    "executed",
    "failed",
    "rejected",
    "cancelled",
    "expired",
    "blocked",
]
TERMINAL = {"executed", "failed", "rejected", "cancelled", "expired", "blocked"}
# Written out by hand (not read from the code under test): the legal moves.
LEGAL = {
    ("pending_approval", "cancelled"),
    ("pending_approval", "expired"),
    ("approved", "executing"),
    ("approved", "cancelled"),
    ("queued", "executing"),
    ("queued", "cancelled"),
    ("executing", "executed"),
    ("executing", "failed"),
}
TARGETS = [*STATUSES, "done", ""]


@pytest.fixture
def intent_in(agent, owner, record) -> Callable[[str], Intent]:
    """An intent brought into `status` by the real paths (never by writing the status directly)."""
    counter = itertools.count()

    def make(status: str) -> Intent:
        title = f"intent {next(counter)}"
        if status in {"queued", "executing", "executed", "failed"}:
            intent, _ = record(agent, type="note", title=title, amount_cents=None)
            if status != "queued":
                intent, _ = transition_intent(principal=agent.principal, intent_id=intent.id, to="executing")
            if status in {"executed", "failed"}:
                intent, _ = transition_intent(principal=agent.principal, intent_id=intent.id, to=status)
        elif status == "blocked":
            intent, _ = record(agent, type="share_secret", title=title, amount_cents=None)
        else:
            intent, _ = record(agent, title=title)
            if status == "approved":
                intent = approval.approve_intent(
                    intent, by=owner.principal.user, seen=intent.payload_digest, via="admin"
                )
            elif status == "rejected":
                intent = approval.reject_intent(intent, by=owner.principal.user, via="admin")
            elif status in {"cancelled", "expired"}:
                intent, _ = transition_intent(principal=agent.principal, intent_id=intent.id, to=status)
        assert intent.status == status
        return intent

    return make


def expected_outcome(frm: str, to: str) -> str:
    if to == "rejected":
        return "use_the_decision_tool"
    if to == "approved":
        return "approval_is_human"
    if to not in {"cancelled", "executing", "executed", "failed", "expired"}:
        return "invalid_status"
    if frm in TERMINAL:
        return "terminal_status"
    return "ok" if (frm, to) in LEGAL else "illegal_transition"


@pytest.mark.django_db
@pytest.mark.parametrize(("frm", "to"), list(itertools.product(STATUSES, TARGETS)))
def test_every_transition(agent, intent_in, frm: str, to: str) -> None:
    intent = intent_in(frm)
    before = Intent.objects.filter(pk=intent.pk).values().get()
    events_before = IntentEvent.objects.count()
    outcome = expected_outcome(frm, to)
    if outcome == "ok":
        moved, was = transition_intent(principal=agent.principal, intent_id=intent.id, to=to, note="n")
        assert (was, moved.status) == (frm, to)
        last = IntentEvent.objects.last()
        assert (last.event, last.from_status, last.to_status, last.by_id, last.via) == (
            "transition",
            frm,
            to,
            agent.principal.id,
            "mcp",
        )
        return
    with pytest.raises(Refusal) as refused:
        transition_intent(principal=agent.principal, intent_id=intent.id, to=to)
    assert refused.value.code == outcome
    if outcome == "approval_is_human":
        assert "Approval is a human act" in refused.value.reason
    if outcome == "use_the_decision_tool":  # the refusal says where rejecting is done, truly
        assert "operator_update_decision" in refused.value.reason
        assert "no tool" not in refused.value.reason.lower()
    assert Intent.objects.filter(pk=intent.pk).values().get() == before
    assert IntentEvent.objects.count() == events_before


@pytest.mark.django_db
def test_cancelling_or_expiring_a_pending_intent_closes_its_question(agent, intent_in) -> None:
    for to, decision_status in (("cancelled", "withdrawn"), ("expired", "expired")):
        intent = intent_in("pending_approval")
        transition_intent(principal=agent.principal, intent_id=intent.id, to=to)
        decision = Decision.objects.get(intent=intent)
        assert decision.status == decision_status and decision.decided_by_id == agent.principal.id


@pytest.mark.django_db
def test_an_unknown_intent_is_refused(agent) -> None:
    with pytest.raises(Refusal) as refused:
        transition_intent(principal=agent.principal, intent_id=999, to="cancelled")
    assert refused.value.code == "not_found"


@pytest.mark.django_db
def test_a_stale_read_loses_the_compare_and_set(agent, intent_in) -> None:
    """Two movers read `queued`; the second one's conditional update finds nothing to move."""
    intent = intent_in("queued")
    stale = Intent.objects.get(pk=intent.pk)
    move_intent(intent, "cancelled", by=agent.principal, via="mcp", now=intent.created_at)
    with pytest.raises(Refusal) as refused:
        move_intent(stale, "executing", by=agent.principal, via="mcp", now=intent.created_at)
    assert refused.value.code == "conflict" and refused.value.extra["status"] == "cancelled"
    assert Intent.objects.get(pk=intent.pk).status == "cancelled"


@pytest.mark.django_db
def test_the_database_refuses_acting_without_approval(intent_in) -> None:
    """Even a bug that writes the status directly cannot make an unapproved intent act."""
    from django.db import IntegrityError, transaction

    intent = intent_in("pending_approval")
    for status in ("approved", "executing", "executed"):
        with pytest.raises(IntegrityError), transaction.atomic():
            Intent.objects.filter(pk=intent.pk).update(status=status)
    blocked = intent_in("blocked")
    with pytest.raises(IntegrityError), transaction.atomic():
        Intent.objects.filter(pk=blocked.pk).update(status="queued")


# --- operator_update_decision ---------------------------------------------------------------------
@pytest.mark.django_db
def test_decision_moves_pending_parked_rejected_and_never_approved(agent, intent_in) -> None:
    intent = intent_in("pending_approval")
    decision = Decision.objects.get(intent=intent)
    p = agent.principal
    parked, changed = update_decision(principal=p, decision_id=decision.id, status="parked", note="later")
    assert (parked.status, changed, parked.note) == ("parked", True, "later")
    _, changed = update_decision(principal=p, decision_id=decision.id, status="parked")
    assert changed is False
    back, changed = update_decision(principal=p, decision_id=decision.id, status="pending")
    assert (back.status, changed) == ("pending", True)
    with pytest.raises(Refusal) as refused:
        update_decision(principal=p, decision_id=decision.id, status="approved")
    assert refused.value.code == "approval_is_human"
    for bad in ("accepted", "withdrawn", "expired", "APPROVED", ""):
        with pytest.raises(Refusal) as refused:
            update_decision(principal=p, decision_id=decision.id, status=bad)
        assert refused.value.code == "invalid_status"
    assert Intent.objects.get(pk=intent.pk).status == "pending_approval"

    rejected, changed = update_decision(principal=p, decision_id=decision.id, status="rejected")
    assert (rejected.status, changed, rejected.decided_by_id, rejected.decided_via) == (
        "rejected",
        True,
        p.id,
        "mcp",
    )
    assert Intent.objects.get(pk=intent.pk).status == "rejected"
    for status in ("pending", "parked", "rejected"):
        with pytest.raises(Refusal) as refused:
            update_decision(principal=p, decision_id=decision.id, status=status)
        assert refused.value.code == "decision_closed"


@pytest.mark.django_db
def test_closed_decisions_never_move(agent, intent_in) -> None:
    for status in ("approved", "cancelled", "expired", "rejected"):
        decision = Decision.objects.get(intent=intent_in(status))
        with pytest.raises(Refusal) as refused:
            update_decision(principal=agent.principal, decision_id=decision.id, status="pending")
        assert refused.value.code == "decision_closed"


@pytest.mark.django_db
def test_unknown_decision_is_refused(agent) -> None:
    with pytest.raises(Refusal) as refused:
        update_decision(principal=agent.principal, decision_id=404, status="parked")
    assert refused.value.code == "not_found"


# --- the same through /mcp: refusals are results, nothing written ------------------------------------
async def _record(http: Any, **action: Any) -> dict[str, Any]:
    return await call(
        http, "operator_record_action_intent", {"action": {"type": "spend", "title": "Plan", **action}}
    )


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_lifecycle_over_mcp(agent) -> None:
    async with asgi_http(agent.token) as http:
        row = await _record(http, type="note", amount_cents=None)
        assert row["status"] == "queued"
        refused = await call(http, "operator_update_action_intent", {"id": row["id"], "to": "approved"})
        assert refused["ok"] is False and refused["error"] == "approval_is_human"
        assert "Approval is a human act" in refused["reason"]
        moved = await call(http, "operator_update_action_intent", {"id": row["id"], "to": "executing"})
        assert (moved["ok"], moved["from"], moved["to"]) == (True, "queued", "executing")
        done = await call(
            http, "operator_update_action_intent", {"id": row["id"], "to": "executed", "note": "ok"}
        )
        assert done["intent"]["status"] == "executed"
        again = await call(http, "operator_update_action_intent", {"id": row["id"], "to": "failed"})
        assert again["error"] == "terminal_status"

        pending = await _record(http)
        skip = await call(http, "operator_update_action_intent", {"id": pending["id"], "to": "executing"})
        assert skip["error"] == "illegal_transition"
        decided = await call(
            http, "operator_update_decision", {"id": pending["decision_id"], "status": "approved"}
        )
        assert decided["ok"] is False and decided["error"] == "approval_is_human"
        parked = await call(
            http, "operator_update_decision", {"id": pending["decision_id"], "status": "parked"}
        )
        assert parked["changed"] is True and parked["decision"]["status"] == "parked"
        assert parked["intent"]["status"] == "pending_approval"
        rejected = await call(
            http, "operator_update_decision", {"id": pending["decision_id"], "status": "rejected"}
        )
        assert rejected["intent"]["status"] == "rejected" and rejected["intent"]["affordances"] == []
    statuses = await orm(lambda: dict(Intent.objects.values_list("id", "status")))
    assert statuses == {row["id"]: "executed", pending["id"]: "rejected"}
