"""Approvals with follow-through: what Accept leads to (said on the page, in the confirmation and in
the API), and withdrawing an approved intent before the executor claims it — refused cleanly once
it has, and race-free against the executor's claim (proven on PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from intents import approval, executor, handlers
from intents.models import Decision, Intent, IntentEvent
from intents.tests.test_races import race
from operator_site.models import Principal
from operator_site.refusals import Refusal

pytestmark = pytest.mark.django_db


@pytest.fixture
def person(owner: Any) -> Any:
    return owner.principal.user


@pytest.fixture
def approved(agent: Any, record: Any, person: Any) -> Intent:
    intent, _ = record(
        agent, type="send_email", title="Tell Bob", recipient="bob@example.com", amount_cents=None
    )
    return approval.approve_intent(intent, by=person, seen=intent.payload_digest, via="admin")


# --- what Accept leads to ----------------------------------------------------------------------------------
def test_follow_through_names_the_handler_or_says_nothing_will(settings: Any) -> None:
    settings.BRAIN_URL = ""
    no_brain = handlers.follow_through("note")
    assert not no_brain["runs"] and "until a brain is configured" in no_brain["text"]
    assert no_brain["handler"] == "files_write"
    no_handler = handlers.follow_through("send_email")
    assert not no_handler["runs"] and no_handler["handler"] is None
    assert "no handler for 'send_email'" in no_handler["text"] and "no_handler" in no_handler["text"]
    proposal = handlers.follow_through("world_model_change")
    assert proposal["runs"] and "at once" in proposal["text"]
    settings.BRAIN_URL = "http://brain.invalid/mcp"
    with_brain = handlers.follow_through("note")
    assert with_brain["runs"] and "files_write" in with_brain["text"] and "`" not in with_brain["text"]
    assert not handlers.follow_through("send_email")["runs"]  # a brain does not give email a handler


def test_the_approval_page_and_accept_say_what_happens_next(
    owner: Any, agent: Any, record: Any, settings: Any
) -> None:
    settings.BRAIN_URL = ""
    intent, _ = record(
        agent, type="note", title="Write down the plan", amount_cents=None, recipient="bob@x.org"
    )
    client = Client()
    client.force_login(owner.principal.user)
    page = client.get(f"/admin/intents/intent/{intent.pk}/decide/").content.decode()
    assert "What happens after Accept" in page and "until a brain is configured" in page
    response = client.post(
        f"/admin/intents/intent/{intent.pk}/decide/accept/", {"seen": intent.payload_digest}, follow=True
    )
    shown = [str(m) for m in response.context["messages"]]
    assert any("Approved intent" in m and "until a brain is configured" in m for m in shown), shown
    # Approved and unclaimed: the page now offers Withdraw, and says what happens next.
    page = client.get(f"/admin/intents/intent/{intent.pk}/decide/").content.decode()
    assert "What happens next" in page and 'value="Withdraw"' in page


# --- withdrawing ------------------------------------------------------------------------------------------
def test_withdraw_cancels_an_unclaimed_approval_and_records_who(person: Any, approved: Intent) -> None:
    withdrawn = approval.withdraw_intent(approved, by=person, via="admin", note="not now")
    assert withdrawn.status == "cancelled"
    assert Decision.objects.get(intent=approved).status == "withdrawn"
    event = IntentEvent.objects.filter(intent=approved, event="withdrawn").select_related("by").get()
    assert (event.from_status, event.to_status, event.by.name, event.via) == (
        "approved",
        "cancelled",
        "owner",
        "admin",
    )
    assert event.note == "not now"
    # The executor then finds nothing to claim.
    claim = executor.claim_next(
        principal=Principal.objects.service(executor.EXECUTOR_PRINCIPAL),
        lease_s=120,
        holder="x",
        now=timezone.now(),
    )
    assert claim is None


def test_withdraw_after_the_executor_claimed_is_refused(person: Any, approved: Intent) -> None:
    claim = executor.claim_next(
        principal=Principal.objects.service(executor.EXECUTOR_PRINCIPAL),
        lease_s=120,
        holder="x",
        now=timezone.now(),
    )
    assert claim is not None and claim.intent.pk == approved.pk
    with pytest.raises(Refusal) as refused:
        approval.withdraw_intent(approved.pk, by=person, via="admin")
    assert refused.value.code == "already_claimed"
    assert Intent.objects.get(pk=approved.pk).status == "executing"
    assert not IntentEvent.objects.filter(intent=approved, event="withdrawn").exists()


def test_only_an_approved_or_queued_intent_can_be_withdrawn(person: Any, agent: Any, record: Any) -> None:
    pending, _ = record(agent, title="Still pending")
    with pytest.raises(Refusal) as refused:
        approval.withdraw_intent(pending, by=person, via="admin")
    assert refused.value.code == "not_withdrawable"  # reject it instead
    with pytest.raises(Refusal) as missing:
        approval.withdraw_intent(424242, by=person, via="admin")
    assert missing.value.code == "not_found"


def test_an_agent_or_a_staff_login_without_a_person_cannot_withdraw(
    agent: Any, helper: Any, approved: Intent
) -> None:
    for by in (agent.principal, helper, None):
        with pytest.raises(Refusal) as refused:
            approval.withdraw_intent(approved, by=by, via="api")
        assert refused.value.code == "not_human"
    assert Intent.objects.get(pk=approved.pk).status == "approved"


def test_the_admin_withdraw_is_one_csrf_checked_post(owner: Any, helper: Any, approved: Intent) -> None:
    url = f"/admin/intents/intent/{approved.pk}/withdraw/"
    staff = Client()
    staff.force_login(helper)
    assert staff.post(url).status_code == 403  # a login that is not a person: refused, nothing changed
    person = Client(enforce_csrf_checks=True)
    person.force_login(owner.principal.user)
    assert person.get(url).status_code == 405
    assert person.post(url).status_code == 403  # no CSRF token
    assert Intent.objects.get(pk=approved.pk).status == "approved"
    person = Client()
    person.force_login(owner.principal.user)
    response = person.post(url, {"note": "changed my mind"})
    assert response.status_code == 302
    assert Intent.objects.get(pk=approved.pk).status == "cancelled"
    again = person.post(url)
    assert again.status_code == 409 and b"only an approved intent" in again.content


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_withdraw_and_the_executors_claim_race_and_exactly_one_wins(owner: Any, agent: Any) -> None:
    """Half the racers withdraw, half claim as the executor, for the same approved intent, many times:
    each time exactly one wins — cancelled with no claim, or executing with every withdrawal refused."""
    from django.db import transaction

    from intents import lifecycle

    person = owner.principal.user
    principal = Principal.objects.service(executor.EXECUTOR_PRINCIPAL)
    outcomes = set()
    for round_ in range(10):
        with transaction.atomic():
            intent, _ = lifecycle.record_intent(
                principal=agent.principal,
                action=lifecycle.ActionInput(type="spend", title=f"Renewal {round_}", amount_cents=100),
            )
        approval.approve_intent(intent, by=person, seen=intent.payload_digest, via="admin")

        def act(i: int, intent_id: int = intent.pk) -> str:
            if i % 2:
                claim = executor.claim_next(
                    principal=principal, lease_s=120, holder=f"e{i}", now=timezone.now()
                )
                return "claimed" if claim is not None else "nothing"
            try:
                approval.withdraw_intent(intent_id, by=person, via="api")
            except Refusal as refusal:
                return refusal.code
            return "withdrew"

        results = race(act)
        assert not [r for r in results if isinstance(r, Exception)], results
        winners = [r for r in results if r in {"claimed", "withdrew"}]
        assert len(winners) == 1, results
        status = Intent.objects.get(pk=intent.pk).status
        assert status == ("executing" if winners == ["claimed"] else "cancelled")
        if status == "executing":
            Intent.objects.filter(pk=intent.pk).update(status="failed", lease_token="")  # out of the way
        outcomes.add(winners[0])
    assert outcomes  # which side wins varies; that exactly one does is the point
