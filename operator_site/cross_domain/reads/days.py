"""operator_history and the ticks' figures: what changed between two instants, a day's figures,
the recent days."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, F, Q, QuerySet, Window
from django.db.models.functions import RowNumber, TruncDate
from django.utils import timezone

from goals.models import DecisionLogEntry, Task
from intents.models import Decision, Intent, IntentStatus
from operator_site.cross_domain.reads.common import (
    CHANGE_ITEMS,
    COUNT_CAP,
    HISTORY_DEFAULT_DAYS,
    HISTORY_ITEMS,
    HISTORY_MAX_DAYS,
    clip,
    day_bounds,
    operator_tz,
    scalar_figures,
)
from operator_site.refusals import Refusal
from runs.answers import day_dict, headline_of
from runs.days import find_day
from runs.models import Observation, OperatorDay, ProgressEntry, Run, Tick


# --- what happened: a window of time, a day, recent days ---------------------------------------------
def _days_between(first: date, last: date) -> QuerySet:
    return OperatorDay.objects.filter(date__gte=first, date__lte=last).values("id")


def _local_date(value: datetime) -> date:
    """The operator's day of an instant; at an end of the calendar, where the zone cannot write it
    (year 1 west of UTC, 9999 east: only a damaged row holds one, such as a tick's `at` a window
    starts from), the first or last day there is, so the window still reads."""
    try:
        return timezone.localdate(value)
    except OverflowError:
        return date.min if value.year == 1 else date.max


def _grouped(queryset: QuerySet, field: str) -> dict[str, int]:
    return {row[field]: row["n"] for row in queryset.order_by().values(field).annotate(n=Count("id"))}


def changes_between(since: datetime, until: datetime) -> dict[str, Any]:
    """What changed in (since, until]: new intents, decisions opened and decided, task moves, new
    observations (counted, never quoted), progress, runs, logged decisions. A fixed number of
    queries, each bounded by what happened in the window (time-indexed, or narrowed to its days)."""
    days = _days_between(_local_date(since), _local_date(until))
    in_window = {"created_at__gt": since, "created_at__lte": until}
    intents = Intent.objects.filter(**in_window)
    decisions = Decision.objects.filter(
        Q(created_at__gt=since, created_at__lte=until) | Q(decided_at__gt=since, decided_at__lte=until)
    )
    decided = Q(decided_at__gt=since, decided_at__lte=until)
    decision_counts = decisions.aggregate(
        opened=Count("id", filter=Q(created_at__gt=since, created_at__lte=until)),
        approved=Count("id", filter=decided & Q(status="approved")),
        rejected=Count("id", filter=decided & Q(status="rejected")),
        expired=Count("id", filter=decided & Q(status="expired")),
        withdrawn=Count("id", filter=decided & Q(status="withdrawn")),
    )
    moved = Task.objects.filter(updated_at__gt=since, updated_at__lte=until)
    task_rows = list(moved.select_related("updated_by").order_by("-updated_at", "-id")[:CHANGE_ITEMS])
    progress = ProgressEntry.objects.filter(day_id__in=days, **in_window).filter(tick_record__isnull=True)
    figures = scalar_figures(
        {
            "intents": intents,
            "tasks_moved": moved,
            "tasks_created": Task.objects.filter(created_at__gt=since, created_at__lte=until),
            "tasks_done": moved.filter(status="done"),
            "observations": Observation.objects.filter(day_id__in=days, **in_window),
            "progress": progress,
            "runs_started": Run.objects.filter(day_id__in=days, started_at__gt=since, started_at__lte=until),
            "logged_decisions": DecisionLogEntry.objects.filter(**in_window),
        }
    )
    intent_status = _grouped(intents, "status")
    return {
        "since": since,
        "until": until,
        "intents": {
            "created": figures["intents"],
            "by_status": intent_status,
            "items": [
                {
                    "id": i["id"],
                    "action_type": i["action_type"],
                    "title": clip(i["title"]),
                    "status": i["status"],
                }
                for i in intents.order_by("-id").values("id", "action_type", "title", "status")[:CHANGE_ITEMS]
            ],
        },
        "decisions": decision_counts,
        "tasks": {
            "moved": figures["tasks_moved"],
            "created": figures["tasks_created"],
            "done": figures["tasks_done"],
            "items": [
                {
                    "id": t.id,
                    "key": t.key,
                    "title": clip(t.title),
                    "status": t.status,
                    "lane": t.lane or None,
                    "updated_by": t.updated_by.name,
                }
                for t in task_rows
            ],
        },
        "observations": {"recorded": figures["observations"], "tainted": True},
        "progress_recorded": figures["progress"],
        "runs_started": figures["runs_started"],
        "logged_decisions": figures["logged_decisions"],
        "counts_capped_at": COUNT_CAP,
    }


def headline(changes: Mapping[str, Any]) -> str:
    """One sentence of counts (never any recorded text): what a tick found."""
    pending = changes["intents"]["by_status"].get(IntentStatus.PENDING_APPROVAL, 0)
    parts = [
        f"{changes['intents']['created']} new intents ({pending} awaiting approval)",
        f"{changes['decisions']['opened']} decisions opened, "
        f"{sum(changes['decisions'][k] for k in ('approved', 'rejected', 'expired', 'withdrawn'))} closed",
        f"{changes['tasks']['moved']} task moves ({changes['tasks']['created']} new, "
        f"{changes['tasks']['done']} done)",
        f"{changes['observations']['recorded']} observations",
        f"{changes['progress_recorded']} progress entries",
        f"{changes['runs_started']} runs started",
    ]
    return "; ".join(parts)


def day_figures(day: date, day_row: OperatorDay | None = None) -> dict[str, Any]:
    """The figures of one local day (the night tick stores them on the day; `status` shows them live):
    tasks done, intents created / approved / blocked, decisions, runs, progress, observations,
    ticks. Counts only, plus the titles of the few tasks done; never observation text."""
    start, end = day_bounds(day)
    if day_row is None:
        day_row = find_day(day)
    day_id = day_row.id if day_row else None
    created_today = {"created_at__gte": start, "created_at__lt": end}
    intents = Intent.objects.filter(**created_today)
    done = Task.objects.filter(status="done", updated_at__gte=start, updated_at__lt=end)
    decisions = Decision.objects.filter(
        Q(**created_today) | Q(decided_at__gte=start, decided_at__lt=end)
    ).aggregate(
        opened=Count("id", filter=Q(**created_today)),
        approved=Count("id", filter=Q(status="approved", decided_at__gte=start, decided_at__lt=end)),
        rejected=Count("id", filter=Q(status="rejected", decided_at__gte=start, decided_at__lt=end)),
        expired=Count("id", filter=Q(status="expired", decided_at__gte=start, decided_at__lt=end)),
        withdrawn=Count("id", filter=Q(status="withdrawn", decided_at__gte=start, decided_at__lt=end)),
    )
    figures = scalar_figures(
        {
            "tasks_done": done,
            "tasks_moved": Task.objects.filter(updated_at__gte=start, updated_at__lt=end),
            "intents_created": intents,
            "intents_approved": Intent.objects.filter(approved_at__gte=start, approved_at__lt=end),
            "intents_blocked": intents.filter(status=IntentStatus.BLOCKED),
            "intents_pending": intents.filter(status=IntentStatus.PENDING_APPROVAL),
            "observations": Observation.objects.filter(day_id=day_id),
            "logged_decisions": DecisionLogEntry.objects.filter(**created_today),
        }
    )
    return {
        "date": day,
        "tasks": {
            "done": figures["tasks_done"],
            "moved": figures["tasks_moved"],
            "done_items": [
                {"id": t["id"], "key": t["key"], "title": clip(t["title"])}
                for t in done.order_by("-updated_at", "-id").values("id", "key", "title")[:CHANGE_ITEMS]
            ],
        },
        "intents": {
            "created": figures["intents_created"],
            "approved": figures["intents_approved"],
            "blocked": figures["intents_blocked"],
            "still_pending": figures["intents_pending"],
            "by_status": _grouped(intents, "status"),
        },
        "decisions": decisions,
        "logged_decisions": figures["logged_decisions"],
        "runs": _grouped(Run.objects.filter(day_id=day_id), "status"),
        "progress": _grouped(ProgressEntry.objects.filter(day_id=day_id), "outcome"),
        "observations": {"recorded": figures["observations"], "tainted": True},
        "ticks": sorted(Tick.objects.filter(day_id=day_id).values_list("mode", flat=True).distinct()),
        "counts_capped_at": COUNT_CAP,
    }


def _top_per(queryset: QuerySet, partition: Any, k: int, fields: Iterable[str], order: Any = None) -> list:
    """The `k` newest rows of each partition in ONE query (a window function)."""
    return list(
        queryset.annotate(
            rn=Window(RowNumber(), partition_by=[partition], order_by=[order or F("id").desc()])
        )
        .filter(rn__lte=k)
        .values(*fields)
    )


def history(*, days: int = HISTORY_DEFAULT_DAYS, now: datetime | None = None) -> dict[str, Any]:
    """The recent operator days, newest first: per day its ticks, progress, runs, intents created,
    decisions made and logged decisions (counts, and the few most recent items), and the number of
    observations (never their text). A fixed number of queries, whatever the number of days."""
    if not 1 <= days <= HISTORY_MAX_DAYS:
        raise Refusal("out_of_range", f"days must be between 1 and {HISTORY_MAX_DAYS}.")
    now = now or timezone.now()
    last = timezone.localdate(now)
    first = last - timedelta(days=days - 1)
    lo, _ = day_bounds(first)
    _, hi = day_bounds(last)
    tz = operator_tz()
    k = HISTORY_ITEMS

    day_rows = {d.id: d for d in OperatorDay.objects.filter(date__gte=first, date__lte=last)}
    day_ids = list(day_rows)

    def per_day(model: Any, field: str) -> dict[tuple[int, str], int]:
        rows = (
            model.objects.filter(day_id__in=day_ids)
            .order_by()
            .values("day_id", field)
            .annotate(n=Count("id"))
        )
        return {(r["day_id"], r[field]): r["n"] for r in rows}

    tick_counts = per_day(Tick, "mode")
    tick_items = _top_per(
        Tick.objects.filter(day_id__in=day_ids),
        F("day_id"),
        k,
        ("day_id", "id", "mode", "at", "principal__name", "run_id", "progress_id", "report"),
    )
    progress_counts = per_day(ProgressEntry, "outcome")
    progress_items = _top_per(
        ProgressEntry.objects.filter(day_id__in=day_ids),
        F("day_id"),
        k,
        ("day_id", "id", "summary", "outcome", "tick", "run_id", "recorded_by__name", "created_at"),
    )
    run_counts = per_day(Run, "status")
    run_items = _top_per(
        Run.objects.filter(day_id__in=day_ids),
        F("day_id"),
        k,
        ("day_id", "id", "kind", "status", "holder__name", "started_at", "ended_at", "summary"),
    )
    observation_counts = {
        r["day_id"]: r["n"]
        for r in Observation.objects.filter(day_id__in=day_ids)
        .order_by()
        .values("day_id")
        .annotate(n=Count("id"))
    }
    intents = Intent.objects.filter(created_at__gte=lo, created_at__lt=hi)
    intent_counts = {
        (r["local_day"], r["status"]): r["n"]
        for r in intents.order_by().values("local_day", "status").annotate(n=Count("id"))
    }
    intent_items = _top_per(
        intents, F("local_day"), k, ("local_day", "id", "action_type", "title", "status", "created_at")
    )
    decided = Decision.objects.filter(decided_at__gte=lo, decided_at__lt=hi).annotate(
        on=TruncDate("decided_at", tzinfo=tz)
    )
    decision_counts = {
        (r["on"], r["status"]): r["n"]
        for r in decided.order_by().values("on", "status").annotate(n=Count("id"))
    }
    decision_items = _top_per(
        decided,
        TruncDate("decided_at", tzinfo=tz),
        k,
        ("on", "id", "title", "status", "intent_id", "decided_by__name", "decided_via", "decided_at"),
        order=F("decided_at").desc(),
    )
    logged = DecisionLogEntry.objects.filter(created_at__gte=lo, created_at__lt=hi).annotate(
        on=TruncDate("created_at", tzinfo=tz)
    )
    logged_counts = {r["on"]: r["n"] for r in logged.order_by().values("on").annotate(n=Count("id"))}
    logged_items = _top_per(
        logged, TruncDate("created_at", tzinfo=tz), k, ("on", "id", "title", "actor", "created_at")
    )

    # Assemble per date (days with no row and no activity are only counted).
    by_date: dict[date, dict[str, Any]] = {}

    def entry(on: date) -> dict[str, Any]:
        if on not in by_date:
            by_date[on] = {
                "date": on,
                "day": None,
                "ticks": {"count": 0, "by_mode": {}, "recent": []},
                "progress": {"count": 0, "by_outcome": {}, "recent": []},
                "runs": {"count": 0, "by_status": {}, "recent": []},
                "intents_created": {"count": 0, "by_status": {}, "recent": []},
                "decisions_made": {"count": 0, "by_status": {}, "recent": []},
                "logged_decisions": {"count": 0, "recent": []},
                "observations": {"recorded": 0, "tainted": True},
            }
        return by_date[on]

    for row in day_rows.values():
        item = entry(row.date)
        item["day"] = day_dict(row) | {"summary": headline_of(row.summary)}
    date_of = {day_id: row.date for day_id, row in day_rows.items()}

    def add_counts(counts: Mapping[tuple[Any, str], int], section: str, by: str, to_date: Any) -> None:
        for (key, value), n in counts.items():
            sec = entry(to_date(key))[section]
            sec["count"] += n
            sec[by][value] = n

    add_counts(tick_counts, "ticks", "by_mode", date_of.__getitem__)
    add_counts(progress_counts, "progress", "by_outcome", date_of.__getitem__)
    add_counts(run_counts, "runs", "by_status", date_of.__getitem__)
    add_counts(intent_counts, "intents_created", "by_status", lambda d: d)
    add_counts(decision_counts, "decisions_made", "by_status", lambda d: d)
    for on, n in logged_counts.items():
        entry(on)["logged_decisions"]["count"] = n
    for day_id, n in observation_counts.items():
        entry(date_of[day_id])["observations"]["recorded"] = n

    def add_items(rows: list[dict[str, Any]], section: str, key: str, to_date: Any, render: Any) -> None:
        for row in rows:
            entry(to_date(row.pop(key)))[section]["recent"].append(clip(render(row)))

    add_items(
        tick_items,
        "ticks",
        "day_id",
        date_of.__getitem__,
        lambda r: {
            "id": r["id"],
            "mode": r["mode"],
            "at": r["at"],
            "by": r["principal__name"],
            "run_id": r["run_id"],
            "progress_id": r["progress_id"],
            "headline": headline_of(r["report"]),
        },
    )
    add_items(
        progress_items,
        "progress",
        "day_id",
        date_of.__getitem__,
        lambda r: {
            "id": r["id"],
            "summary": r["summary"],
            "outcome": r["outcome"],
            "tick": r["tick"] or None,
            "run_id": r["run_id"],
            "by": r["recorded_by__name"],
            "created": r["created_at"],
        },
    )
    add_items(
        run_items,
        "runs",
        "day_id",
        date_of.__getitem__,
        lambda r: {
            "id": r["id"],
            "kind": r["kind"],
            "status": r["status"],
            "holder": r["holder__name"],
            "started": r["started_at"],
            "ended": r["ended_at"],
            "summary": r["summary"] or None,
        },
    )
    add_items(intent_items, "intents_created", "local_day", lambda d: d, lambda r: r)
    add_items(
        decision_items,
        "decisions_made",
        "on",
        lambda d: d,
        lambda r: {
            "id": r["id"],
            "title": r["title"],
            "status": r["status"],
            "intent_id": r["intent_id"],
            "decided_by": r["decided_by__name"],
            "decided_via": r["decided_via"] or None,
            "decided_at": r["decided_at"],
        },
    )
    add_items(logged_items, "logged_decisions", "on", lambda d: d, lambda r: r)

    for item in by_date.values():
        for section in ("ticks", "progress", "runs", "intents_created", "decisions_made", "logged_decisions"):
            item[section]["recent"].sort(key=lambda r: r["id"], reverse=True)
    listed = [by_date[d] for d in sorted(by_date, reverse=True) if first <= d <= last]
    return {
        "ok": True,
        "days": days,
        "from": first,
        "to": last,
        "time_zone": settings.OPERATOR_TIME_ZONE,
        "items_per_kind": k,
        "dates": listed,
        "quiet_dates": days - len(listed),
        "note": "Dates with no operator day and no activity are left out (counted in quiet_dates). "
        "Observations are counted, never quoted: read them fenced in operator_context_packet.",
    }
