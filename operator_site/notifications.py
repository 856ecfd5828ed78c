"""Notices to the person: created with the change they report, delivered after it commits, held
by directives when they may be, retried until delivered, and — for safety notices — one tap from
undoing the change.

- `notify()` writes the row inside the caller's transaction (an outbox: if the change rolls back,
  so does its notice) and asks for delivery once the transaction commits.
- `deliver_due()` claims due notices with a conditional update (so two workers never send the same
  one), decides for each whether a directive holds it, sends it by email and/or webhook, and on
  failure records the error and schedules a retry with backoff. Each channel is sent once: a retry
  only tries the channels that have not taken the notice yet. It also releases held notices whose
  directive has lapsed or been cleared. The ticks and `manage.py operator_deliver` call it, so
  nothing depends on the in-process kick after commit.
- Safety notices (`safety=True`) are never held. Others are held while `quiet` is in force, while
  their topic is muted, or while a `focus` is in force on another topic (the rule lives with the
  directives: `intents.services.hold_reason`).
- A revertible notice carries a signed, expiring link (`revert_url`). It opens a confirmation page
  for a logged-in person; the revert it performs is done by the handler the subject's app
  registered (`register_revert_handler`), and the link works once.
- Flood cap: at most `OPERATOR_NOTIFY_CAP_PER_HOUR` notices of one kind go out on their own per
  clock hour (UTC). A deliverer takes a slot with one conditional upsert on `NotificationBudget`
  (`take_slot`), so the cap holds across processes. A notice that finds no slot is not sent and
  not dropped: it is marked `coalesced` and linked to that hour's digest for its kind (one row,
  kind `notice_digest`, due when the hour ends), which lists every coalesced notice — title, time
  and, for a revertible one, its own one-tap revert link (the link of a coalesced notice works like
  any other). Safety notices are capped too — an uncapped safety channel would let an agent bomb
  the person's inbox with low-stakes goal-model edits, each of which sends one — but the first ones
  of the hour go out at once, so the person is alerted immediately, and their digest is itself a
  safety notice (never held by a directive). Digests are not capped (at most two per kind and hour).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import httpx2
from django.conf import settings
from django.core import signing
from django.core.mail import send_mail
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from operator_site.compiled_sql import create_row, insert_unless_conflict
from operator_site.errors import log_failure, short_reason
from operator_site.models import Notification, NotificationBudget, Principal

logger = logging.getLogger("operator.notifications")

# Seconds to wait before the 1st, 2nd, ... retry; the last value repeats.
RETRY_BACKOFF_S = (30, 120, 600, 3600, 6 * 3600)
CLAIM_S = 120  # a claim older than this (a crashed deliverer) may be taken over
DIGEST_KIND = "notice_digest"  # the hourly digest of the notices of one kind over the cap
DIGEST_MAX_LINES = 200  # notices listed one by one in a digest; the rest are counted
_REVERT_SALT = "operator.revert-link"


# --- creating ------------------------------------------------------------------------------------
def notify(
    *,
    kind: str,
    title: str,
    body: str = "",
    topic: str = "",
    safety: bool = False,
    subject_kind: str = "",
    subject_id: int | None = None,
    dedupe_key: str | None = None,
) -> tuple[Notification, bool]:
    """Record a notice in the current transaction; returns (notice, created).

    With a `dedupe_key`, at most one notice exists per key, also under concurrent calls: the
    second caller gets the first one's row and `created=False`.
    """
    values = {
        "kind": kind,
        "title": title[:300],
        "body": body,
        "topic": topic[:100],
        "safety": safety,
        "subject_kind": subject_kind,
        "subject_id": subject_id,
    }
    if dedupe_key is not None:
        # No look-up first: the unique key decides (a new notice, the common case, costs one
        # statement; a repeated one reads the existing row after the insert that did nothing).
        notice = Notification(dedupe_key=dedupe_key, **values)
        if not insert_unless_conflict(notice, "dedupe_key"):
            return Notification.objects.get(dedupe_key=dedupe_key), False
    else:
        notice = create_row(Notification, **values)
    transaction.on_commit(request_delivery)
    return notice, True


# --- delivering ----------------------------------------------------------------------------------
_kicker: ThreadPoolExecutor | None = None


def request_delivery() -> None:
    """After a commit that created a notice: deliver soon, without holding up the caller.

    `OPERATOR_DELIVERY` = background (a delivery thread), sync (right here; for tests and
    scripts), or off (only ticks and `operator_deliver` deliver).
    """
    mode = settings.OPERATOR_DELIVERY
    if mode == "off":
        return
    if mode == "sync":
        deliver_due()
        return
    global _kicker
    if _kicker is None:
        _kicker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="operator-notify")
    _kicker.submit(_deliver_in_thread)


def _deliver_in_thread() -> None:
    close_old_connections()
    try:
        deliver_due()
    except Exception:  # the thread must not die; the next tick retries whatever is left
        logger.exception("background delivery failed")
    finally:
        close_old_connections()


@dataclass
class DeliveryReport:
    delivered: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)
    released: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    coalesced: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[int]]:
        report = {
            "delivered": self.delivered,
            "held": self.held,
            "released": self.released,
            "failed": self.failed,
        }
        if self.coalesced:  # only when the cap was reached: the common report keeps its shape
            report["coalesced"] = self.coalesced
        return report


def deliver_due(now: datetime | None = None, limit: int = 200) -> DeliveryReport:
    """Release what may be released, then deliver (or hold) every notice that is due."""
    now = now or timezone.now()
    report = DeliveryReport(released=release_held(now))
    due = Q(state=Notification.State.PENDING, next_attempt_at__lte=now) | Q(
        state=Notification.State.SENDING, claimed_until__lt=now
    )
    for notice_id in Notification.objects.filter(due).order_by("id").values_list("id", flat=True)[:limit]:
        try:
            # Called inside a transaction (a test, a script), a savepoint keeps a database error of
            # one notice from spoiling the rest; in autocommit each statement stands on its own.
            with transaction.atomic() if connection.in_atomic_block else nullcontext():
                _deliver_one(notice_id, due, now, report)
        except Exception as exc:  # one notice's failure is that notice's: the others still go out
            _delivery_crashed(notice_id, exc, now, report)
    return report


def _deliver_one(notice_id: int, due: Q, now: datetime, report: DeliveryReport) -> None:
    claimed = Notification.objects.filter(Q(id=notice_id) & due).update(
        state=Notification.State.SENDING, claimed_until=now + timedelta(seconds=CLAIM_S)
    )
    if not claimed:
        return  # another deliverer took it
    notice = Notification.objects.get(id=notice_id)
    reason = hold_reason(notice, now)
    if reason:
        Notification.objects.filter(id=notice_id).update(
            state=Notification.State.HELD, held_reason=reason[:200], claimed_until=None
        )
        report.held.append(notice_id)
        return
    if not _within_cap(notice, now) and _coalesce(notice, now):
        report.coalesced.append(notice_id)
        return
    if notice.kind == DIGEST_KIND:
        notice = _seal_digest(notice)
    _send(notice, now, report)


def _delivery_crashed(notice_id: int, exc: Exception, now: datetime, report: DeliveryReport) -> None:
    """Delivering one notice raised (outside its channels, whose failures `_send` records): record it
    on the notice and retry it later with backoff, like a failed channel; never drop it."""
    error_id = log_failure(logger, "delivering notification %s", notice_id)
    try:
        notice = Notification.objects.filter(id=notice_id).first()
        attempts = notice.attempts if notice else 0
        backoff = RETRY_BACKOFF_S[min(attempts, len(RETRY_BACKOFF_S) - 1)]
        Notification.objects.filter(id=notice_id, state=Notification.State.SENDING).update(
            state=Notification.State.PENDING,
            attempts=attempts + 1,
            last_error=f"delivery failed: {short_reason(exc, error_id)}"[:500],
            next_attempt_at=now + timedelta(seconds=backoff),
            claimed_until=None,
        )
    except Exception:
        logger.exception("could not record the failed delivery of notification %s", notice_id)
    report.failed.append(notice_id)


# --- the flood cap ---------------------------------------------------------------------------------
def hour_of(now: datetime) -> int:
    return int(now.timestamp()) // 3600


_BUDGET = NotificationBudget._meta.db_table
_TAKE_SLOT = (
    f"INSERT INTO {_BUDGET} (kind, hour, used) VALUES (%s, %s, 1) "  # noqa: S608
    f"ON CONFLICT (kind, hour) DO UPDATE SET used = {_BUDGET}.used + 1 WHERE {_BUDGET}.used < %s "
    f"RETURNING used"
)


def take_slot(kind: str, now: datetime, cap: int | None = None) -> bool:
    """Take one of the `cap` slots of `kind` in the clock hour of `now`; False when none is left.

    One statement, atomic on both databases (PostgreSQL serialises upserts of one row, SQLite
    serialises writers), so concurrent deliverers never send more than the cap between them."""
    cap = settings.OPERATOR_NOTIFY_CAP_PER_HOUR if cap is None else cap
    hour = hour_of(now)
    with connection.cursor() as cursor:
        cursor.execute(_TAKE_SLOT, [kind[:48], hour, cap])
        row = cursor.fetchone()
    if row is not None and row[0] == 1:  # first notice of this kind this hour: forget old hours
        NotificationBudget.objects.filter(kind=kind[:48], hour__lt=hour - 48).delete()
    return row is not None


def _within_cap(notice: Notification, now: datetime) -> bool:
    """May this notice go out on its own? Takes a slot on its first attempt; a retry keeps the slot
    its first attempt took; digests are never capped."""
    if not settings.OPERATOR_NOTIFY_CAP_PER_HOUR or notice.kind == DIGEST_KIND:
        return True
    if notice.attempts or notice.channels:
        return True
    return take_slot(notice.kind, now)


def digest_key(kind: str, safety: bool, now: datetime) -> str:
    return f"digest:{kind[:48]}:{hour_of(now)}:{'safety' if safety else 'ordinary'}"


def _coalesce(notice: Notification, now: datetime) -> bool:
    """Link a notice over the cap to its kind's digest for this hour. Returns False (send it on its
    own after all) only if that digest already went out — a clock-skew edge; never lost either way.

    The digest's row is locked while the notice is linked, and a digest is only linked to while it
    is still pending and untried: the deliverer that claims it (a conditional update on the same
    row) waits for the link to commit, so every linked notice is in the digest it sends."""
    hour = hour_of(now)
    key = digest_key(notice.kind, notice.safety, now)
    hour_end = datetime.fromtimestamp((hour + 1) * 3600, tz=UTC)
    with transaction.atomic():
        digest = Notification.objects.select_for_update().filter(dedupe_key=key).first()
        if digest is None:
            try:
                with transaction.atomic():
                    digest = Notification.objects.create(
                        kind=DIGEST_KIND,
                        title=f"Digest: more {notice.kind} notices than the hourly cap",
                        safety=notice.safety,
                        dedupe_key=key,
                        next_attempt_at=hour_end,
                    )
            except IntegrityError:
                digest = Notification.objects.select_for_update().get(dedupe_key=key)
        if digest.state != Notification.State.PENDING or digest.attempts or digest.channels:
            return False
        Notification.objects.filter(id=notice.id).update(
            state=Notification.State.COALESCED,
            digest=digest,
            claimed_until=None,
            held_reason=f"over the cap of {settings.OPERATOR_NOTIFY_CAP_PER_HOUR} {notice.kind} "
            f"notices an hour: in digest #{digest.id}"[:200],
        )
    return True


def _seal_digest(digest: Notification) -> Notification:
    """Before a digest's first attempt: write its title and body from the notices it carries."""
    if digest.attempts or digest.channels:
        return digest  # already (partly) sent with this text: retries send the same words
    members = list(Notification.objects.filter(digest=digest).order_by("id"))
    if not members:
        return digest
    kind = members[0].kind
    first, last = members[0].created_at, members[-1].created_at
    title = f"{len(members)} more {kind} notices ({first:%Y-%m-%d %H:%M} to {last:%H:%M} UTC), in one digest"
    lines = [
        f"More than {settings.OPERATOR_NOTIFY_CAP_PER_HOUR} {kind} notices came in one hour, so these "
        f"{len(members)} were kept back and are listed here instead of being sent one by one.",
        "",
    ]
    for member in members[:DIGEST_MAX_LINES]:
        lines.append(f"- #{member.id} {member.created_at:%H:%M:%S} {member.title}")
        url = revert_url(member)
        if url:
            lines.append(f"  Undo this change (one tap, asks you to confirm): {url}")
    if len(members) > DIGEST_MAX_LINES:
        lines += [
            "",
            f"… and {len(members) - DIGEST_MAX_LINES} more: see Notifications in the admin "
            f"(state 'coalesced', digest #{digest.id}).",
        ]
    Notification.objects.filter(id=digest.id).update(title=title[:300], body="\n".join(lines))
    digest.title, digest.body = title[:300], "\n".join(lines)
    return digest


def hold_reason(notice: Notification, now: datetime) -> str | None:
    if notice.safety:
        return None
    from intents.services import hold_reason as directive_hold_reason  # directives own the rule

    return directive_hold_reason(topic=notice.topic, title=notice.title, now=now)


def release_held(now: datetime | None = None) -> list[int]:
    """Held notices that no directive holds any more go back to pending (delivered next)."""
    now = now or timezone.now()
    released = []
    for notice in Notification.objects.filter(state=Notification.State.HELD).order_by("id"):
        try:
            still_held = hold_reason(notice, now) is not None
        except Exception:  # one notice that cannot be judged stays held, logged; the rest are released
            log_failure(logger, "releasing notification %s", notice.id)
            continue
        if not still_held and Notification.objects.filter(id=notice.id, state=Notification.State.HELD).update(
            state=Notification.State.PENDING, held_reason="", next_attempt_at=now
        ):
            released.append(notice.id)
    return released


def _send(notice: Notification, now: datetime, report: DeliveryReport) -> None:
    done = set(notice.channels or [])
    errors = []
    for channel, sender in _channels():
        if channel in done:
            continue
        try:
            sender(notice)
            done.add(channel)
        except Exception as exc:  # any failure of a channel is recorded and retried
            errors.append(f"{channel}: {type(exc).__name__}: {exc}"[:500])
    if errors:
        backoff = RETRY_BACKOFF_S[min(notice.attempts, len(RETRY_BACKOFF_S) - 1)]
        Notification.objects.filter(id=notice.id).update(
            state=Notification.State.PENDING,
            attempts=notice.attempts + 1,
            last_error="\n".join(errors),
            next_attempt_at=now + timedelta(seconds=backoff),
            claimed_until=None,
            channels=sorted(done),
        )
        report.failed.append(notice.id)
        logger.warning(
            "notification %s not delivered (attempt %s): %s", notice.id, notice.attempts + 1, errors
        )
        return
    Notification.objects.filter(id=notice.id).update(
        state=Notification.State.DELIVERED,
        attempts=notice.attempts + 1,
        delivered_at=now,
        claimed_until=None,
        last_error="",
        channels=sorted(done),
    )
    report.delivered.append(notice.id)


def _channels() -> list[tuple[str, Callable[[Notification], None]]]:
    channels: list[tuple[str, Callable[[Notification], None]]] = []
    if settings.OPERATOR_NOTIFY_EMAIL:
        channels.append(("email", _send_email))
    if settings.OPERATOR_WEBHOOK_URL:
        channels.append(("webhook", _send_webhook))
    return channels


def notice_text(notice: Notification) -> str:
    lines = [notice.title, "", notice.body] if notice.body else [notice.title]
    url = revert_url(notice)
    if url:
        lines += ["", f"Undo this change (one tap, asks you to confirm): {url}"]
    return "\n".join(lines).strip() + "\n"


def _send_email(notice: Notification) -> None:
    prefix = "[operator: safety] " if notice.safety else "[operator] "
    send_mail(
        prefix + notice.title,
        notice_text(notice),
        settings.DEFAULT_FROM_EMAIL,
        [settings.OPERATOR_NOTIFY_EMAIL],
        fail_silently=False,
    )


def webhook_payload(notice: Notification) -> dict[str, Any]:
    return {
        "id": notice.id,
        "kind": notice.kind,
        "title": notice.title,
        "body": notice.body,
        "topic": notice.topic or None,
        "safety": notice.safety,
        "subject": {"kind": notice.subject_kind, "id": notice.subject_id} if notice.subject_kind else None,
        "revert_url": revert_url(notice),
        "created": notice.created_at.isoformat(),
    }


def webhook_signature(body: bytes) -> str:
    return "sha256=" + hmac.new(settings.OPERATOR_WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()


def _send_webhook(notice: Notification) -> None:
    body = json.dumps(webhook_payload(notice)).encode()
    headers = {"Content-Type": "application/json", "X-Operator-Notification": str(notice.id)}
    if settings.OPERATOR_WEBHOOK_SECRET:
        headers["X-Operator-Signature"] = webhook_signature(body)
    response = httpx2.post(
        settings.OPERATOR_WEBHOOK_URL,
        content=body,
        headers=headers,
        timeout=settings.OPERATOR_WEBHOOK_TIMEOUT_S,
    )
    if response.status_code >= 300:
        raise RuntimeError(f"webhook answered HTTP {response.status_code}")


def withdraw(*, dedupe_key: str, reason: str) -> bool:
    """A notice that has not gone out yet and no longer applies (the intent it asks about was
    cancelled, expired or decided) is withdrawn instead of delivered. Returns True if one was."""
    return bool(
        Notification.objects.filter(
            dedupe_key=dedupe_key, state__in=[Notification.State.PENDING, Notification.State.HELD]
        ).update(state=Notification.State.WITHDRAWN, held_reason=reason[:200], claimed_until=None)
    )


# --- acknowledging -------------------------------------------------------------------------------
def acknowledge(notice: Notification, *, by: Principal) -> bool:
    """The person has seen it. Returns False if it was already acknowledged."""
    return bool(
        Notification.objects.filter(id=notice.id, acknowledged_at__isnull=True).update(
            acknowledged_at=timezone.now(), acknowledged_by=by
        )
    )


def unacknowledged_safety_notices() -> Any:
    return Notification.objects.filter(safety=True, acknowledged_at__isnull=True).order_by("-id")


# --- the one-tap revert link ---------------------------------------------------------------------
class RevertHandler(Protocol):
    """What an app registers to make its notices revertible (see `register_revert_handler`)."""

    def describe(self, subject_id: int) -> dict[str, Any]:
        """For the confirmation page: {"title": str, "changes": [{"what", "before", "after"}], ...}."""

    def revert(self, subject_id: int, *, by: Principal) -> str:
        """Undo the change (in the caller's transaction) and say what was done; raise Refusal to refuse."""


_REVERT_HANDLERS: dict[str, RevertHandler] = {}


def register_revert_handler(subject_kind: str, handler: RevertHandler) -> None:
    _REVERT_HANDLERS[subject_kind] = handler


def revert_handler(subject_kind: str) -> RevertHandler | None:
    return _REVERT_HANDLERS.get(subject_kind)


class RevertLinkError(Exception):
    """The link cannot be used: forged, expired, already used, or nothing to revert."""


def revert_token(notice: Notification) -> str:
    return signing.dumps({"n": notice.id}, salt=_REVERT_SALT, compress=True)


def revert_url(notice: Notification) -> str | None:
    if not notice.subject_kind or notice.subject_id is None or notice.pk is None:
        return None
    path = reverse("revert-link", kwargs={"token": revert_token(notice)})
    return f"{settings.OPERATOR_PUBLIC_URL}{path}"


def notice_from_token(token: str) -> Notification:
    try:
        data = signing.loads(
            token, salt=_REVERT_SALT, max_age=timedelta(hours=settings.OPERATOR_REVERT_LINK_HOURS)
        )
    except signing.SignatureExpired as exc:
        raise RevertLinkError("This link has expired; revert from the admin instead.") from exc
    except signing.BadSignature as exc:
        raise RevertLinkError("This link is not valid.") from exc
    notice = Notification.objects.filter(id=data.get("n")).first()
    if notice is None or not notice.subject_kind or notice.subject_id is None:
        raise RevertLinkError("There is nothing to revert behind this link.")
    if notice.revert_used_at is not None:
        raise RevertLinkError("This link has already been used.")
    if revert_handler(notice.subject_kind) is None:
        raise RevertLinkError(f"Changes of kind {notice.subject_kind!r} cannot be reverted from a link.")
    return notice


@transaction.atomic
def revert_from_link(notice: Notification, *, by: Principal) -> str:
    """Perform the revert behind a notice's link, once. Raises RevertLinkError if it was used."""
    if not Notification.objects.filter(id=notice.id, revert_used_at__isnull=True).update(
        revert_used_at=timezone.now(), revert_used_by=by
    ):
        raise RevertLinkError("This link has already been used.")
    handler = revert_handler(notice.subject_kind)
    if handler is None:
        raise RevertLinkError(f"Changes of kind {notice.subject_kind!r} cannot be reverted from a link.")
    message = handler.revert(notice.subject_id, by=by)
    if not notice.acknowledged_at:
        acknowledge(notice, by=by)
    return message
