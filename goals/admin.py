"""The board (tasks by lane and status) and the decision log (read-only, rendered as a log)."""

from __future__ import annotations

from django.contrib import admin

from goals.models import DecisionLogEntry, Task
from operator_site.admin import ReadOnlyAdmin


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ("title", "lane", "status", "priority", "owner", "blocker", "updated_at", "updated_by")
    list_filter = ("status", "priority", "lane", "owner")
    search_fields = ("title", "key", "detail", "blocker")
    ordering = ("lane", "status", "-updated_at")
    list_select_related = ("updated_by",)


@admin.register(DecisionLogEntry)
class DecisionLogAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "title", "decision", "actor", "short_hash")
    search_fields = ("title", "decision", "rationale", "context")
    date_hierarchy = "created_at"
    ordering = ("-id",)

    @admin.display(description="hash")
    def short_hash(self, obj: DecisionLogEntry) -> str:
        return obj.entry_hash[:12]
