"""Times as a page writes them: in the operator's zone and saying which, in UTC only at an end of the
calendar, and the page then says so (operator_site/calendar_edge.py).

A row's name (its ``__str__``: the admin's page titles, breadcrumbs and the links to it) wrote its
time in UTC with no zone while the page around it wrote times in the operator's zone: a directive
"quiet until 20:00" read as the person's own evening. Names now write their time as every other
text does, with the zone it is in.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from goals.models import DecisionLogEntry
from intents.models import Directive
from operator_site.calendar_edge import EDGE_NOTE_ID, CalendarEdgeZone, local_text
from operator_site.models import AuditEvent
from runs.models import Observation, ProgressEntry, Tick

EVENING_UTC = datetime(2026, 12, 7, 20, 0, tzinfo=UTC)  # 05:00 the next morning in Tokyo
EAST_EDGE = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)  # year 10000 in Tokyo


@pytest.fixture
def tokyo(settings: Any) -> None:
    settings.OPERATOR_TIME_ZONE = settings.TIME_ZONE = "Asia/Tokyo"


def test_local_text_writes_the_operators_zone_and_names_it(tokyo: None) -> None:
    assert local_text(EVENING_UTC) == "2026-12-08 05:00 JST"
    assert local_text(EVENING_UTC, "%Y-%m-%d") == "2026-12-08"  # the person's date, not UTC's
    assert local_text(EAST_EDGE) == "9999-12-31 23:00 UTC"  # outside a page: UTC, and it says so
    assert local_text(None) == ""


def test_on_a_page_the_edge_is_written_in_utc_and_the_zone_remembers_it(tokyo: None) -> None:
    zone = CalendarEdgeZone(timezone.get_current_timezone())
    with timezone.override(zone):
        assert local_text(EVENING_UTC) == "2026-12-08 05:00 JST"
        assert zone.wrote_utc is False
        assert local_text(EAST_EDGE) == "9999-12-31 23:00 UTC"
        assert zone.wrote_utc is True


def test_a_rows_name_writes_its_time_in_the_operators_zone(tokyo: None) -> None:
    names = {
        "directive": str(Directive(kind="quiet", expires_at=EVENING_UTC)),
        "audit event": str(AuditEvent(created_at=EVENING_UTC, principal_id=3, tool="t", outcome="ok")),
        "decision": str(DecisionLogEntry(created_at=EVENING_UTC, title="Keep the plan")),
        "progress": str(ProgressEntry(created_at=EVENING_UTC, outcome="done", summary="Painted")),
        "observation": str(Observation(created_at=EVENING_UTC, kind="world", summary="Rain")),
        "tick": str(Tick(at=EVENING_UTC, mode="morning")),
    }
    assert names == {
        "directive": "quiet until 2026-12-08 05:00 JST",
        "audit event": "2026-12-08 05:00:00 JST 3 t ok",
        "decision": "2026-12-08 Keep the plan",
        "progress": "2026-12-08 05:00 JST done: Painted",
        "observation": "2026-12-08 05:00 JST world (tainted): Rain",
        "tick": "2026-12-08 05:00 JST morning tick",
    }


@pytest.mark.django_db
def test_the_admin_page_of_a_row_writes_its_name_in_the_operators_zone(owner: Any, tokyo: None) -> None:
    owner = owner.principal
    event = AuditEvent.objects.create(
        principal=owner, tool="operator_state", outcome="ok", duration_ms=1.0, args_sha256="0" * 64
    )
    AuditEvent._base_manager.filter(pk=event.pk).update(created_at=EVENING_UTC)
    client = Client()
    client.force_login(owner.user)
    page = client.get(reverse("admin:operator_site_auditevent_change", args=[event.pk])).content.decode()
    assert "2026-12-08 05:00:00 JST" in page  # the title, the breadcrumbs and the heading
    assert "2026-12-07 20:00" not in page  # no time in UTC without its zone
    assert EDGE_NOTE_ID not in page  # nothing at an end of the calendar: no note
