"""Operator days: one per local date (`OPERATOR_TIME_ZONE`), opened by the morning tick or lazily by
the first write of the day, closed by the night tick. docs/runs-and-ticks.md has the lifecycle."""

from __future__ import annotations

from datetime import date, datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from operator_site.models import Principal
from operator_site.sql import insert_row, insert_under, row_where
from runs.models import OperatorDay, ProgressEntry


def find_day(day: date) -> OperatorDay | None:
    """The operator day of a local date, if it was opened. Never writes. (Read by every write of the
    record, hence the compiled-once lookup.)"""
    return row_where(OperatorDay, date=day)


def open_day(
    *,
    principal: Principal | None,
    day: date | None = None,
    via: str = "morning tick",
    now: datetime | None = None,
) -> tuple[OperatorDay, bool]:
    """Open the operator day of `day` (default: today, local) if it is not open yet.

    Idempotent, also under concurrent callers: the date is unique, the insert runs in a savepoint,
    and the loser of an insert race reads the winner's row. Returns (day, created). A day closed by
    the night tick stays closed; it is returned as it is.
    """
    now = now or timezone.now()
    day = day or timezone.localdate(now)
    existing = find_day(day)
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            created = OperatorDay.objects.create(
                date=day, opened_at=now, opened_by=principal, opened_via=via[:64]
            )
        return created, True
    except IntegrityError:
        return OperatorDay.objects.get(date=day), False


def current_day(*, principal: Principal | None, via: str, now: datetime | None = None) -> OperatorDay:
    """Today's operator day, opened lazily by the first write of the day (`via` names that write)."""
    return open_day(principal=principal, via=f"first write: {via}", now=now)[0]


def insert_for_today(entry: ProgressEntry, *, principal: Principal, via: str, now: datetime) -> ProgressEntry:
    """INSERT `entry` under today's operator day, opening the day if this is its first write.

    Once the day is open (every write but the first of a day), the lookup of the day and the insert
    are one statement on PostgreSQL (`insert_under`): a round trip less for every progress entry."""
    if insert_under(entry, "day", date=timezone.localdate(now)) is None:
        entry.day = current_day(principal=principal, via=via, now=now)
        insert_row(entry)
    return entry
