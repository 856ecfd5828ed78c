"""Expiry of pending approvals (the function the ticks call and `manage.py operator_expire`), and the
approval request shaped by directives: held by quiet, by a muted topic, off-topic under focus;
released when the directive lapses or is cleared; safety notices never held."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.core.management import call_command
from django.utils import timezone

from intents.answers import intent_dict
from intents.directives import clear_directives, set_directive
from intents.lifecycle import ActionInput, expire_pending, record_intent, transition_intent
from intents.models import Decision, Intent, IntentEvent
from operator_site import notifications
from operator_site.models import Notification

pytestmark = pytest.mark.django_db


# --- expiry --------------------------------------------------------------------------------------
def test_pending_approvals_expire_after_the_configured_days(agent, record, settings, t0) -> None:
    settings.OPERATOR_APPROVAL_EXPIRY_DAYS = 3
    old, _ = record(agent, now=t0, title="old")
    young, _ = record(agent, now=t0 + timedelta(days=2), title="young")
    queued, _ = record(agent, now=t0, type="note", title="note", amount_cents=None)
    assert old.expires_at == t0 + timedelta(days=3)
    assert expire_pending(t0 + timedelta(days=3) - timedelta(seconds=1)) == []
    assert expire_pending(t0 + timedelta(days=3)) == [old.id]
    assert expire_pending(t0 + timedelta(days=3)) == []  # idempotent
    assert Intent.objects.get(pk=old.pk).status == "expired"
    assert Intent.objects.get(pk=young.pk).status == "pending_approval"
    assert Intent.objects.get(pk=queued.pk).status == "queued"  # only approvals expire
    decision = Decision.objects.get(intent=old)
    assert (decision.status, decision.decided_via, decision.decided_by_id) == ("expired", "expiry", None)
    event = IntentEvent.objects.filter(intent=old).last()
    assert (event.event, event.to_status, event.via, event.by_id) == ("transition", "expired", "expiry", None)


def test_the_default_is_seven_days(agent, record, t0) -> None:
    intent, _ = record(agent, now=t0)
    assert intent.expires_at == t0 + timedelta(days=7)
    assert intent_dict(intent)["expires_at"] == intent.expires_at


def test_a_parked_question_expires_too(agent, owner, record, t0) -> None:
    from intents import approval

    intent, _ = record(agent, now=t0)
    approval.ignore_intent(intent, by=owner.principal.user, via="admin", now=t0)
    assert expire_pending(t0 + timedelta(days=7)) == [intent.id]
    assert Decision.objects.get(intent=intent).status == "expired"


def test_the_operator_expire_command(agent, record, t0) -> None:
    intent, _ = record(agent, now=timezone.now() - timedelta(days=8))
    out = io.StringIO()
    call_command("operator_expire", stdout=out)
    assert json.loads(out.getvalue()) == {"expired": [intent.id]}
    out = io.StringIO()
    call_command("operator_expire", stdout=out)
    assert json.loads(out.getvalue()) == {"expired": []}


# --- directives shape the approval request ---------------------------------------------------------------
def directive(agent: Any, kind: str, topic: str | None = None, minutes: int = 60) -> None:
    set_directive(principal=agent.principal, kind=kind, topic=topic, minutes=minutes, reason=None)


def notice_of(intent: Intent) -> Notification:
    return Notification.objects.get(dedupe_key=f"intent:{intent.id}")


def test_without_directives_the_request_is_delivered_at_once(agent, record) -> None:
    intent, _ = record(agent)
    assert notice_of(intent).state == "delivered"
    assert [m.subject for m in mail.outbox] == ["[operator] Approve: Annual plan renewal"]


def test_quiet_holds_the_request_and_clearing_releases_it(agent, record) -> None:
    directive(agent, "quiet")
    intent, _ = record(agent)
    notice = notice_of(intent)
    assert notice.state == "held" and notice.held_reason.startswith("quiet")
    assert mail.outbox == []
    clear_directives(principal=agent.principal, kind="quiet")
    report = notifications.deliver_due()
    assert report.released == [notice.id] and report.delivered == [notice.id]
    assert len(mail.outbox) == 1


def test_a_lapsed_quiet_releases_the_request(agent, record) -> None:
    directive(agent, "quiet", minutes=5)
    intent, _ = record(agent)
    assert notice_of(intent).state == "held"
    assert notifications.deliver_due().delivered == []  # still quiet
    report = notifications.deliver_due(now=timezone.now() + timedelta(minutes=6))
    assert report.delivered == [notice_of(intent).id]
    assert notice_of(intent).state == "delivered"


def test_a_muted_topic_holds_only_requests_about_it(agent, record) -> None:
    directive(agent, "topic_mute", "billing")
    muted, _ = record(agent, topic="Billing")
    in_title, _ = record(agent, title="Pay the billing backlog", topic=None)
    other, _ = record(agent, title="Book flights", topic="travel")
    assert (notice_of(muted).state, notice_of(in_title).state, notice_of(other).state) == (
        "held",
        "held",
        "delivered",
    )
    clear_directives(principal=agent.principal, everything=True)
    released = notifications.deliver_due().released
    assert sorted(released) == sorted([notice_of(muted).id, notice_of(in_title).id])


CYRILLIC_PAYPAL = "\u0440\u0430\u0443\u0440\u0430\u04cf"  # six Cyrillic letters reading as "paypal"


@pytest.mark.parametrize(
    ("title", "topic"),
    [
        (f"Your {CYRILLIC_PAYPAL} statement", None),  # a whole word in another script
        ("Your \u0440ay\u0440al statement", None),  # two Cyrillic letters in a Latin word (free text)
        ("Your pay\u200bpal statement", None),  # a zero-width space inside
        ("Your pay\u00adpal statement", None),  # a soft hyphen inside
        ("Your PAY\u2060PAL statement", None),  # a word joiner, in capitals
        ("Your \uff50\uff41\uff59\uff50\uff41\uff4c statement", None),  # full-width letters
        ("Your p\u0301ayp\u0301al statement", None),  # accents on its letters
        ("Your p\u0336a\u0336y\u0336p\u0336a\u0336l\u0336 statement", None),  # struck through
        ("Your \u1d7day\u1d7dal statement", None),  # p with stroke, which Unicode does not take apart
        ("Your \u1d18\u1d00\u028f\u1d18\u1d00\u029f statement", None),  # small capitals
        ("Monthly statement", CYRILLIC_PAYPAL),  # the topic itself
    ],
)
def test_a_mute_holds_a_request_that_spells_its_topic_so_it_reads_the_same(
    agent, record, title, topic
) -> None:
    """A notice's title is free text: spelled with look-alike letters or an invisible character
    inside, it still reads as the muted word to the person, and is held (intents.directives._reads)."""
    directive(agent, "topic_mute", "paypal")
    intent, _ = record(agent, title=title, topic=topic)
    assert notice_of(intent).state == "held", title
    # Controls: another word, or the word inside a longer one, is not about it.
    other, _ = record(agent, title="Your paypals statement", topic="payroll")
    assert notice_of(other).state == "delivered"


def test_a_focus_reads_its_topic_the_same_way(agent, record) -> None:
    directive(agent, "focus", "paypal")
    on_topic, _ = record(agent, title=f"Your {CYRILLIC_PAYPAL} statement", topic=None)
    off_topic, _ = record(agent, title="Your pay pal statement", topic=None)
    assert (notice_of(on_topic).state, notice_of(off_topic).state) == ("delivered", "held")


def test_focus_holds_off_topic_requests_and_lets_on_topic_ones_through(agent, record) -> None:
    directive(agent, "focus", "tax return")
    on_topic, _ = record(agent, title="Pay the accountant", topic="tax return")
    off_topic, _ = record(agent, title="Annual plan renewal", topic="software")
    assert notice_of(on_topic).state == "delivered"
    assert notice_of(off_topic).state == "held" and "focus" in notice_of(off_topic).held_reason
    report = notifications.deliver_due(now=timezone.now() + timedelta(minutes=61))
    assert report.released == [notice_of(off_topic).id]


def test_safety_notices_pass_while_the_approval_request_is_held(
    agent, record, django_capture_on_commit_callbacks
) -> None:
    directive(agent, "quiet")
    intent, _ = record(agent)
    with django_capture_on_commit_callbacks(execute=True):
        safety, _ = notifications.notify(
            kind="world_model_change", title="Belief identity/name changed", safety=True
        )
    assert notice_of(intent).state == "held"
    assert Notification.objects.get(pk=safety.pk).state == "delivered"
    assert [m.subject for m in mail.outbox] == ["[operator: safety] Belief identity/name changed"]


def test_a_held_duplicate_is_still_one_notice(agent, record) -> None:
    directive(agent, "quiet")
    first, _ = record(agent)
    again, created = record(agent)
    assert not created and again.id == first.id
    assert Notification.objects.count() == 1
    clear_directives(principal=agent.principal, everything=True)
    notifications.deliver_due()
    assert len(mail.outbox) == 1


def test_a_held_approval_request_is_withdrawn_once_the_question_is_settled(agent, owner) -> None:
    """Quiet holds the request; the intent then expires, is cancelled or is approved: the held notice
    must never be delivered late about something already closed."""
    from datetime import timedelta

    from django.utils import timezone

    from intents.approval import approve_intent
    from intents.models import Intent
    from operator_site.models import Notification
    from operator_site.notifications import deliver_due

    set_directive(principal=owner.principal, kind="quiet", topic=None, minutes=30, reason=None)
    made = []
    for title in ("Renew plan A", "Renew plan B", "Renew plan C"):
        intent, _ = record_intent(
            principal=agent.principal,
            action=ActionInput(type="spend", title=title, amount_cents=100),
        )
        made.append(intent)
    deliver_due()
    assert set(Notification.objects.filter(kind="approval_request").values_list("state", flat=True)) == {
        "held"
    }

    transition_intent(principal=agent.principal, intent_id=made[0].id, to="cancelled")
    fresh = Intent.objects.get(pk=made[1].pk)
    approve_intent(fresh, by=owner.principal.user, seen=fresh.payload_digest, via="admin")
    expire_pending(timezone.now() + timedelta(days=30))
    clear_directives(principal=owner.principal, kind="quiet")
    report = deliver_due()
    assert report.delivered == []
    states = dict(Notification.objects.filter(kind="approval_request").values_list("dedupe_key", "state"))
    assert states == {f"intent:{i.id}": "withdrawn" for i in made}
