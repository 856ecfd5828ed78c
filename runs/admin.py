"""Admin for runs, operator days, progress and observations: all read-only.

Runs change only through the lock's rules (start, heartbeat, finish, stale recovery); a hand edit
would bypass them. Observations are append-only and untrusted: their stored text is shown as text
(Django escapes it), never rendered as markup.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html

from operator_site.admin import ReadOnlyAdmin
from runs.models import Observation, OperatorDay, ProgressEntry, Run, Tick


def _pretty_json(value: object) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False, default=str))


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "kind",
        "status",
        "holder",
        "started_at",
        "last_heartbeat_at",
        "stale_after_s",
        "overdue",
        "ended_at",
        "taken_over_by",
    )
    list_filter = ("status", "kind", "holder")
    search_fields = ("kind", "note", "summary")
    date_hierarchy = "started_at"
    list_select_related = ("holder",)
    exclude = ("token_digest",)
    readonly_fields = [f.name for f in Run._meta.fields if f.name != "token_digest"]

    @admin.display(boolean=True, description="heartbeat overdue")
    def overdue(self, obj: Run) -> bool | None:
        if obj.status != Run.Status.RUNNING:
            return None
        return obj.overdue_s(timezone.now()) > 0


@admin.register(OperatorDay)
class OperatorDayAdmin(ReadOnlyAdmin):
    list_display = ("date", "state", "opened_at", "opened_by", "opened_via", "closed_at")
    list_filter = ("state",)
    date_hierarchy = "date"
    exclude = ("summary",)
    readonly_fields = [f.name for f in OperatorDay._meta.fields if f.name != "summary"] + ["day_summary"]

    @admin.display(description="summary")
    def day_summary(self, obj: OperatorDay) -> str:
        return _pretty_json(obj.summary)


@admin.register(ProgressEntry)
class ProgressEntryAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "day", "outcome", "summary", "tick", "run", "recorded_by")
    list_filter = ("outcome", "tick")
    search_fields = ("summary",)
    date_hierarchy = "created_at"
    list_select_related = ("day", "recorded_by")
    readonly_fields = [f.name for f in ProgressEntry._meta.fields]


@admin.register(Observation)
class ObservationAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "day", "kind", "tainted", "summary", "source", "recorded_by")
    list_filter = ("kind", "source")
    search_fields = ("summary", "source")
    date_hierarchy = "created_at"
    list_select_related = ("day", "recorded_by")
    exclude = ("data",)
    readonly_fields = [f.name for f in Observation._meta.fields if f.name != "data"] + ["data_json"]

    @admin.display(description="data (untrusted)")
    def data_json(self, obj: Observation) -> str:
        return _pretty_json(obj.data)


@admin.register(Tick)
class TickAdmin(ReadOnlyAdmin):
    """Append-only: the ticks that ran, per day, with what each found."""

    list_display = ("at", "day", "mode", "principal", "run")
    list_filter = ("mode",)
    date_hierarchy = "at"
    list_select_related = ("day", "principal", "run")
