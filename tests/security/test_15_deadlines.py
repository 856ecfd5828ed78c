# ruff: noqa: E501  (figures read best on one line)
"""Check 15 — outbound deadlines: every outbound call of the notice deliverer (webhook, SMTP) has ONE
wall-clock deadline for connect, send and read together. Real local servers that drip bytes, hang or
never accept; the deliverer must come back within its deadline (plus a small margin), record the
failure for a retry, and leave no worker behind."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
from django.db import transaction

from operator_site import notifications
from operator_site.models import Notification
from tests.receivers import SMTPDripServer, WebhookReceiver

pytestmark = pytest.mark.django_db(transaction=True)

DEADLINE_S = 1.0
MARGIN_S = 0.75  # thread start-up, the database statements around the call


def _deliver_one(settings: Any) -> tuple[float, Notification]:
    settings.OPERATOR_DELIVERY = "off"
    with transaction.atomic():
        notice, _ = notifications.notify(kind="intent_blocked", title="Blocked: probe", safety=True)
    started = time.monotonic()
    notifications.deliver_due()
    elapsed = time.monotonic() - started
    notice.refresh_from_db()
    return elapsed, notice


def _lingering(within_s: float = 3.0) -> list[str]:
    """The outbound workers still alive after up to `within_s`. A worker ends on its own deadline a
    moment after its caller gave up, so this waits for them to go rather than reading once after a
    fixed sleep, which a busy machine can outlast; one still there after `within_s` is left behind."""
    until = time.monotonic() + within_s
    while True:
        left = [t.name for t in threading.enumerate() if t.name.startswith("operator-outbound")]
        if not left or time.monotonic() > until:
            return left
        time.sleep(0.05)


class _NeverAccepts:
    """A listening socket nobody accepts on: the kernel completes the handshake, nothing answers."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"

    def stop(self) -> None:
        self.sock.close()


def test_webhook_calls_never_outlive_their_deadline(settings, scorecard) -> None:
    settings.OPERATOR_NOTIFY_EMAIL = ""
    settings.OPERATOR_WEBHOOK_TIMEOUT_S = DEADLINE_S
    receivers: dict[str, Any] = {
        "drips its status line, 1 byte / 0.5 s": WebhookReceiver(mode="drip", interval=0.5).start(),
        "drips its status line, 1 byte / 0.1 s": WebhookReceiver(mode="drip", interval=0.1).start(),
        "reads the request, never answers": WebhookReceiver(mode="hang").start(),
        "never accepts the connection": _NeverAccepts(),
    }
    found = {}
    times = {}
    try:
        for name, receiver in receivers.items():
            settings.OPERATOR_WEBHOOK_URL = receiver.url
            elapsed, notice = _deliver_one(settings)
            times[name] = round(elapsed, 2)
            if (
                elapsed > DEADLINE_S + MARGIN_S
                or notice.state != "pending"
                or "total deadline" not in notice.last_error
            ):
                found[name] = [round(elapsed, 2), notice.state, notice.last_error[:200]]
    finally:
        for receiver in receivers.values():
            receiver.stop()
    left = _lingering()
    scorecard(
        15,
        f"webhook: {len(receivers)} misbehaving receivers, deadline {DEADLINE_S:g} s — deliverer back on time, retry recorded",
        cases=len(receivers) + 1,
        bypasses=len(found) + int(bool(left)),
        seconds=times,
    )
    assert found == {} and left == []


def test_smtp_sends_never_outlive_their_deadline(settings, scorecard) -> None:
    settings.OPERATOR_WEBHOOK_URL = ""
    settings.EMAIL_BACKEND = "operator_site.outbound.SMTPBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_TIMEOUT = 30  # Django's per-operation timeout: a trickle never trips it
    settings.OPERATOR_EMAIL_DEADLINE_S = DEADLINE_S
    servers = {
        "drips its greeting, 1 byte / 0.5 s": SMTPDripServer(mode="drip-greeting", interval=0.5).start(),
        "greets, then never answers": SMTPDripServer(mode="hang-after-greeting").start(),
        "drips its answer to the message, 1 byte / 0.2 s": SMTPDripServer(
            mode="drip-data", interval=0.2
        ).start(),
    }
    found = {}
    times = {}
    try:
        for name, server in servers.items():
            settings.EMAIL_PORT = server.port
            elapsed, notice = _deliver_one(settings)
            times[name] = round(elapsed, 2)
            if (
                elapsed > DEADLINE_S + MARGIN_S
                or notice.state != "pending"
                or "total deadline" not in notice.last_error
            ):
                found[name] = [round(elapsed, 2), notice.state, notice.last_error[:200]]
    finally:
        for server in servers.values():
            server.stop()
    left = _lingering()
    scorecard(
        15,
        f"SMTP: {len(servers)} misbehaving servers, deadline {DEADLINE_S:g} s — deliverer back on time, its socket shut",
        cases=len(servers) + 1,
        bypasses=len(found) + int(bool(left)),
        seconds=times,
    )
    assert found == {} and left == []


def test_a_well_behaved_smtp_server_still_gets_the_mail(settings) -> None:
    """The positive control: the same backend and deadline deliver to a server that answers."""
    import smtplib  # noqa: F401  (the stdlib client the backend drives)

    server = SMTPDripServer(mode="drip-data", interval=0.0).start()
    settings.OPERATOR_WEBHOOK_URL = ""
    settings.EMAIL_BACKEND = "operator_site.outbound.SMTPBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
    settings.OPERATOR_EMAIL_DEADLINE_S = 5.0
    try:
        _elapsed, notice = _deliver_one(settings)
    finally:
        server.stop()
    assert notice.state == "delivered", notice.last_error
    assert server.messages == 1
