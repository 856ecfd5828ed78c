"""The admin approval queue: the four affordances (and reject) as confirmation pages — GET shows and
changes nothing, POST acts once, only for a person, only on the version shown."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from intents.models import Decision, Intent, IntentEvent
from operator_site.models import Instruction

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending(agent: Any, record: Any) -> Intent:
    intent, _ = record(agent, body="Renew the annual plan with Acme.", topic="billing")
    return intent


@pytest.fixture
def person(client: Any, owner: Any) -> Any:
    client.login(username="owner", password="pw-owner-123")
    return client


def page(intent: Intent, affordance: str | None = None) -> str:
    if affordance:
        return reverse("admin:intents_intent_decide_one", args=[intent.pk, affordance])
    return reverse("admin:intents_intent_decide", args=[intent.pk])


def snapshot(intent: Intent) -> tuple[dict, dict, int]:
    return (
        Intent.objects.filter(pk=intent.pk).values().get(),
        Decision.objects.filter(intent=intent).values().get(),
        IntentEvent.objects.count(),
    )


def test_the_queue_lists_pending_intents_with_a_decide_link(person, pending, agent, record) -> None:
    record(agent, type="note", title="a note", amount_cents=None)
    response = person.get(reverse("admin:intents_intent_changelist") + "?queue=pending")
    assert response.status_code == 200
    assert b"Annual plan renewal" in response.content and b"a note" not in response.content
    assert page(pending).encode() in response.content
    assert person.get(reverse("admin:intents_intent_change", args=[pending.pk])).status_code == 200
    assert person.get(reverse("admin:intents_decision_changelist")).status_code == 200
    assert person.get(reverse("admin:intents_intentevent_changelist")).status_code == 200


def test_get_shows_everything_and_changes_nothing(person, pending) -> None:
    before = snapshot(pending)
    for affordance in (None, "accept", "edit", "respond", "ignore", "reject"):
        response = person.get(page(pending, affordance))
        assert response.status_code == 200
        body = response.content.decode()
        assert "Annual plan renewal" in body and "49.00 (4900 cents)" in body
        assert "Spending money, paid subscriptions" in body
        assert pending.payload_digest in body
    assert snapshot(pending) == before


def test_the_admin_cannot_add_change_or_delete_intents(person, pending) -> None:
    assert person.get(reverse("admin:intents_intent_add")).status_code == 403
    assert (
        person.post(reverse("admin:intents_intent_change", args=[pending.pk]), {"title": "x"}).status_code
        == 403
    )
    assert (
        person.post(reverse("admin:intents_intent_delete", args=[pending.pk]), {"post": "yes"}).status_code
        == 403
    )
    assert Intent.objects.get(pk=pending.pk).title == "Annual plan renewal"


def test_accept(person, pending) -> None:
    response = person.post(page(pending, "accept"), {"seen": pending.payload_digest, "note": "go"})
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:intents_intent_change", args=[pending.pk])
    intent = Intent.objects.get(pk=pending.pk)
    assert intent.status == "approved" and intent.approved_by.name == "owner"
    decision = Decision.objects.get(intent=pending)
    assert (decision.status, decision.decided_via, decision.note) == ("approved", "admin", "go")
    assert intent.approval_decision_id == decision.id
    # a double click is harmless
    again = person.post(page(pending, "accept"), {"seen": pending.payload_digest})
    assert again.status_code == 409
    assert b"not pending approval" in again.content
    assert IntentEvent.objects.filter(event="approved").count() == 1


def test_edit_then_approve(person, pending) -> None:
    response = person.post(
        page(pending, "edit"),
        {
            "seen": pending.payload_digest,
            "title": "Monthly plan",
            "body": "Monthly, please.",
            "amount_cents": "490",
        },
    )
    assert response.status_code == 302
    intent = Intent.objects.get(pk=pending.pk)
    assert (intent.status, intent.title, intent.body, intent.amount_cents) == (
        "approved",
        "Monthly plan",
        "Monthly, please.",
        490,
    )
    assert intent.idempotency_key != pending.idempotency_key


@pytest.mark.parametrize(
    "amount", ["4.5", "²", "¹²", "1e5", "-1", "9" * 40, "10000000000001", "0x10", "NaN", "4 500", "<b>1</b>"]
)
def test_edit_with_a_bad_amount_is_refused(person, pending, amount: str) -> None:
    """The form refuses what is not a whole number of cents in 0..10^13 — `²` (a digit to
    str.isdigit(), not to int()) was a 500 — with the page and its message, changing nothing."""
    before = snapshot(pending)
    response = person.post(
        page(pending, "edit"), {"seen": pending.payload_digest, "title": "x", "amount_cents": amount}
    )
    assert response.status_code == 400
    assert b"amount_cents" in response.content
    assert snapshot(pending) == before


@pytest.mark.parametrize(
    ("affordance", "form"),
    [
        ("edit", {"title": "x" * 301}),
        ("edit", {"title": "nul\x00"}),
        ("edit", {"title": "   "}),
        ("respond", {"text": "t" * 5001}),
        ("respond", {"text": ""}),
        ("accept", {"note": "n" * 2001}),
        ("reject", {"note": "nul\x00"}),
    ],
)
def test_bad_form_input_is_refused_and_changes_nothing(person, pending, affordance: str, form: dict) -> None:
    before = snapshot(pending)
    response = person.post(page(pending, affordance), {"seen": pending.payload_digest, **form})
    assert response.status_code == 400
    assert snapshot(pending) == before


def test_respond(person, pending) -> None:
    response = person.post(page(pending, "respond"), {"text": "Wait for the discount code."})
    assert response.status_code == 302
    decision = Decision.objects.get(intent=pending)
    assert (decision.status, decision.response) == ("pending", "Wait for the discount code.")
    assert Instruction.objects.get(pk=decision.response_instruction_id).human_authored is True
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_ignore(person, pending) -> None:
    response = person.post(page(pending, "ignore"), {})
    assert response.status_code == 302
    assert Decision.objects.get(intent=pending).status == "parked"
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_reject(person, pending) -> None:
    response = person.post(page(pending, "reject"), {"note": "no"})
    assert response.status_code == 302
    assert Intent.objects.get(pk=pending.pk).status == "rejected"
    follow = person.get(page(pending))
    assert b"nothing left to decide" in follow.content


def test_the_payload_shown_is_the_payload_approved(person, pending) -> None:
    Intent.objects.filter(pk=pending.pk).update(payload_digest="0" * 64)  # changed since the page was shown
    response = person.post(page(pending, "accept"), {"seen": pending.payload_digest})
    assert response.status_code == 409
    assert b"changed after you saw it" in response.content
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_a_staff_login_without_a_human_principal_may_look_but_not_decide(client, helper, pending) -> None:
    client.login(username="helper", password="pw-helper-123")
    before = snapshot(pending)
    shown = client.get(page(pending))
    assert shown.status_code == 200 and b"may look, never decide" in shown.content
    assert b'name="seen"' not in shown.content
    for affordance in ("accept", "edit", "respond", "ignore", "reject"):
        response = client.post(
            page(pending, affordance), {"seen": pending.payload_digest, "title": "x", "text": "x"}
        )
        assert response.status_code == 403, affordance
    assert snapshot(pending) == before


def test_anonymous_is_sent_to_the_login_page(client, pending) -> None:
    before = snapshot(pending)
    response = client.post(page(pending, "accept"), {"seen": pending.payload_digest})
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert snapshot(pending) == before


def test_unknown_intent_or_affordance_is_404_and_post_without_affordance_is_400(person, pending) -> None:
    assert person.get(reverse("admin:intents_intent_decide", args=[99999])).status_code == 404
    assert person.get(page(pending) + "approve/").status_code == 404
    assert person.post(page(pending), {"seen": pending.payload_digest}).status_code == 400
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_the_admin_form_needs_its_csrf_token(owner, pending) -> None:
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.login(username="owner", password="pw-owner-123")
    response = strict.post(page(pending, "accept"), {"seen": pending.payload_digest})
    assert response.status_code == 403
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"
