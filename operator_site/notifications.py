"""Notices to the person: created with the change they report, delivered after it commits, and —
for safety notices — impossible for anything an agent does to hold, bury, make undeliverable or pin.

Two classes (`safety=`):

- **Safety notices**: every high-stakes world-model or goal-model write, every revert or restore of
  one (`operator_site.lineage.notify_version`), every intent the gate blocks. Never held by a
  directive, never counted against the hourly cap ordinary notices fill, never coalesced into a
  digest, sent at once, and escalated when still undelivered after `OPERATOR_SAFETY_ESCALATE_MINUTES`.
  One backstop: the "blocked" notices of one agent (it can make them without any evidence, one per
  denied intent) past `OPERATOR_BLOCKED_NOTICE_CAP_PER_HOUR` in an hour go out together in that
  agent's own safety digest — per source, so nobody else's notices, and none of the evidence-bound
  ones, ever count against it.
- **Ordinary notices** (approval requests, low-stakes goal-model edits, digests): held while a
  directive says so (the rule intents registers, `register_hold_rule`), at most
  `OPERATOR_NOTIFY_CAP_PER_HOUR` of one kind go out on their own per clock hour (UTC) — a slot is
  taken with one conditional upsert on
  `NotificationBudget` (`take_slot`), so the cap holds across processes — and the rest are coalesced
  into that hour's digest for the kind (due when the hour ends; it lists every notice with its own
  revert link). Never dropped.

Delivery (`deliver_due`, called after commit, by the ticks and by `manage.py operator_deliver`):

- due notices are claimed with a conditional update carrying a fencing token (`claim`); the claim is
  written again (and checked) before a channel once half of it has run out — half a claim outlasts
  every channel's deadline together — and a deliverer that lost it writes nothing more. The claim
  and the read of the notice it claimed are one statement (`sql.update_returning`);
- each channel (email, webhook) is recorded the moment it takes the notice, so a notice taken again
  (a crashed deliverer, a retry) never repeats a channel that already got it;
- every outbound call has ONE total deadline (`operator_site.outbound`): a receiver that trickles
  bytes is abandoned on time, long before the claim could lapse;
- everything bound for a header (the email subject, webhook headers) is fixed words plus agent text
  made one line, control-free and bounded (`operator_site.display.header_text`); bodies show hidden
  characters as visible tokens (`visible_text`) and say so;
- a failure retrying could fix is retried with backoff; one it cannot (a refused header, a message the
  server rejects, a 4xx from the webhook) is recorded as such for that channel (`failed_channels`),
  never retried, logged at ERROR, and — for a safety notice — escalated at once. A notice no channel
  took and every channel refused is `failed`;
- escalation (`escalate_overdue`): a safety notice not delivered `OPERATOR_SAFETY_ESCALATE_MINUTES`
  after it was made (or refused for good) is logged at ERROR, shown in a banner on the admin
  dashboard (`overdue_safety_notices`, whether or not this step ran), and sent as an alert on the
  other configured channel — every channel that did take it.

A revertible notice carries a signed, expiring link (`revert_url`). It opens a confirmation page for
a logged-in person; the revert it performs is done by the handler the subject's app registered
(`register_revert_handler`), and the link works once.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from operator_site.display import visible_text
from operator_site.errors import log_failure, short_reason
from operator_site.models import Notification, NotificationBudget, Principal
from operator_site.notice_channels import (
    channels,
    email_subject,
    is_permanent,
    notice_text,
    post_webhook,
    send_email,
    webhook_payload,
)
from operator_site.revert_links import revert_url
from operator_site.sql import (
    InConstants,
    Update,
    create_row,
    insert_unless_conflict,
    insert_with_commit,
    instances,
    take_budget_slot,
    tuples,
    update_returning,
    update_rows,
)

logger = logging.getLogger("operator.notifications")

# Seconds to wait before the 1st, 2nd, ... retry; the last value repeats.
RETRY_BACKOFF_S = (30, 120, 600, 3600, 6 * 3600)
CLAIM_S = 120  # a claim not renewed for this long (a crashed deliverer) may be taken over
DIGEST_KIND = "notice_digest"  # the hourly digest of the notices of one kind over the cap
DIGEST_MAX_LINES = 200  # notices listed one by one in a digest; the rest are counted
BLOCKED_KIND = "intent_blocked"  # the one safety notice an agent can cause without evidence
State = Notification.State


def claim_seconds() -> float:
    """How long a claim lasts: longer than every channel's deadline together, with room to spare, so
    a live deliverer never loses its claim mid-send (`_Claim.keep` renews it before a channel once
    half of it has run out)."""
    return max(CLAIM_S, 2 * (settings.OPERATOR_EMAIL_DEADLINE_S + settings.OPERATOR_WEBHOOK_TIMEOUT_S) + 30)


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
    source: Principal | None = None,
    acknowledged_by: Principal | None = None,
    with_commit: bool = False,
) -> tuple[Notification, bool]:
    """Record a notice in the current transaction; returns (notice, created).

    `safety=True` makes it a safety notice (see the module docstring); `source` is the principal that
    caused it, where a per-source backstop applies (an agent's blocked intents). With a `dedupe_key`,
    at most one notice exists per key, also under concurrent calls: the second caller gets the first
    one's row and `created=False`.

    `acknowledged_by` (a human principal): the notice reports that person's own action (their undo,
    restore or change), so the action itself acknowledges it — it is still delivered (a stolen
    session or token is how the person would learn of it), but it does not wait in "Needs you".

    `with_commit=True`: the notice is about a row this transaction created (its dedupe key names
    that row, so no notice can hold the key yet) and nothing in the call reads it back. It is
    inserted with the call's last message (`sql.insert_with_commit`: the same transaction, one
    round trip fewer on PostgreSQL; the unique key still decides); returns it (its id unset until
    then) and True.
    """
    if acknowledged_by is not None and not acknowledged_by.is_human:
        raise ValueError("only a person acknowledges a notice")
    values = {
        "kind": kind,
        "title": title[:300],
        "body": body,
        "topic": topic[:100],
        "safety": safety,
        "subject_kind": subject_kind,
        "subject_id": subject_id,
        "source_id": source.pk if source is not None else None,
        "acknowledged_by_id": acknowledged_by.pk if acknowledged_by is not None else None,
        "acknowledged_at": timezone.now() if acknowledged_by is not None else None,
    }
    if with_commit:
        notice = Notification(dedupe_key=dedupe_key, **values)
        insert_with_commit(notice, unless_conflict_on=("dedupe_key",) if dedupe_key is not None else ())
    elif dedupe_key is not None:
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
# Whether a delivery run is queued and has not started. A run reads what is due when it starts, so
# a commit while one waits needs no run of its own: the waiting one will see its notices. Under
# load this turns one run per notice (each reading what is held, what is due, what is overdue)
# into one run per burst; nothing waits longer than it would have.
_kick_lock = threading.Lock()
_kick_queued = False
MAX_RUNS_PER_KICK = 25


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
    global _kicker, _kick_queued
    with _kick_lock:
        if _kick_queued:
            return  # the run that is waiting starts after this commit, and sees its notices
        if _kicker is None:
            _kicker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="operator-notify")
        _kicker.submit(_deliver_in_thread)  # raises (at shutdown) before the flag is set
        _kick_queued = True


def _deliver_in_thread() -> None:
    global _kick_queued
    with _kick_lock:
        # From here on a commit queues a run of its own: this one may have read what is due already.
        _kick_queued = False
    close_old_connections()
    try:
        # A run takes at most `limit` notices; one that took that many may have left some due (a
        # burst bigger than a run, every commit of it served by this one run): run again — a
        # bounded number of times (notices that stay due whatever happens are the ticks' to retry).
        for _ in range(MAX_RUNS_PER_KICK):
            if not deliver_due().more:
                break
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
    undeliverable: list[int] = field(default_factory=list)
    escalated: list[int] = field(default_factory=list)
    more: bool = False  # the run took as many due notices as it may: more may be due

    def as_dict(self) -> dict[str, list[int]]:
        report = {
            "delivered": self.delivered,
            "held": self.held,
            "released": self.released,
            "failed": self.failed,
        }
        # Only when they happened: the common report keeps its shape.
        for name in ("coalesced", "undeliverable", "escalated"):
            if getattr(self, name):
                report[name] = getattr(self, name)
        return report


# The delivery run's statements are compiled once per connection (`operator_site.sql`: the builders
# below are written in the ORM, their values bound on every call): a run for one notice cost ~3.5 ms
# of CPU on PostgreSQL when each was compiled anew, more than the call that made the notice.
def _due(now: Any) -> Q:
    return Q(state=State.PENDING, next_attempt_at__lte=now) | Q(state=State.SENDING, claimed_until__lt=now)


def _due_ids(limit: int, now: Any) -> QuerySet[Notification]:
    """The notices due at `now`, safety notices first."""
    return Notification.objects.filter(_due(now)).order_by("-safety", "id").values_list("id")[:limit]


def _claimable(notice_id: Any, now: Any) -> QuerySet[Notification]:
    """The notice, if it is still due: what a claim takes (a conditional update)."""
    return Notification.objects.filter(Q(id=notice_id) & _due(now))


def deliver_due(now: datetime | None = None, limit: int = 200) -> DeliveryReport:
    """Release what may be released, deliver (or hold) every notice that is due — safety notices
    first — then escalate safety notices that are still undelivered."""
    now = now or timezone.now()
    report = DeliveryReport(released=release_held(now))
    ids = [notice_id for (notice_id,) in tuples(_due_ids, limit, now=now)]
    report.more = len(ids) == limit
    for notice_id in ids:
        try:
            # Called inside a transaction (a test, a script), a savepoint keeps a database error of
            # one notice from spoiling the rest; in autocommit each statement stands on its own.
            with transaction.atomic() if connection.in_atomic_block else nullcontext():
                _deliver_one(notice_id, now, report)
        except Exception as exc:  # one notice's failure is that notice's: the others still go out
            _delivery_crashed(notice_id, exc, now, report)
    report.escalated += escalate_overdue(now)
    return report


def _claim_until(now: datetime) -> datetime:
    """The end of a claim written now: `claim_seconds()` from the later of the run's `now` and the
    clock (a run that has been sending for a while claims for as long as its first notice did)."""
    return max(now, timezone.now()) + timedelta(seconds=claim_seconds())


@dataclass
class _Claim:
    """A deliverer's hold on one notice: its fencing token, and when (monotonic clock, read before
    the statement that wrote it) the claim was last written — it runs `claim_seconds()` from then."""

    notice_id: int
    token: str
    written_at: float

    def keep(self, now: datetime) -> bool:
        """Before a channel: is the claim still ours for longer than any one channel can take?
        Half a claim is (`claim_seconds` is twice every channel's deadline together, and more), so
        the claim is written again — and checked — only once half of it has run out: right after
        the claim, the first channel needs no statement of its own. False: another deliverer took
        the notice (its claim had lapsed) or its state changed; write nothing more."""
        if time.monotonic() - self.written_at < claim_seconds() / 2:
            return True
        started = time.monotonic()
        if not _renew(self.notice_id, self.token, now):
            return False
        self.written_at = started
        return True


def _deliver_one(notice_id: int, now: datetime, report: DeliveryReport) -> None:
    """Claim one due notice (a token, so only this deliverer records what happens to it), then hold,
    coalesce or send it. The claim and the read of the notice it claimed are one statement
    (`sql.update_returning`): what is sent is the notice as the claim found it."""
    token = secrets.token_hex(8)
    started = time.monotonic()
    changes = {"state": State.SENDING, "claimed_until": _claim_until(now), "claim": token}
    claimed = update_returning(_claimable, changes, notice_id=notice_id, now=now)
    if not claimed:
        return  # another deliverer took it
    notice = claimed[0]
    reason = hold_reason(notice, now)
    if reason:
        held = {"state": State.HELD, "held_reason": reason[:200], "claimed_until": None}
        update_rows(Update(Notification, held, {"id": notice_id, "claim": token}))
        report.held.append(notice_id)
        return
    if not _within_cap(notice, now) and _coalesce(notice, now):
        report.coalesced.append(notice_id)
        return
    if notice.kind == DIGEST_KIND:
        notice = _seal_digest(notice)
    _send(notice, _Claim(notice_id, token, started), now, report)


def _delivery_crashed(notice_id: int, exc: Exception, now: datetime, report: DeliveryReport) -> None:
    """Delivering one notice raised (outside its channels, whose failures `_send` records): record it
    on the notice and retry it later with backoff, like a failed channel; never drop it."""
    error_id = log_failure(logger, "delivering notification %s", notice_id)
    try:
        notice = Notification.objects.filter(id=notice_id).first()
        attempts = notice.attempts if notice else 0
        backoff = RETRY_BACKOFF_S[min(attempts, len(RETRY_BACKOFF_S) - 1)]
        Notification.objects.filter(id=notice_id, state=State.SENDING).update(
            state=State.PENDING,
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


def take_slot(kind: str, now: datetime, cap: int | None = None) -> bool:
    """Take one of the `cap` slots of `kind` in the clock hour of `now`; False when none is left.

    One statement, atomic on both databases (PostgreSQL serialises upserts of one row, SQLite
    serialises writers), so concurrent deliverers never send more than the cap between them."""
    cap = settings.OPERATOR_NOTIFY_CAP_PER_HOUR if cap is None else cap
    hour = hour_of(now)
    used = take_budget_slot(kind[:48], hour, cap)
    if used == 1:  # first notice of this kind this hour: forget old hours
        NotificationBudget.objects.filter(kind=kind[:48], hour__lt=hour - 48).delete()
    return used is not None


def _budget_of(notice: Notification) -> tuple[str, int] | None:
    """Which budget a notice's first attempt draws on — (budget key, cap) — or None if it is never
    capped: digests, every safety notice but an agent's blocked intents (a per-source backstop)."""
    if notice.kind == DIGEST_KIND:
        return None
    if notice.safety:
        cap = settings.OPERATOR_BLOCKED_NOTICE_CAP_PER_HOUR
        if notice.kind == BLOCKED_KIND and notice.source_id is not None and cap:
            return f"{BLOCKED_KIND}@{notice.source_id}", cap
        return None
    cap = settings.OPERATOR_NOTIFY_CAP_PER_HOUR
    return (notice.kind, cap) if cap else None


def _within_cap(notice: Notification, now: datetime) -> bool:
    """May this notice go out on its own? Takes a slot on its first attempt; a retry keeps the slot
    its first attempt took."""
    budget = _budget_of(notice)
    if budget is None or notice.attempts or notice.channels:
        return True
    return take_slot(budget[0], now, budget[1])


def digest_key(kind: str, safety: bool, now: datetime, source_id: int | None = None) -> str:
    scope = f"safety@{source_id}" if safety else "ordinary"
    return f"digest:{kind[:48]}:{hour_of(now)}:{scope}"


def _coalesce(notice: Notification, now: datetime) -> bool:
    """Link a notice over the cap to its kind's digest for this hour. Returns False (send it on its
    own after all) only if that digest already went out — a clock-skew edge; never lost either way.

    The digest's row is locked while the notice is linked, and a digest is only linked to while it
    is still pending and untried: the deliverer that claims it (a conditional update on the same
    row) waits for the link to commit, so every linked notice is in the digest it sends."""
    hour = hour_of(now)
    key = digest_key(notice.kind, notice.safety, now, notice.source_id)
    hour_end = datetime.fromtimestamp((hour + 1) * 3600, tz=UTC)
    budget = _budget_of(notice)
    cap = budget[1] if budget else settings.OPERATOR_NOTIFY_CAP_PER_HOUR
    with transaction.atomic():
        digest = Notification.objects.select_for_update().filter(dedupe_key=key).first()
        if digest is None:
            try:
                with transaction.atomic():
                    digest = Notification.objects.create(
                        kind=DIGEST_KIND,
                        title=f"Digest: more {notice.kind} notices than the hourly cap",
                        safety=notice.safety,
                        source_id=notice.source_id,
                        dedupe_key=key,
                        next_attempt_at=hour_end,
                    )
            except IntegrityError:
                digest = Notification.objects.select_for_update().get(dedupe_key=key)
        if digest.state != State.PENDING or digest.attempts or digest.channels:
            return False
        Notification.objects.filter(id=notice.id).update(
            state=State.COALESCED,
            digest=digest,
            claimed_until=None,
            held_reason=f"over the cap of {cap} {notice.kind} notices an hour: in digest #{digest.id}"[:200],
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
    budget = _budget_of(members[0])
    cap = budget[1] if budget else settings.OPERATOR_NOTIFY_CAP_PER_HOUR
    first, last = members[0].created_at, members[-1].created_at
    title = f"{len(members)} more {kind} notices ({first:%Y-%m-%d %H:%M} to {last:%H:%M} UTC), in one digest"
    lines = [
        f"More than {cap} {kind} notices came in one hour, so these "
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


# The rule that holds an ordinary notice (a directive in force) belongs to the intents app, which
# registers it at start-up: the kernel delivers notices without knowing what a directive is. A rule
# is prepared once for a moment (`rule(now)`: it reads what it needs then) and returns a judge of
# notices, `judge(topic, title)` -> why it holds one, or None; a pass over many held notices
# prepares it once.
HoldJudge = Callable[[str, str], "str | None"]
HoldRule = Callable[[datetime], HoldJudge]
_hold_rules: list[HoldRule] = []


def register_hold_rule(rule: HoldRule) -> None:
    """`rule(now)` returns a judge: `judge(topic, title)` answers why an ordinary notice is held."""
    if rule not in _hold_rules:
        _hold_rules.append(rule)


def hold_judges(now: datetime) -> list[HoldJudge]:
    return [rule(now) for rule in _hold_rules]


def hold_reason(notice: Notification, now: datetime, judges: list[HoldJudge] | None = None) -> str | None:
    if notice.safety:
        return None  # nothing an agent can set holds a safety notice
    for judge in hold_judges(now) if judges is None else judges:
        reason = judge(notice.topic, notice.title)
        if reason is not None:
            return reason
    return None


def _held() -> QuerySet[Notification]:
    return Notification.objects.filter(state=State.HELD).order_by("id")


def release_held(now: datetime | None = None) -> list[int]:
    """Held notices that no directive holds any more go back to pending (delivered next)."""
    now = now or timezone.now()
    released = []
    held = instances(_held)
    if not held:
        return released
    try:
        judges = hold_judges(now)  # the directives in force, read once for the pass
    except Exception:  # what holds them cannot be read: they stay held, logged, until the next pass
        log_failure(logger, "reading what holds %d held notifications", len(held))
        return released
    for notice in held:
        try:
            still_held = hold_reason(notice, now, judges) is not None
        except Exception:  # one notice that cannot be judged stays held, logged; the rest are released
            log_failure(logger, "releasing notification %s", notice.id)
            continue
        pending = {"state": State.PENDING, "held_reason": "", "next_attempt_at": now}
        if not still_held and update_rows(
            Update(Notification, pending, {"id": notice.id, "state": State.HELD})
        ):
            released.append(notice.id)
    return released


# --- sending ---------------------------------------------------------------------------------------
def _renew(notice_id: int, token: str, now: datetime) -> bool:
    """Still ours? Then push the claim out again (`_Claim.keep`, before a channel)."""
    where = {"id": notice_id, "claim": token, "state": State.SENDING}
    return bool(update_rows(Update(Notification, {"claimed_until": _claim_until(now)}, where)))


def _send(notice: Notification, claim: _Claim, now: datetime, report: DeliveryReport) -> None:
    done = set(notice.channels or [])
    dead = set(notice.failed_channels or [])
    errors: list[str] = []
    refused: list[str] = []
    for channel, sender in channels():
        if channel in done or channel in dead:
            continue
        if not claim.keep(now):
            logger.warning(
                "notification %s: claim lost before %s; another deliverer has it", notice.id, channel
            )
            return
        try:
            sender(notice)
        except Exception as exc:  # recorded; retried unless retrying cannot help
            text = f"{channel}: {type(exc).__name__}: {visible_text(str(exc), single_line=True)}"[:500]
            if is_permanent(exc):
                dead.add(channel)
                refused.append(text)
                update_rows(Update(Notification, {"failed_channels": sorted(dead)}, {"id": notice.id}))
            else:
                errors.append(text)
            continue
        done.add(channel)
        # Recorded at once, claim or not: the channel has it, and must never get it again.
        update_rows(Update(Notification, {"channels": sorted(done)}, {"id": notice.id}))
    configured = {channel for channel, _sender in channels()}
    mine = {"id": notice.id, "claim": claim.token}  # what happens to it is recorded only while ours
    last_error = "\n".join([*(f"{e} (will not be retried)" for e in refused), *errors]) or ""
    if refused:
        logger.error(
            "notification %s (%s) refused for good: %s",
            notice.id,
            "safety" if notice.safety else "ordinary",
            refused,
        )
    if errors:
        backoff = RETRY_BACKOFF_S[min(notice.attempts, len(RETRY_BACKOFF_S) - 1)]
        retry = {
            "state": State.PENDING,
            "attempts": notice.attempts + 1,
            "last_error": last_error,
            "next_attempt_at": now + timedelta(seconds=backoff),
            "claimed_until": None,
            "channels": sorted(done),
            "failed_channels": sorted(dead),
        }
        update_rows(Update(Notification, retry, mine))
        report.failed.append(notice.id)
        logger.warning(
            "notification %s not delivered (attempt %s): %s", notice.id, notice.attempts + 1, errors
        )
    elif done or not configured:
        # Every channel that can take it has: delivered (a channel that refused it for good is
        # recorded in failed_channels and escalated).
        delivered = {
            "state": State.DELIVERED,
            "attempts": notice.attempts + 1,
            "delivered_at": now,
            "claimed_until": None,
            "last_error": last_error,
            "channels": sorted(done),
            "failed_channels": sorted(dead),
        }
        update_rows(Update(Notification, delivered, mine))
        report.delivered.append(notice.id)
    else:
        failed = {
            "state": State.FAILED,
            "attempts": notice.attempts + 1,
            "claimed_until": None,
            "last_error": last_error,
            "failed_channels": sorted(dead),
        }
        update_rows(Update(Notification, failed, mine))
        report.undeliverable.append(notice.id)
    if refused and notice.safety:
        notice.refresh_from_db()
        if escalate(notice, now, because="refused for good: " + "; ".join(refused)):
            report.escalated.append(notice.id)


# --- escalation ------------------------------------------------------------------------------------------
_UNDELIVERED = (State.PENDING, State.SENDING, State.FAILED)


def overdue_safety_notices(now: datetime | None = None) -> QuerySet[Notification]:
    """Safety notices not delivered `OPERATOR_SAFETY_ESCALATE_MINUTES` after they were made, or
    refused for good by a channel (a digest is counted from its first attempt, not its making)."""
    now = now or timezone.now()
    return _overdue(now - timedelta(minutes=settings.OPERATOR_SAFETY_ESCALATE_MINUTES))


def _overdue(cutoff: Any) -> QuerySet[Notification]:
    late = Q(state__in=_UNDELIVERED, created_at__lte=cutoff) & ~Q(kind=DIGEST_KIND, attempts=0)
    refused = Q(state=State.FAILED) | (Q(escalated_at__isnull=False) & ~Q(state=State.DELIVERED))
    # "Not delivered" is implied by both branches; said on its own, as a constant in the text
    # (`InConstants`: a generic plan cannot prove a partial index's condition from a bound value),
    # so the database reads the partial index of undelivered safety notices
    # (`notification_safety_unsent`), not every notice ever delivered.
    undelivered_safety = Q(safety=True) & ~Q(InConstants(F("state"), [State.DELIVERED]))
    return Notification.objects.filter(undelivered_safety & (late | refused)).order_by("id")


ESCALATE_PER_RUN = 50


def _to_escalate(cutoff: Any) -> QuerySet[Notification]:
    return _overdue(cutoff).filter(escalated_at__isnull=True)[:ESCALATE_PER_RUN]


def escalate_overdue(now: datetime | None = None) -> list[int]:
    """Escalate every overdue safety notice not escalated yet (once each; at most
    `ESCALATE_PER_RUN` a run, the rest the next)."""
    now = now or timezone.now()
    escalated = []
    cutoff = now - timedelta(minutes=settings.OPERATOR_SAFETY_ESCALATE_MINUTES)
    for notice in instances(_to_escalate, cutoff=cutoff):
        minutes = settings.OPERATOR_SAFETY_ESCALATE_MINUTES
        if escalate(notice, now, because=f"not delivered {minutes:g} minutes after it was made"):
            escalated.append(notice.id)
    return escalated


def escalate(notice: Notification, now: datetime, *, because: str) -> bool:
    """ERROR log line, dashboard banner (`overdue_safety_notices`), and an alert on every configured
    channel that did take this notice (the other channel). Once per notice; True if this call did it."""
    if not Notification.objects.filter(id=notice.id, escalated_at__isnull=True).update(escalated_at=now):
        return False
    missing = [c for c, _s in channels() if c not in (notice.channels or [])]
    logger.error(
        "SAFETY NOTICE UNDELIVERED: #%s %r %s (missing: %s; last error: %s)",
        notice.id,
        visible_text(notice.title, single_line=True, limit=200),
        because,
        ", ".join(missing) or "none",
        visible_text(notice.last_error, single_line=True, limit=500),
    )
    outcome = [f"{now:%Y-%m-%d %H:%M:%S} UTC: {because}; dashboard banner and ERROR log."]
    others = [(c, s) for c, s in channels() if c in (notice.channels or [])]
    if not others:
        outcome.append("No other channel took this notice, so no alert could be sent on one.")
    for channel, _sender in others:
        try:
            _send_escalation(channel, notice, because, missing)
            outcome.append(f"Alert sent by {channel}.")
        except Exception as exc:  # best effort: the banner and the log line stand
            outcome.append(f"Alert by {channel} failed: {type(exc).__name__}: {exc}"[:300])
    Notification.objects.filter(id=notice.id).update(escalation="\n".join(outcome))
    return True


def _send_escalation(channel: str, notice: Notification, because: str, missing: list[str]) -> None:
    what = f"could not be delivered by {', '.join(missing)}" if missing else "is not fully delivered"
    intro = (
        f"Safety notice #{notice.id} {what} ({because}). Last error: "
        f"{visible_text(notice.last_error, single_line=True, limit=500) or '—'}. It is shown on the admin "
        "dashboard until it is delivered or acknowledged. The notice:"
    )
    if channel == "email":
        send_email(
            email_subject(notice, prefix="[operator: safety, UNDELIVERED elsewhere] "),
            f"{intro}\n\n{notice_text(notice)}",
        )
    else:
        payload = {"escalation": True, "reason": intro, "notice": webhook_payload(notice)}
        post_webhook(payload, notice_id=notice.id, kind="escalation", safety=True)


def withdraw(*, dedupe_key: str, reason: str) -> bool:
    """A notice that has not gone out yet and no longer applies (the intent it asks about was
    cancelled, expired or decided) is withdrawn instead of delivered. Returns True if one was."""
    return bool(
        Notification.objects.filter(dedupe_key=dedupe_key, state__in=[State.PENDING, State.HELD]).update(
            state=State.WITHDRAWN, held_reason=reason[:200], claimed_until=None
        )
    )
