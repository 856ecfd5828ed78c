"""The ends of the calendar on every page: an instant the operator's zone cannot write is shown in UTC.

Services never store such an instant (they set `created_at`, `decided_at`, `last_heartbeat_at` ... to
now), but a damaged or hand-edited database may hold one — 9999-12-31 23:00 UTC is in year 10000 east
of UTC, 0001-01-01 00:30 UTC in year 0 west of it — and every way a page shows a date-time converts it
to the current zone first: the admin's columns and read-only fields (`display_for_field`), a
template's ``{{ value }}`` and its ``date`` and ``time`` filters (`timezone.template_localtime`, then
`localtime`), each raising OverflowError, a 500. `CalendarEdgeZoneMiddleware` makes
`CalendarEdgeZone` the current zone for every request Django serves, so none of them fails, and an
HTML page that wrote an instant in UTC this way says so at its top (`EDGE_NOTE_ID`): the page's
other times are in the operator's zone, and a date written in another zone without a word would be
read as the person's own time. The admin's date drill-down, which converts in SQL, is hidden for a
list holding such an instant (`operator_site.admin.InputGuardMixin`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import escape

from operator_site.middleware import at_top, html_of, set_html

EDGE_NOTE_ID = "op-calendar-edge-note"


class CalendarEdgeZone(tzinfo):
    """The zone pages are shown in (the operator's, `TIME_ZONE`), except that an instant it cannot
    write comes out in UTC instead of raising OverflowError. Every other instant is converted exactly
    as the zone itself converts it (the result carries the zone itself), so nothing else changes."""

    def __init__(self, zone: tzinfo) -> None:
        super().__init__()
        self.zone = zone
        self.wrote_utc = False  # has an instant been written in UTC through this zone (the page says so)

    def fromutc(self, dt: datetime) -> datetime:
        try:
            return self.zone.fromutc(dt.replace(tzinfo=self.zone))
        except OverflowError:
            self.wrote_utc = True
            return dt.replace(tzinfo=UTC)  # the same instant, written in UTC

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


def local_text(when: datetime | None, fmt: str = "%Y-%m-%d %H:%M %Z") -> str:
    """`when` written in the current zone (the operator's, `CalendarEdgeZone` on a page) — or in UTC
    when that zone cannot write it: an instant at the very edge of the calendar (stored before the
    door refused such values, or under another OPERATOR_TIME_ZONE) must not stop a page, a notice or
    a worker that shows it. Pass a format with ``%Z`` wherever the text does not say its zone, so a
    time in UTC reads as one; a page that wrote one says so at its top (`CalendarEdgeZoneMiddleware`).
    "" for no instant (a row not saved yet)."""
    if when is None:
        return ""
    try:
        return timezone.localtime(when).strftime(fmt)
    except (OverflowError, ValueError):
        return when.astimezone(UTC).strftime(fmt)


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
        # A zone of this request's own, so what it wrote in UTC is this page's and no other's.
        zone = CalendarEdgeZone(current.zone if isinstance(current, CalendarEdgeZone) else current)
        with timezone.override(zone):
            response = self.get_response(request)
        if zone.wrote_utc:
            say_so(response, zone)
        return response


def edge_note(zone: CalendarEdgeZone) -> str:
    return (
        f'<div id="{EDGE_NOTE_ID}" role="note">Some dates on this page are at an end of the calendar, '
        f"where the operator's time zone ({escape(str(zone))}) cannot write them: they are shown in "
        "UTC. Every other time is in the operator's zone. Only a damaged or hand-edited row holds such "
        "a date.</div>"
    )


def say_so(response: HttpResponse, zone: CalendarEdgeZone) -> None:
    """Put `edge_note` at the top of an HTML page."""
    html = html_of(response)
    if html is not None:
        set_html(response, at_top(html, edge_note(zone)))
