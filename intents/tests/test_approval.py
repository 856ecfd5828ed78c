"""The approval library function and the person's other answers: only a person, only a pending intent,
only the payload the person saw, never a denied one, once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from intents import approval
from intents.answers import intent_dict
from intents.lifecycle import ActionInput, expire_pending, idempotency_key, payload_digest, record_intent
from intents.models import MAX_AMOUNT_CENTS, Decision, Intent, IntentEvent
from operator_site.models import Instruction, Principal
from operator_site.refusals import Refusal

pytestmark = pytest.mark.django_db


@pytest.fixture
def person(owner: Any) -> Any:
    """The person's admin login (staff, linked to the human principal `owner`)."""
    return owner.principal.user


@pytest.fixture
def pending(agent: Any, record: Any) -> Intent:
    intent, _ = record(agent)
    return intent


def test_accept_approves_exactly_once_and_records_who(person, pending) -> None:
    approved = approval.approve_intent(
        pending, by=person, seen=pending.payload_digest, via="admin", note="fine"
    )
    decision = Decision.objects.get(intent=pending)
    assert approved.status == "approved"
    assert approved.approval_decision_id == decision.id
    assert approved.approved_by.name == "owner" and approved.approved_at is not None
    assert (decision.status, decision.decided_by.name, decision.decided_via, decision.note) == (
        "approved",
        "owner",
        "admin",
        "fine",
    )
    assert intent_dict(approved)["approval_decision_id"] == decision.id
    event = IntentEvent.objects.get(event="approved")
    assert (event.by.name, event.via, event.from_status, event.to_status) == (
        "owner",
        "admin",
        "pending_approval",
        "approved",
    )
    with pytest.raises(Refusal) as refused:  # single-use
        approval.approve_intent(pending, by=person, seen=pending.payload_digest, via="api")
    assert refused.value.code == "not_pending"
    assert IntentEvent.objects.filter(event="approved").count() == 1


def test_a_changed_payload_is_not_approved(person, pending) -> None:
    seen = pending.payload_digest
    # the payload changes after the person looked (whatever the path: here, straight in the table)
    Intent.objects.filter(pk=pending.pk).update(amount_cents=490000)
    changed = Intent.objects.get(pk=pending.pk)
    Intent.objects.filter(pk=pending.pk).update(payload_digest=payload_digest(changed))
    with pytest.raises(Refusal) as refused:
        approval.approve_intent(pending, by=person, seen=seen, via="admin")
    assert refused.value.code == "payload_changed"
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"
    assert Decision.objects.get(intent=pending).status == "pending"


def test_a_denied_intent_is_never_approved(agent, person, record) -> None:
    blocked, _ = record(agent, type="share_credentials", title="bank login", amount_cents=None)
    with pytest.raises(Refusal) as refused:
        approval.approve_intent(blocked, by=person, seen=blocked.payload_digest, via="admin")
    assert refused.value.code == "denied_by_gate"
    assert Intent.objects.get(pk=blocked.pk).status == "blocked"


def test_only_pending_intents_are_approved(agent, person, record) -> None:
    queued, _ = record(agent, type="note", title="x", amount_cents=None)
    with pytest.raises(Refusal) as refused:
        approval.approve_intent(queued, by=person, seen=queued.payload_digest, via="admin")
    assert refused.value.code == "not_pending"
    assert Intent.objects.get(pk=queued.pk).approval_decision_id is None


def test_an_expired_approval_is_never_approvable_swept_or_not(person, pending) -> None:
    later = pending.expires_at + timedelta(seconds=1)
    with pytest.raises(Refusal) as refused:
        approval.approve_intent(pending, by=person, seen=pending.payload_digest, via="admin", now=later)
    assert refused.value.code == "expired"
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


@pytest.mark.parametrize("who", ["anonymous", "not_staff", "inactive", "no_principal", "agent", "revoked"])
def test_only_an_active_staff_login_of_a_human_principal_decides(
    who: str, pending, django_user_model, owner, make_principal
) -> None:
    from django.contrib.auth.models import AnonymousUser

    if who == "anonymous":
        user: Any = AnonymousUser()
    elif who == "no_principal":
        user = django_user_model.objects.create_user("helper", is_staff=True, is_superuser=True)
    elif who == "agent":
        user = django_user_model.objects.create_user("bot", is_staff=True)
        make_principal("bot", kind="agent", user=user)
    else:
        user = owner.principal.user
        if who == "not_staff":
            user.is_staff = False
        if who == "inactive":
            user.is_active = False
        user.save()
        if who == "revoked":
            Principal.objects.filter(pk=owner.principal.pk).update(active=False)
    for affordance in approval.AFFORDANCES:
        with pytest.raises(Refusal) as refused:
            approval.decide(
                pending.pk,
                affordance,
                by=user,
                via="admin",
                seen=pending.payload_digest,
                title="t",
                text="hi",
            )
        assert refused.value.code == "not_human", affordance
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"
    decision = Decision.objects.get(intent=pending)
    assert (decision.status, decision.response) == ("pending", "")


def test_edit_then_approve_recomputes_the_key_and_approves_the_edit(person, pending, agent) -> None:
    old_key = pending.idempotency_key
    edited = approval.edit_and_approve(
        pending, by=person, seen=pending.payload_digest, via="admin", title="Monthly plan", amount_cents=490
    )
    assert (edited.status, edited.title, edited.amount_cents) == ("approved", "Monthly plan", 490)
    assert edited.idempotency_key == idempotency_key("spend", "Monthly plan", "", 490, "")
    assert edited.idempotency_key != old_key
    assert edited.payload_digest == payload_digest(edited)
    assert edited.approval_decision.title == "Approve: Monthly plan"
    event = IntentEvent.objects.get(event="edited")
    assert event.data["before"]["amount_cents"] == 4900 and event.data["after"]["amount_cents"] == 490
    # the original call is a new intent again today (its key is free), the edit's is taken
    again, created = record_intent(
        principal=agent.principal,
        action=ActionInput(type="spend", title="Monthly plan", amount_cents=490),
    )
    assert (again.id, created) == (edited.id, False)


def test_edit_is_re_stamped_by_the_gate(person, pending) -> None:
    with pytest.raises(Refusal) as refused:
        approval.edit_and_approve(
            pending,
            by=person,
            seen=pending.payload_digest,
            via="admin",
            body="the api_key: sk-abcdefghijklmnopqrstuv",
        )
    assert refused.value.code == "denied_by_gate"
    assert Intent.objects.get(pk=pending.pk).body == ""
    edited = approval.edit_and_approve(
        pending, by=person, seen=pending.payload_digest, via="admin", amount_cents=None
    )
    assert edited.amount_cents is None and edited.policy_decision == "requires_approval"  # still `spend`


def test_edit_colliding_with_another_intent_of_the_day_is_refused(agent, person, record, pending) -> None:
    other, _ = record(agent, title="Monthly plan", amount_cents=490)
    with pytest.raises(Refusal) as refused:
        approval.edit_and_approve(
            pending,
            by=person,
            seen=pending.payload_digest,
            via="admin",
            title="Monthly plan",
            amount_cents=490,
        )
    assert refused.value.code == "duplicate_intent" and refused.value.extra["duplicate_of"] == other.id
    fresh = Intent.objects.get(pk=pending.pk)
    assert (fresh.status, fresh.title) == ("pending_approval", "Annual plan renewal")


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"title": "  "}, "title_required"),
        ({"title": "x" * 301}, "title_too_long"),
        ({"amount_cents": -1}, "invalid_amount"),
        ({"amount_cents": MAX_AMOUNT_CENTS + 1}, "invalid_amount"),
        ({"amount_cents": 10**19}, "invalid_amount"),  # past a 64-bit column: refused, not a 500
    ],
)
def test_bad_edits_are_refused(person, pending, fields: dict, code: str) -> None:
    with pytest.raises(Refusal) as refused:
        approval.edit_and_approve(pending, by=person, seen=pending.payload_digest, via="admin", **fields)
    assert refused.value.code == code
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_respond_records_a_human_authored_instruction_and_leaves_it_pending(person, pending) -> None:
    decision = approval.respond_to_intent(pending, by=person, text="Only if it is still 49.", via="api")
    assert decision.status == "pending" and decision.response == "Only if it is still 49."
    assert decision.responded_by.name == "owner"
    instruction = Instruction.objects.get(pk=decision.response_instruction_id)
    assert instruction.human_authored is True
    assert instruction.text == "Only if it is still 49."
    assert instruction.refs == [f"intent:{pending.id}", f"decision:{decision.id}"]
    assert instruction.channel == "api"
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"
    assert intent_dict(Intent.objects.get(pk=pending.pk))["response"] == "Only if it is still 49."
    with pytest.raises(Refusal) as refused:
        approval.respond_to_intent(pending, by=person, text="   ", via="api")
    assert refused.value.code == "text_required"


def test_ignore_parks_the_question_and_it_can_still_be_approved(person, pending) -> None:
    decision = approval.ignore_intent(pending, by=person, via="admin")
    assert decision.status == "parked" and decision.decided_by.name == "owner"
    with pytest.raises(Refusal) as refused:
        approval.ignore_intent(pending, by=person, via="admin")
    assert refused.value.code == "already_parked"
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"
    approved = approval.approve_intent(pending, by=person, seen=pending.payload_digest, via="admin")
    assert approved.status == "approved"


def test_reject_is_final(person, pending) -> None:
    rejected = approval.reject_intent(pending, by=person, via="admin", note="too dear")
    assert rejected.status == "rejected"
    decision = Decision.objects.get(intent=pending)
    assert (decision.status, decision.decided_by.name, decision.note) == ("rejected", "owner", "too dear")
    for affordance in ("accept", "edit", "respond", "ignore", "reject"):
        with pytest.raises(Refusal) as refused:
            approval.decide(
                pending.pk, affordance, by=person, via="admin", seen=pending.payload_digest, text="x"
            )
        assert refused.value.code == "not_pending"


def test_accept_and_edit_need_the_digest_that_was_seen(person, pending) -> None:
    for affordance in ("accept", "edit"):
        with pytest.raises(Refusal) as refused:
            approval.decide(pending.pk, affordance, by=person, via="admin", seen=None)
        assert refused.value.code == "seen_required"
    with pytest.raises(Refusal) as refused:
        approval.decide(pending.pk, "approve", by=person, via="admin", seen=pending.payload_digest)
    assert refused.value.code == "unknown_affordance"


def test_a_channel_must_be_a_human_one(person, pending) -> None:
    with pytest.raises(ValueError, match="human channel"):
        approval.approve_intent(pending, by=person, seen=pending.payload_digest, via="mcp")
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_approval_after_the_sweep_is_refused(person, pending) -> None:
    assert expire_pending(timezone.now() + timedelta(days=8)) == [pending.id]
    with pytest.raises(Refusal) as refused:
        approval.approve_intent(pending, by=person, seen=pending.payload_digest, via="admin")
    assert refused.value.code == "not_pending"


def test_the_digest_is_the_same_before_and_after_the_database(agent, record, settings) -> None:
    """`due` comes back from the database in UTC; the digest of the same instant must not change."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    settings.OPERATOR_TIME_ZONE = settings.TIME_ZONE = "Asia/Kolkata"
    intent, _ = record(agent, due=datetime(2026, 12, 1, 9, 30, tzinfo=ZoneInfo("Asia/Kolkata")))
    assert payload_digest(Intent.objects.get(pk=intent.pk)) == intent.payload_digest
