"""What the runs app's tools answer: each answer's declared shape, and the function that builds it.

tests/test_answer_shapes.py calls the real tools and checks every answer has exactly these keys.
A run never shows its fencing token or the token's digest.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, Literal, TypedDict, cast

from django.db.models import QuerySet
from django.utils import timezone

from runs.models import Observation, OperatorDay, ProgressEntry, Run, Tick


class DayAnswer(TypedDict):
    date: date
    state: str
    opened: datetime
    opened_via: str | None
    closed: datetime | None


class _RunAnswer(TypedDict):
    id: int
    kind: str
    status: str
    holder: str
    started: datetime
    last_heartbeat: datetime
    heartbeats: int
    stale_after_s: int
    note: str | None
    progress: str | None
    day: date | None


class RunningRunAnswer(_RunAnswer):
    """A run holding the lock: when it becomes stale, and whether it is overdue already."""

    stale_at: datetime
    overdue: bool


class EndedRunAnswer(_RunAnswer):
    """A run that left `running`: when, by whom, why, and which run took over from it."""

    ended: datetime | None
    ended_by: str | None
    end_reason: str | None
    summary: str | None
    taken_over_by: int | None


RunAnswer = RunningRunAnswer | EndedRunAnswer


class RunStatusAnswer(TypedDict):
    running: RunningRunAnswer | None
    last_finished: EndedRunAnswer | None


class ProgressAnswer(TypedDict):
    id: int
    day: date
    summary: str
    outcome: str
    tried: list[str]
    failed: list[str]
    run_id: int | None
    tick: str | None
    recorded_by: str
    created: datetime


class ObservationAnswer(TypedDict):
    """An observation as every read returns it: marked tainted, its text as data, never merged."""

    tainted: Literal[True]
    id: int
    kind: str
    summary: str
    source: str | None
    data: Any
    recorded_by: str
    day: date
    created: datetime


class TickAnswer(TypedDict):
    id: int
    mode: str
    date: date
    at: datetime
    since: datetime | None
    by: str
    run_id: int | None
    progress_id: int | None
    headline: str | None


class FencedObservations(TypedDict):
    """Recent observations as a separate, fenced section of a read: untrusted data."""

    tainted: Literal[True]
    note: str
    items: list[ObservationAnswer]
    more: bool


def day_dict(day: OperatorDay) -> DayAnswer:
    return {
        "date": day.date,
        "state": day.state,
        "opened": day.opened_at,
        "opened_via": day.opened_via or None,
        "closed": day.closed_at,
    }


def answered_runs() -> QuerySet[Run]:
    """Runs with the rows `run_dict` names (holder, day, who ended it), read in the same statement:
    what the run lock's answers and refusals and operator_state's runs section read."""
    return Run.objects.select_related("holder", "day", "ended_by")


def run_dict(run: Run, now: datetime | None = None) -> RunAnswer:
    """A run as tools answer it (never its token or digest)."""
    now = now or timezone.now()
    out: dict[str, Any] = {
        "id": run.id,
        "kind": run.kind,
        "status": run.status,
        "holder": run.holder.name,
        "started": run.started_at,
        "last_heartbeat": run.last_heartbeat_at,
        "heartbeats": run.heartbeats,
        "stale_after_s": run.stale_after_s,
        "note": run.note or None,
        "progress": run.progress or None,
        "day": run.day.date if run.day_id else None,
    }
    if run.status == Run.Status.RUNNING:
        overdue = run.overdue_s(now)
        out["stale_at"] = run.last_heartbeat_at + timedelta(seconds=run.stale_after_s)
        out["overdue"] = overdue > 0
    else:
        out["ended"] = run.ended_at
        out["ended_by"] = run.ended_by.name if run.ended_by_id else None
        out["end_reason"] = run.end_reason or None
        out["summary"] = run.summary or None
        out["taken_over_by"] = run.taken_over_by_id
    return cast("RunAnswer", out)


def run_status_of(current: Run | None, last: Run | None, now: datetime) -> RunStatusAnswer:
    return {
        "running": run_dict(current, now) if current else None,
        "last_finished": run_dict(last, now) if last else None,
    }


def progress_dict(entry: ProgressEntry) -> ProgressAnswer:
    return {
        "id": entry.id,
        "day": entry.day.date,
        "summary": entry.summary,
        "outcome": entry.outcome,
        "tried": entry.tried,
        "failed": entry.failed,
        "run_id": entry.run_id,
        "tick": entry.tick or None,
        "recorded_by": entry.recorded_by.name,
        "created": entry.created_at,
    }


def observation_dict(observation: Observation) -> ObservationAnswer:
    """An observation as every read returns it: marked tainted, its text as data, never merged."""
    return {
        "tainted": True,
        "id": observation.id,
        "kind": observation.kind,
        "summary": observation.summary,
        "source": observation.source or None,
        "data": observation.data,
        "recorded_by": observation.recorded_by.name,
        "day": observation.day.date,
        "created": observation.created_at,
    }


def headline_of(report: Any) -> str | None:
    """The headline of a tick's report or a day's summary (JSON objects the operator writes). A row
    that holds anything else (a damaged or hand-edited database) has none: its readers go on."""
    headline = report.get("headline") if isinstance(report, dict) else None
    return headline if isinstance(headline, str) else None


def tick_dict(tick: Tick) -> TickAnswer:
    return {
        "id": tick.id,
        "mode": tick.mode,
        "date": tick.day.date,
        "at": tick.at,
        "since": tick.since,
        "by": tick.principal.name,
        "run_id": tick.run_id,
        "progress_id": tick.progress_id,
        "headline": headline_of(tick.report),
    }
