"""Notices to the person: outbox semantics, email and webhook delivery, retries, directive holding
and release, dedupe, and the one-tap revert link."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core import mail
from django.db import connection, transaction
from django.utils import timezone

from intents.directives import clear_directives, set_directive
from operator_site import notifications, revert_links
from operator_site.models import Notification, Principal
from tests.fixtures import plan_of, wait_until

pytestmark = pytest.mark.django_db


class _Hook(BaseHTTPRequestHandler):
    status = 204
    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append({"headers": dict(self.headers), "body": body})  # type: ignore[attr-defined]
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhook(settings):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    server.received = []  # type: ignore[attr-defined]
    server.status = 204  # type: ignore[attr-defined]
    # shutdown() waits for the loop's next poll: 0.5 s by default, per test.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    settings.OPERATOR_WEBHOOK_URL = f"http://127.0.0.1:{server.server_address[1]}/hook"
    settings.OPERATOR_WEBHOOK_SECRET = "hook-secret"
    yield server
    server.shutdown()


_capture: Any = None


@pytest.fixture(autouse=True)
def _run_on_commit(django_capture_on_commit_callbacks):
    """Tests run inside a transaction that never commits; run the after-commit delivery anyway."""
    global _capture
    _capture = django_capture_on_commit_callbacks
    yield
    _capture = None


def _notify(**kw: Any) -> Notification:
    with _capture(execute=True):
        notice, _ = notifications.notify(**{"kind": "approval_request", "title": "Approve: renew plan", **kw})
    return Notification.objects.get(pk=notice.pk)


def test_a_notice_is_delivered_by_email_after_its_transaction_commits() -> None:
    notice = _notify(body="4900 cents to Acme")
    assert notice.state == "delivered"
    assert notice.channels == ["email"]
    assert len(mail.outbox) == 1
    assert mail.outbox[0].subject == "[operator] Approve: renew plan"
    assert "4900 cents to Acme" in mail.outbox[0].body
    assert mail.outbox[0].to == ["owner@localhost"]


def test_a_rolled_back_change_leaves_no_notice_and_sends_nothing() -> None:
    with _capture(execute=True), pytest.raises(RuntimeError), transaction.atomic():
        notifications.notify(kind="world_model_change", title="x", safety=True)
        raise RuntimeError("the change failed")
    assert Notification.objects.count() == 0
    assert mail.outbox == []


def test_webhook_gets_a_signed_payload(webhook) -> None:
    notice = _notify(topic="billing")
    assert notice.channels == ["email", "webhook"]
    [hit] = webhook.received
    payload = json.loads(hit["body"])
    assert payload["id"] == notice.id and payload["topic"] == "billing"
    expected = "sha256=" + hmac.new(b"hook-secret", hit["body"], hashlib.sha256).hexdigest()
    assert hit["headers"]["X-Operator-Signature"] == expected


def test_a_failed_channel_is_recorded_and_retried_alone_until_delivered(webhook) -> None:
    webhook.status = 500
    notice = _notify()
    assert notice.state == "pending"
    assert notice.attempts == 1
    assert "webhook answered HTTP 500" in notice.last_error
    assert notice.channels == ["email"]  # the email went out and will not be sent again
    assert notice.next_attempt_at > timezone.now()
    assert notifications.deliver_due().delivered == []  # not due yet

    webhook.status = 204
    later = timezone.now() + timedelta(minutes=5)
    assert notifications.deliver_due(now=later).delivered == [notice.id]
    notice.refresh_from_db()
    assert notice.state == "delivered"
    assert notice.attempts == 2
    assert len(mail.outbox) == 1
    assert len(webhook.received) == 2


def test_an_unreachable_webhook_never_loses_the_notice(settings) -> None:
    settings.OPERATOR_WEBHOOK_URL = "http://127.0.0.1:9/nothing-listens-here"
    notice = _notify()
    assert notice.state == "pending"
    assert "webhook" in notice.last_error
    for minutes in (1, 5, 20):
        notifications.deliver_due(now=timezone.now() + timedelta(minutes=minutes))
    notice.refresh_from_db()
    assert notice.state == "pending"
    assert notice.attempts >= 2


def _directive(principal: Principal, kind: str, topic: str | None = None, minutes: int = 60) -> int:
    directive, _ = set_directive(principal=principal, kind=kind, topic=topic, minutes=minutes, reason=None)
    return directive.id


def test_quiet_holds_ordinary_notices_but_never_safety_notices(agent) -> None:
    _directive(agent.principal, "quiet")
    ordinary = _notify()
    safety = _notify(kind="world_model_change", title="Belief identity/name changed", safety=True)
    assert ordinary.state == "held"
    assert ordinary.held_reason.startswith("quiet")
    assert safety.state == "delivered"
    assert [m.subject for m in mail.outbox] == ["[operator: safety] Belief identity/name changed"]

    clear_directives(principal=agent.principal, kind="quiet")
    report = notifications.deliver_due()
    assert report.released == [ordinary.id]
    assert report.delivered == [ordinary.id]
    assert len(mail.outbox) == 2


def test_a_lapsed_directive_releases_what_it_held(agent) -> None:
    _directive(agent.principal, "quiet", minutes=1)
    notice = _notify()
    assert notice.state == "held"
    report = notifications.deliver_due(now=timezone.now() + timedelta(minutes=2))
    assert report.delivered == [notice.id]


def test_topic_mute_holds_only_notices_about_that_topic(agent) -> None:
    _directive(agent.principal, "topic_mute", "newsletters")
    muted = _notify(title="Approve: unsubscribe", topic="Newsletters")
    in_title = _notify(title="Approve: pay for newsletters bundle")
    other = _notify(title="Approve: renew plan", topic="billing")
    partial_word = _notify(title="Approve: newsletterservice invoice")
    assert (muted.state, in_title.state, other.state, partial_word.state) == (
        "held",
        "held",
        "delivered",
        "delivered",
    )


def test_focus_holds_everything_off_topic(agent) -> None:
    _directive(agent.principal, "focus", "tax return")
    on_topic = _notify(title="Approve: send the tax return to the accountant")
    off_topic = _notify(title="Approve: renew plan")
    safety = _notify(kind="goal_model_change", title="Goal paused", safety=True)
    assert (on_topic.state, off_topic.state, safety.state) == ("delivered", "held", "delivered")
    assert "focus" in off_topic.held_reason


def test_one_notice_per_dedupe_key() -> None:
    first = _notify(dedupe_key="intent:41")
    with _capture(execute=True):
        second, created = notifications.notify(kind="approval_request", title="again", dedupe_key="intent:41")
    assert created is False
    assert second.pk == first.pk
    assert Notification.objects.count() == 1
    assert len(mail.outbox) == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_deliverers_send_each_notice_once(settings) -> None:
    settings.OPERATOR_DELIVERY = "off"
    for i in range(40):
        with transaction.atomic():
            notifications.notify(kind="digest", title=f"notice {i}")
    barrier = threading.Barrier(4)
    reports = []

    def deliverer() -> None:
        barrier.wait()
        try:
            reports.append(notifications.deliver_due())
        finally:
            connection.close()

    threads = [threading.Thread(target=deliverer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    delivered = [i for r in reports for i in r.delivered]
    assert len(delivered) == len(set(delivered)) == 40
    assert len(mail.outbox) == 40
    assert Notification.objects.filter(state="delivered").count() == 40


# --- the one-tap revert link -----------------------------------------------------------------------
class _RecordingHandler:
    def __init__(self) -> None:
        self.reverted: list[tuple[int, str]] = []

    def describe(self, subject_id: int) -> dict[str, Any]:
        return {
            "title": f"Version {subject_id}",
            "changes": [{"what": "identity/name", "before": "Ian <b>", "after": "Iain"}],
        }

    def revert(self, subject_id: int, *, by: Principal) -> str:
        self.reverted.append((subject_id, by.name))
        return f"Reverted version {subject_id}."


@pytest.fixture
def handler():
    recording = _RecordingHandler()
    revert_links.register_revert_handler("test_subject", recording)
    yield recording
    revert_links._REVERT_HANDLERS.pop("test_subject", None)


def _revertible() -> Notification:
    return _notify(
        kind="world_model_change",
        title="Belief changed",
        safety=True,
        subject_kind="test_subject",
        subject_id=12,
    )


def _path(notice: Notification) -> str:
    return revert_links.revert_url(notice).removeprefix("http://127.0.0.1:8000")


def test_the_notice_carries_a_signed_revert_link(handler) -> None:
    notice = _revertible()
    [url] = [w for w in mail.outbox[0].body.split() if "/revert/" in w]
    assert url.startswith("http://127.0.0.1:8000/revert/")
    token = url.rstrip("/").rsplit("/", 1)[1]
    assert revert_links.notice_from_token(token) == notice


def test_the_link_needs_a_staff_login_and_get_changes_nothing(client, owner, handler) -> None:
    notice = _revertible()
    anonymous = client.get(_path(notice))
    assert anonymous.status_code == 302
    assert "/admin/login/" in anonymous["Location"]
    client.login(username="owner", password="pw-owner-123")
    page = client.get(_path(notice))
    assert page.status_code == 200
    assert b"Revert this change" in page.content
    assert b"Ian &lt;b&gt;" in page.content  # rendered escaped
    assert handler.reverted == []
    notice.refresh_from_db()
    assert notice.revert_used_at is None


def test_the_link_reverts_once(client, owner, handler) -> None:
    notice = _revertible()
    client.login(username="owner", password="pw-owner-123")
    done = client.post(_path(notice))
    assert done.status_code == 302
    assert handler.reverted == [(12, "owner")]
    notice.refresh_from_db()
    assert notice.revert_used_by_id == owner.principal.id
    assert notice.acknowledged_at is not None
    again = client.post(_path(notice))
    assert again.status_code == 410
    assert b"already been used" in again.content
    assert handler.reverted == [(12, "owner")]


def test_a_staff_login_without_a_human_principal_cannot_revert(client, django_user_model, handler) -> None:
    django_user_model.objects.create_user("helper", password="pw-helper-123", is_staff=True)
    notice = _revertible()
    client.login(username="helper", password="pw-helper-123")
    refused = client.post(_path(notice))
    assert refused.status_code == 403
    assert handler.reverted == []


def test_forged_and_expired_links_are_refused(client, owner, handler, settings) -> None:
    notice = _revertible()
    client.login(username="owner", password="pw-owner-123")
    forged = client.get(_path(notice)[:-8] + "AAAAAAA/")
    assert forged.status_code == 410
    assert b"not valid" in forged.content
    settings.OPERATOR_REVERT_LINK_HOURS = 0
    expired = client.post(_path(notice))
    assert expired.status_code == 410
    assert b"expired" in expired.content
    assert handler.reverted == []


def test_a_notice_that_no_longer_applies_is_withdrawn_not_delivered(agent) -> None:
    _directive(agent.principal, "quiet")
    notice = _notify(dedupe_key="intent:7")
    assert notice.state == "held"
    assert notifications.withdraw(dedupe_key="intent:7", reason="intent 7 was cancelled") is True
    clear_directives(principal=agent.principal, kind="quiet")
    report = notifications.deliver_due()
    assert report.released == [] and report.delivered == []
    notice.refresh_from_db()
    assert notice.state == "withdrawn"
    assert mail.outbox == []
    delivered = _notify(dedupe_key="intent:8")
    assert notifications.withdraw(dedupe_key="intent:8", reason="too late") is False  # already out
    delivered.refresh_from_db()
    assert delivered.state == "delivered"


# --- the background kick: one waiting run serves every commit before it starts -----------------------
@pytest.fixture
def background(settings, monkeypatch):
    """Background delivery, with the kick's state as at start-up (and left as found)."""
    settings.OPERATOR_DELIVERY = "background"
    monkeypatch.setattr(notifications, "_kick_queued", False)
    yield
    _wait_for_the_delivery_thread_to_be_idle()


def _wait_for_the_delivery_thread_to_be_idle() -> None:
    """Until no run is queued and the delivery thread has finished every run it began (one
    worker: a no-op queued now runs after every run), so no run outlives the test and whatever a
    run does after its last commit (its caller's bookkeeping) is done."""
    wait_until(lambda: not notifications._kick_queued, 10, "a queued run to start")
    if isinstance(notifications._kicker, ThreadPoolExecutor):
        notifications._kicker.submit(lambda: None).result(10)


def test_kicks_while_a_run_waits_are_coalesced_and_none_is_lost(background, monkeypatch) -> None:
    runs: list[int] = []
    running, release = threading.Event(), threading.Event()

    def deliver_due() -> notifications.DeliveryReport:
        runs.append(len(runs) + 1)
        if len(runs) == 1:
            running.set()
            release.wait(10)
        return notifications.DeliveryReport()

    monkeypatch.setattr(notifications, "deliver_due", deliver_due)
    notifications.request_delivery()
    assert running.wait(10)
    # The first run has read what is due: a commit now needs a run after it — one, however many
    # commits come while it waits.
    for _ in range(5):
        notifications.request_delivery()
    assert notifications._kick_queued and runs == [1]
    release.set()
    wait_until(lambda: runs == [1, 2] and not notifications._kick_queued, 10, "the second run")
    time.sleep(0.05)
    assert runs == [1, 2]
    # With nothing waiting, the next commit queues a run of its own.
    notifications.request_delivery()
    wait_until(lambda: runs == [1, 2, 3], 10, "a third run")


def test_a_kick_that_cannot_be_queued_leaves_the_next_one_free(background, monkeypatch) -> None:
    class Closed:
        def submit(self, fn: Any) -> None:
            raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    monkeypatch.setattr(notifications, "_kicker", Closed())
    with pytest.raises(RuntimeError):
        notifications.request_delivery()
    assert notifications._kick_queued is False


@pytest.mark.django_db(transaction=True)
def test_every_notice_of_a_burst_is_delivered_in_the_background(background) -> None:
    """End to end on the real delivery thread: a burst of commits, each kicking; every notice goes
    out, whichever run picks it up."""
    for i in range(12):
        with transaction.atomic():
            notifications.notify(kind="approval_request", title=f"burst {i}", dedupe_key=f"burst:{i}")

    def settled() -> bool:
        return not Notification.objects.filter(state__in=["pending", "sending"]).exists()

    wait_until(settled, 10, "every notice of the burst to be delivered")
    assert Notification.objects.filter(state="delivered").count() == 12


@pytest.mark.django_db(transaction=True)
def test_a_burst_bigger_than_one_run_is_all_delivered_by_one_kick(background, settings, monkeypatch) -> None:
    """One kick serves a whole burst: a run that took as many notices as it may runs again."""
    runs: list[int] = []
    real = notifications.deliver_due

    def small_runs() -> Any:
        report = real(limit=5)
        runs.append(len(report.delivered))
        return report

    monkeypatch.setattr(notifications, "deliver_due", small_runs)
    settings.OPERATOR_DELIVERY = "off"  # commit the burst without kicking
    for i in range(12):
        with transaction.atomic():
            notifications.notify(kind="approval_request", title=f"big {i}", dedupe_key=f"big:{i}")
    settings.OPERATOR_DELIVERY = "background"
    notifications.request_delivery()  # one kick
    wait_until(lambda: Notification.objects.filter(state="delivered").count() == 12, 10, "12 delivered")
    # The third run's notices are committed before that run returns and is counted: a check made
    # at once could see [5, 5] (as one PostgreSQL CI run did). Let the thread finish first.
    _wait_for_the_delivery_thread_to_be_idle()
    assert runs == [5, 5, 2]


def test_the_escalation_check_reads_only_undelivered_safety_notices() -> None:
    """Every delivery run (and the dashboard) looks for overdue safety notices. It must read the
    partial index of undelivered safety notices (`notification_safety_unsent`), not every notice
    ever delivered, on every plan: a sequential scan there made each delivery run cost ~3 ms more
    per 10,000 notices of history on PostgreSQL."""
    now = timezone.now()
    old = now - timedelta(hours=2)
    for i in range(30):  # delivered history, safety or not: never a candidate
        Notification.objects.create(
            kind="k", title=f"old {i}", safety=bool(i % 2), state="delivered", created_at=old
        )
    late = Notification.objects.create(kind="k", title="late", safety=True, created_at=old)
    refused = Notification.objects.create(kind="k", title="refused", safety=True, state="failed")
    ordinary = Notification.objects.create(kind="k", title="ordinary", created_at=old)
    overdue = notifications.overdue_safety_notices(now)
    assert set(overdue.values_list("id", flat=True)) == {late.id, refused.id}
    assert ordinary.id not in overdue.values_list("id", flat=True)
    plan = plan_of(overdue.filter(escalated_at__isnull=True)[:50])  # a delivery run's check
    assert "notification_safety_unsent" in plan, plan
    # The dashboard's banner (those not acknowledged): either partial index holds only open ones.
    plan = plan_of(overdue.filter(acknowledged_at__isnull=True))
    assert "notification_safety_unsent" in plan or "notification_safety_open" in plan, plan


def test_a_delivery_run_for_one_notice_asks_a_fixed_number_of_statements(settings) -> None:
    """Held notices, the due ones, the claim WITH the read of what it claimed (one statement), the
    directives that could hold it, its hourly slot, the channel recorded, the outcome, the overdue
    safety notices: eight statements, each compiled once per connection. No renewal of a claim
    just written (`_Claim.keep`)."""
    import re

    from django.test.utils import CaptureQueriesContext

    settings.OPERATOR_DELIVERY = "off"
    _notify(title="first")  # warm: compiles the run's statements on this connection
    notifications.deliver_due()
    notice = _notify(title="second")
    with CaptureQueriesContext(connection) as seen:
        report = notifications.deliver_due()
    assert report.delivered == [notice.id] and len(mail.outbox) == 2
    sql = [q["sql"] for q in seen.captured_queries if not re.match(r"(RELEASE )?SAVEPOINT", q["sql"])]
    assert len(sql) == 8, "\n".join(sql)
    claims = [q for q in sql if q.startswith("UPDATE") and '"claim" =' in q.split("WHERE")[0]]
    assert len(claims) == 1 and " RETURNING " in claims[0], claims  # the claim, and no renewal
    notice.refresh_from_db()
    assert (notice.state, notice.channels, notice.attempts) == ("delivered", ["email"], 1)


def test_a_claim_that_ran_half_out_is_renewed_and_a_lost_one_stops_the_deliverer(
    settings, webhook, monkeypatch
) -> None:
    """Past half its length a claim is written again before the next channel, and checked: a
    deliverer whose claim another one took (it had lapsed) sends nothing more and records no
    outcome; the channel it did reach stays recorded, so the new holder never repeats it."""
    settings.OPERATOR_DELIVERY = "off"
    monkeypatch.setattr(notifications, "claim_seconds", lambda: 0.4)  # renewed after 0.2 s
    real = dict(notifications.channels())
    stolen: list[bool] = []

    def slow_email(notice: Notification) -> None:
        real["email"](notice)
        time.sleep(0.3)
        if stolen:  # meanwhile another deliverer took the notice over
            Notification.objects.filter(id=notice.id).update(
                claim="other", claimed_until=timezone.now() + timedelta(hours=1)
            )

    monkeypatch.setattr(
        notifications, "channels", lambda: [("email", slow_email), ("webhook", real["webhook"])]
    )
    kept = _notify(title="kept")
    before = timezone.now()
    assert notifications.deliver_due().delivered == [kept.id]
    kept.refresh_from_db()
    assert kept.state == "delivered" and kept.channels == ["email", "webhook"] and len(webhook.received) == 1
    stolen.append(True)
    lost = _notify(title="lost")
    report = notifications.deliver_due()
    assert lost.id not in report.delivered
    lost.refresh_from_db()
    assert (lost.state, lost.claim, lost.channels, lost.attempts) == ("sending", "other", ["email"], 0)
    assert len(webhook.received) == 1  # the second channel never reached
    assert lost.claimed_until > before + timedelta(minutes=30)  # the new holder's claim stands


def test_a_release_pass_that_cannot_read_what_holds_notices_keeps_them_held_and_says_so(
    settings, monkeypatch, caplog
) -> None:
    """The directives in force are read once for the pass; if that read fails, no held notice is
    released blindly (a quiet the person set may still be in force), the failure is logged, and the
    next pass tries again."""
    import logging

    settings.OPERATOR_DELIVERY = "off"
    held = [Notification.objects.create(kind="note", title=f"held {n}", state="held") for n in range(3)]

    def unreadable(now: Any) -> Any:
        raise RuntimeError("the directives table is locked")

    monkeypatch.setattr(notifications, "_hold_rules", [unreadable])
    caplog.set_level(logging.ERROR, logger="operator.notifications")
    assert notifications.release_held() == []
    assert set(Notification.objects.filter(pk__in=[n.pk for n in held]).values_list("state", flat=True)) == {
        "held"
    }
    assert "reading what holds 3 held notifications failed" in caplog.text
    monkeypatch.setattr(notifications, "_hold_rules", [lambda now: lambda topic, title: None])
    assert sorted(notifications.release_held()) == sorted(n.pk for n in held)
