"""The ends of the calendar on every page: an instant the operator's zone cannot write is shown in UTC.

Services never store such an instant (they set `created_at`, `decided_at`, `last_heartbeat_at` ... to
now), but a damaged or hand-edited database may hold one — 9999-12-31 23:00 UTC is in year 10000 east
of UTC, 0001-01-01 00:30 UTC in year 0 west of it — and every way a page shows a date-time converts it
to the current zone first: the admin's columns and read-only fields (`display_for_field`), a
template's ``{{ value }}`` and its ``date`` and ``time`` filters (`timezone.template_localtime`, then
`localtime`), each raising OverflowError, a 500. `CalendarEdgeZoneMiddleware` makes
`CalendarEdgeZone` the current zone for every request Django serves, so none of them fails; the
admin's date drill-down, which converts in SQL, is hidden for a list holding such an instant
(`operator_site.admin.InputGuardMixin`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo

from django.http import HttpRequest, HttpResponse
from django.utils import timezone


class CalendarEdgeZone(tzinfo):
    """The zone pages are shown in (the operator's, `TIME_ZONE`), except that an instant it cannot
    write comes out in UTC instead of raising OverflowError. Every other instant is converted exactly
    as the zone itself converts it (the result carries the zone itself), so nothing else changes."""

    def __init__(self, zone: tzinfo) -> None:
        super().__init__()
        self.zone = zone

    def fromutc(self, dt: datetime) -> datetime:
        try:
            return self.zone.fromutc(dt.replace(tzinfo=self.zone))
        except OverflowError:
            return dt.replace(tzinfo=UTC)  # the same instant, written in UTC (and saying so: "UTC")

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return self.zone.utcoffset(dt)

    def dst(self, dt: datetime | None) -> timedelta | None:
        return self.zone.dst(dt)

    def tzname(self, dt: datetime | None) -> str | None:
        return self.zone.tzname(dt)

    def __str__(self) -> str:  # the name SQL conversions use (`timezone._get_timezone_name`)
        return str(self.zone)

    def __repr__(self) -> str:
        return f"CalendarEdgeZone({self.zone!r})"


def writable_here(value: datetime) -> bool:
    """Can the current zone write this instant (is it not at an end of the calendar there)?"""
    zone = timezone.get_current_timezone()
    try:
        value.astimezone(zone.zone if isinstance(zone, CalendarEdgeZone) else zone)
    except OverflowError:
        return False
    return True


class CalendarEdgeZoneMiddleware:
    """Every request Django serves — the admin, the one-tap links, the human API — is handled and its
    page rendered (a template response is rendered inside the middleware chain) with
    `CalendarEdgeZone` the current zone."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        current = timezone.get_current_timezone()
        zone = current if isinstance(current, CalendarEdgeZone) else CalendarEdgeZone(current)
        with timezone.override(zone):
            return self.get_response(request)
