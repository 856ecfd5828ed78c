"""Review pages for a person, not a database: a notice's page (what changed, who, the evidence, Undo and
Looks right — each one POST), the person's own undo acknowledged by the undo itself, the dashboard's
blocked intents and undelivered safety notices, `/` to the dashboard. Every refusal is tried."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from beliefs import services as beliefs
from beliefs.models import Belief
from intents import lifecycle as intents
from operator_site.models import Notification

pytestmark = pytest.mark.django_db

QUOTE = "Please remember my name is Ian Example and that I go by Ian."


@pytest.fixture
def changed(owner: Any, agent: Any) -> Notification:
    """An agent's high-stakes change, on the person's words: its safety notice."""
    with transaction.atomic():
        beliefs.record_instruction(principal=owner.principal, text=QUOTE)
        beliefs.update_world_model(
            principal=agent.principal,
            changes=[{"op": "add", "kind": "identity", "key": "name", "value": "Ian Example"}],
            confirmed=True,
            quote=QUOTE,
        )
    return Notification.objects.get(kind="world_model_change")


@pytest.fixture
def person(owner: Any) -> Client:
    client = Client()
    client.force_login(owner.principal.user)
    return client


@pytest.fixture
def helper(django_user_model: Any) -> Client:
    """A staff login (superuser) that is not linked to a human principal: it may look, never act."""
    user = django_user_model.objects.create_user(
        "helper", password="pw-helper-1", is_staff=True, is_superuser=True
    )
    client = Client()
    client.force_login(user)
    return client


def page_of(notice: Notification) -> str:
    return f"/admin/operator_site/notification/{notice.pk}/change/"


def ack_url(notice: Notification) -> str:
    return f"/admin/operator_site/notification/{notice.pk}/acknowledge/"


# --- the notice page -------------------------------------------------------------------------------------
def test_the_notice_page_opens_with_what_who_evidence_and_two_buttons(
    person: Client, changed: Notification
) -> None:
    page = person.get(page_of(changed)).content.decode()
    what, who, evidence = page.index("What changed"), page.index('id="notice-who"'), page.index("Evidence")
    assert who < what < evidence < page.index('value="Undo"') < page.index("Delivery details")
    assert "scout" in page[who:what] and "(an agent)" in page[who:what]
    assert "Ian Example" in page[what:evidence] and "(absent)" in page[what:evidence]  # before → after
    assert QUOTE in page[evidence:] and "said by owner" in page[evidence:]
    assert page.count('<form method="post"') == 2 and 'value="Looks right"' in page
    for form in page.split('<form method="post" action="')[1:]:
        assert "csrfmiddlewaretoken" in form.split("</form>")[0]
    # No list, checkbox or dropdown on the way to acknowledging.
    assert 'type="checkbox"' not in page and "<select" not in page
    # The delivery fields are folded away at the bottom, not the opening of the page.
    assert page.index("<details") > page.index('value="Looks right"') and "claimed until" not in page


def test_looks_right_is_one_post_and_acknowledges(person: Client, owner: Any, changed: Notification) -> None:
    response = person.post(ack_url(changed))
    assert response.status_code == 302 and response["Location"] == "/admin/"
    changed.refresh_from_db()
    assert changed.acknowledged_by_id == owner.principal.pk and changed.acknowledged_at is not None
    # Twice: nothing changes, it says who did it.
    first = changed.acknowledged_at
    response = person.post(ack_url(changed), follow=True)
    assert any("already acknowledged (by owner)" in str(m) for m in response.context["messages"])
    changed.refresh_from_db()
    assert changed.acknowledged_at == first
    assert 'value="Looks right"' not in person.get(page_of(changed)).content.decode()


def test_acknowledging_is_refused_to_anyone_but_the_person(
    helper: Client, owner: Any, agent: Any, changed: Notification
) -> None:
    """A staff login that is not a person, a GET, a POST without CSRF, an agent's bearer token, an
    anonymous visitor, a notice that does not exist: each is refused and nothing is acknowledged."""
    assert helper.post(ack_url(changed)).status_code == 403
    assert "may look, never act" in helper.get(page_of(changed)).content.decode()
    person = Client(enforce_csrf_checks=True)
    person.force_login(owner.principal.user)
    assert person.get(ack_url(changed)).status_code == 405
    assert person.post(ack_url(changed)).status_code == 403  # no CSRF token
    anonymous = Client()
    assert anonymous.post(ack_url(changed)).status_code == 302  # to the login page
    assert (
        anonymous.post(ack_url(changed), headers={"Authorization": f"Bearer {agent.token}"}).status_code
        == 302
    )
    assert Client().post("/admin/operator_site/notification/999999/acknowledge/").status_code == 302
    changed.refresh_from_db()
    assert changed.acknowledged_at is None
    trusted = Client()
    trusted.force_login(owner.principal.user)
    assert trusted.post("/admin/operator_site/notification/999999/acknowledge/").status_code == 404
    assert trusted.get("/admin/operator_site/notification/abc/change/").status_code in (302, 404)
    assert trusted.get(f"/admin/operator_site/notification/{'9' * 40}/change/").status_code in (302, 404)
    assert trusted.post(page_of(changed)).status_code == 405


def test_undo_from_the_notice_page_is_one_post_and_acknowledges_itself(
    person: Client, owner: Any, changed: Notification
) -> None:
    page = person.get(page_of(changed)).content.decode()
    undo = page.split('value="Undo"')[0].rsplit('action="', 1)[1].split('"')[0]
    assert undo.startswith("/revert/")
    response = person.post(undo)
    assert response.status_code == 302 and response["Location"] == page_of(changed)
    assert not Belief.objects.filter(key="name", status="active").exists()
    changed.refresh_from_db()
    assert changed.revert_used_by_id == owner.principal.pk and changed.acknowledged_at is not None
    own = Notification.objects.get(kind="world_model_revert")
    assert own.safety and own.acknowledged_by_id == owner.principal.pk  # the person's own act
    after = person.get(page_of(changed)).content.decode()
    assert "Undone by owner" in after and 'value="Undo"' not in after


def test_the_persons_own_revert_is_acknowledged_whatever_the_door(
    person: Client, owner: Any, agent: Any, changed: Notification
) -> None:
    """The admin's undo page, and a human token's revert tool (the service the tool calls): the
    notice of the person's own act is created acknowledged. An agent's own undo is not: the person
    must still see it."""
    response = person.post(
        f"/admin/beliefs/worldmodelversion/{changed.subject_id}/undo/",
        {"expected_version": changed.subject_id},
    )
    assert response.status_code == 302, response.content[:400]
    first = Notification.objects.filter(kind="world_model_revert").latest("id")
    assert first.acknowledged_by_id == owner.principal.pk
    with transaction.atomic():
        # the person brings the change back (a restore), as their token's revert tool would
        beliefs.REVERTER.revert(principal=owner.principal, to_version=changed.subject_id)
    second = Notification.objects.filter(kind="world_model_revert").latest("id")
    assert second.pk != first.pk and second.acknowledged_by_id == owner.principal.pk
    # An agent's change and its own undo: neither acknowledged.
    with transaction.atomic():
        beliefs.update_world_model(
            principal=agent.principal,
            changes=[{"op": "add", "kind": "risk", "key": "storm", "value": "high"}],
        )
        beliefs.record_instruction(principal=owner.principal, text="My nickname is Izzy.")
        beliefs.update_world_model(
            principal=agent.principal,
            changes=[{"op": "add", "kind": "identity", "key": "nickname", "value": "Izzy"}],
            confirmed=True,
            quote="My nickname is Izzy.",
        )
        beliefs.REVERTER.revert(principal=agent.principal)
    agents = Notification.objects.filter(kind="world_model_revert").latest("id")
    assert agents.pk != second.pk and agents.acknowledged_at is None


def test_a_notice_without_a_version_shows_its_text_and_links_its_intent(person: Client, agent: Any) -> None:
    with transaction.atomic():
        blocked, _ = intents.record_intent(
            principal=agent.principal,
            action=intents.ActionInput(type="share_credentials", title="Send the wifi password"),
        )
    notice = Notification.objects.get(kind="intent_blocked")
    page = person.get(page_of(notice)).content.decode()
    assert "The gate denied it" in page and f"/admin/intents/intent/{blocked.pk}/change/" in page
    assert 'value="Looks right"' in page and 'value="Undo"' not in page


# --- the dashboard ---------------------------------------------------------------------------------------
def test_the_dashboard_shows_blocked_intents_and_undelivered_safety_notices(
    person: Client, agent: Any
) -> None:
    with transaction.atomic():
        intents.record_intent(
            principal=agent.principal,
            action=intents.ActionInput(type="share_credentials", title="Send the wifi password"),
        )
    Notification.objects.create(
        kind="test_alarm",
        title="Nobody got this one",
        safety=True,
        state=Notification.State.FAILED,
        created_at=timezone.now() - timedelta(hours=1),
    )
    page = person.get("/admin/").content.decode()
    blocked = page[page.index('id="review-blocked"') :]
    assert "share_credentials" in blocked and "Send the wifi password" in blocked and "never done" in blocked
    undelivered = page[page.index('id="review-undelivered"') : page.index('id="review-blocked"')]
    assert "Nobody got this one" in undelivered and 'class="op-count">1<' in undelivered


def test_the_bare_address_sends_a_person_to_the_dashboard(person: Client) -> None:
    response = Client().get("/")
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert person.get("/", follow=True).request["PATH_INFO"] == "/admin/"
