"""Ticks: what scheduled automation (cron, a systemd timer) and agents run to move the day along.

`run_tick(principal=..., mode=..., day=..., run=...)` runs one tick — morning, start, check-in,
night or status — inside the caller's transaction, each sweep isolated in a savepoint. A tick never
calls the brain or any other remote service. docs/runs-and-ticks.md ("Ticks") describes each mode.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import date, datetime
from typing import Any, TypeVar

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.utils import timezone

from intents.lifecycle import expire_pending
from intents.models import Directive
from operator_site.cross_domain import reads
from operator_site.errors import failed_step, log_failure
from operator_site.models import Principal
from operator_site.notifications import release_held, request_delivery
from operator_site.refusals import Refusal
from runs.answers import day_dict, headline_of, progress_dict, tick_dict
from runs.days import find_day, open_day
from runs.lock import recover_stale_runs, run_status
from runs.models import OperatorDay, Run, Tick
from runs.records import record_progress

logger = logging.getLogger("operator.ticks")
T = TypeVar("T")

TICK_MODES = ("morning", "start", "check-in", "night", "status")
TICK_PRINCIPAL = "operator-tick"
LAPSED_DIRECTIVES_LISTED = 20


def jsonable(value: Any) -> Any:
    """Plain JSON (dates and datetimes as ISO text), for JSON columns without an encoder."""
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def previous_tick(now: datetime) -> Tick | None:
    return Tick.objects.select_related("day", "principal").filter(at__lte=now).order_by("-at", "-id").first()


def _window_start(now: datetime) -> tuple[datetime, Tick | None]:
    """Where "what changed" starts: the previous tick, or else the start of today (local)."""
    prev = previous_tick(now)
    if prev is not None:
        return prev.at, prev
    return reads.day_bounds(timezone.localdate(now))[0], None


def _record_once(day: OperatorDay, mode: str, **fields: Any) -> tuple[Tick, bool]:
    """The day's one morning (or night) tick: insert it, or return the one already there."""
    existing = Tick.objects.select_related("day", "principal").filter(day=day, mode=mode).first()
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            return Tick.objects.create(day=day, mode=mode, **fields), True
    except IntegrityError:
        return Tick.objects.select_related("day", "principal").get(day=day, mode=mode), False


def _require_today(mode: str, day: date, today: date) -> None:
    if day != today:
        raise Refusal(
            "date_not_today",
            f"A {mode} tick acts on today ({today:%Y-%m-%d}); {day:%Y-%m-%d} is another day. "
            "Only night (to close a past day late) and status accept another date.",
            today=today,
        )


# --- the modes -----------------------------------------------------------------------------------------
def isolated_step(name: str, failed: list[dict[str, Any]], fn: Callable[[], T], default: T) -> T:
    """Run one step of a tick in a savepoint: if it raises (anything but a refusal), its writes are
    rolled back, the failure is logged and listed in `failed` (never the exception's text: the log
    has it, under the error id), and the tick goes on with `default`."""
    try:
        with transaction.atomic():
            return fn()
    except Refusal:
        raise
    except Exception as exc:
        failed.append(failed_step(name, exc, log_failure(logger, "tick step %s", name)))
        return default


def _lapsed_directives(since: datetime, now: datetime) -> tuple[list[Directive], int]:
    lapsed = Directive.objects.filter(cleared_at__isnull=True, expires_at__gt=since, expires_at__lte=now)
    rows = list(lapsed.order_by("expires_at", "id")[:LAPSED_DIRECTIVES_LISTED])
    return rows, lapsed.count() if len(rows) == LAPSED_DIRECTIVES_LISTED else len(rows)


def morning(*, principal: Principal, day: date, run: Run | None, now: datetime) -> dict[str, Any]:
    _require_today("morning", day, timezone.localdate(now))
    since, _ = _window_start(now)
    day_row, opened = open_day(principal=principal, day=day, via="morning tick", now=now)
    # Each sweep is a step of its own: one that fails (a poisoned row, a bug) is listed under
    # `failed_steps` and the others still run.
    failed: list[dict[str, Any]] = []
    stale = isolated_step(
        "recover_stale_runs", failed, lambda: recover_stale_runs(principal=principal, now=now), []
    )
    expired = isolated_step("expire_approvals", failed, lambda: expire_pending(now), [])
    lapsed_rows, lapsed_count = isolated_step(
        "list_lapsed_directives", failed, lambda: _lapsed_directives(since, now), ([], 0)
    )
    released = isolated_step("release_held_notices", failed, lambda: release_held(now), [])
    if released:
        transaction.on_commit(request_delivery)  # the delivery thread sends them, not this call
    swept = {
        "day_opened": opened,
        "stale_runs": [r.id for r in stale],
        "approvals_expired": expired,
        "directives_lapsed": {
            "count": lapsed_count,
            "items": [
                {"id": d.id, "kind": d.kind, "topic": d.topic or None, "expired": d.expires_at}
                for d in lapsed_rows
            ],
            "note": "A lapsed directive is out of force the moment it expires (nothing to write); "
            "the notices it held are released.",
        },
        "notifications_released": released,
    }
    headline = (
        f"morning: day {'opened' if opened else 'already open'}; {len(stale)} stale runs marked; "
        f"{len(expired)} approvals expired; {lapsed_count} directives lapsed; "
        f"{len(released)} held notices released"
    )
    if failed:
        headline += f"; {len(failed)} steps failed ({', '.join(f['step'] for f in failed)})"
    tick, first = _record_once(
        day_row,
        Tick.Mode.MORNING,
        principal=principal,
        run=run,
        at=now,
        since=since,
        report={"headline": headline, **swept, "failed_steps": list(failed)},
    )
    packet = isolated_step("packet", failed, lambda: reads.context_packet(day=day, now=now), None)
    return {
        "ok": True,
        "mode": "morning",
        "date": day,
        "first_morning_tick": first,
        "note": None
        if first
        else f"The morning tick already ran today (tick {tick.id}); the sweeps ran "
        "again (each is idempotent) and nothing else was recorded.",
        "tick": tick_dict(tick),
        "headline": headline,
        "swept": swept,
        "failed_steps": failed,
        "packet": packet,
    }


def check_in(*, principal: Principal, mode: str, day: date, run: Run | None, now: datetime) -> dict[str, Any]:
    _require_today(mode, day, timezone.localdate(now))
    since, prev = _window_start(now)
    changes = reads.changes_between(since, now)
    headline = f"{mode} tick: " + reads.headline(changes)
    entry = record_progress(
        principal=principal,
        summary=headline,
        outcome="done",
        run_id=run.id if run else None,
        tick=mode,
        now=now,
    )
    tick = Tick.objects.create(
        day=entry.day,
        mode=mode,
        principal=principal,
        run=run,
        progress=entry,
        at=now,
        since=since,
        report={"headline": headline, "changes": changes},
    )
    return {
        "ok": True,
        "mode": mode,
        "date": day,
        "tick": tick_dict(tick),
        "previous_tick": tick_dict(prev) if prev else None,
        "since": since,
        "headline": headline,
        "changes": changes,
        "progress": progress_dict(entry),
    }


def night_headline(figures: dict[str, Any]) -> str:
    tasks, intents, decisions = figures["tasks"], figures["intents"], figures["decisions"]
    runs = figures["runs"]
    run_parts = ", ".join(f"{n} {s}" for s, n in sorted(runs.items())) or "none"
    return "; ".join(
        [
            f"{tasks['done']} tasks done ({tasks['moved']} moved)",
            f"{intents['created']} intents created, {intents['approved']} approved, "
            f"{intents['blocked']} blocked, {intents['still_pending']} still pending",
            f"{decisions['opened']} decisions opened, "
            f"{decisions['approved'] + decisions['rejected']} decided",
            f"{figures['logged_decisions']} logged decisions",
            f"{sum(runs.values())} runs ({run_parts})",
            f"{sum(figures['progress'].values())} progress entries",
            f"{figures['observations']['recorded']} observations",
        ]
    )


def night(*, principal: Principal, day: date, run: Run | None, now: datetime) -> dict[str, Any]:
    day_row = find_day(day)
    if day_row is None:
        day_row, _ = open_day(principal=principal, day=day, via="night tick", now=now)
    if day_row.state == OperatorDay.State.CLOSED:
        return _already_closed(day_row)
    figures = reads.day_figures(day, day_row)
    headline = night_headline(figures)
    summary = jsonable({"headline": headline, **figures, "closed_by": principal.name, "closed_at": now})
    closed = OperatorDay.objects.filter(id=day_row.id, state=OperatorDay.State.OPEN).update(
        state=OperatorDay.State.CLOSED, closed_at=now, closed_by=principal, summary=summary
    )
    if not closed:  # another night tick closed it a moment ago
        day_row.refresh_from_db()
        return _already_closed(day_row)
    day_row.refresh_from_db()
    tick, _ = _record_once(
        day_row,
        Tick.Mode.NIGHT,
        principal=principal,
        run=run,
        at=now,
        since=reads.day_bounds(day)[0],
        report={"headline": headline},
    )
    return {
        "ok": True,
        "mode": "night",
        "date": day,
        "closed": True,
        "already_closed": False,
        "day": day_dict(day_row),
        "tick": tick_dict(tick),
        "headline": headline,
        "summary": summary,
    }


def _already_closed(day_row: OperatorDay) -> dict[str, Any]:
    return {
        "ok": True,
        "mode": "night",
        "date": day_row.date,
        "closed": False,
        "already_closed": True,
        "note": f"The day {day_row.date:%Y-%m-%d} was already closed at "
        f"{day_row.closed_at:%Y-%m-%d %H:%M} UTC; its summary is unchanged and nothing was written.",
        "day": day_dict(day_row),
        "headline": headline_of(day_row.summary),
        "summary": day_row.summary,
    }


def status(*, day: date, now: datetime) -> dict[str, Any]:
    """The same figures as the other ticks, computed live. Writes nothing."""
    today = timezone.localdate(now)
    day_row = find_day(day)
    since, prev = _window_start(now)
    changes = reads.changes_between(since, now) if day == today else None
    figures = reads.day_figures(day, day_row)
    return {
        "ok": True,
        "mode": "status",
        "date": day,
        "wrote": False,
        "day": day_dict(day_row) if day_row else {"date": day, "state": "not_opened"},
        "previous_tick": tick_dict(prev) if prev else None,
        "since": since if changes else None,
        "changes_since_previous_tick": changes,
        "headline": reads.headline(changes) if changes else None,
        "figures": figures | {"headline": night_headline(figures)},
        "night_summary": (day_row.summary or None) if day_row else None,
        "runs": run_status(now),
    }


def run_tick(
    *,
    principal: Principal | None,
    mode: str,
    day: date | None = None,
    run: Run | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Run one tick in the caller's transaction (see the module docstring). `principal` may be None
    only for `status`, which writes nothing."""
    if mode not in TICK_MODES:
        raise Refusal("invalid_mode", f"mode must be one of {', '.join(TICK_MODES)}.")
    now = now or timezone.now()
    day = reads.check_date(day, now)
    if mode == "status":
        return status(day=day, now=now)
    if principal is None:
        raise Refusal("principal_required", f"A {mode} tick writes; it needs an acting principal.")
    if mode == "morning":
        return morning(principal=principal, day=day, run=run, now=now)
    if mode == "night":
        return night(principal=principal, day=day, run=run, now=now)
    return check_in(principal=principal, mode=mode, day=day, run=run, now=now)
