"""The human console for the goals app: goals, priorities and projects (read, each with the history
of every version that changed it), goal-model versions (read-only with a readable diff; "undo this
change" and "revert to here" as confirmation pages, `operator_site.lineage_admin`), the board
(tasks by lane and status, with their goal and project; read-only: agents and the person change
tasks through the tools) and the decision log (read-only)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, Q
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from beliefs.admin import GatedItemAdmin, GatedVersionAdmin
from goals import goal_model
from goals.models import DecisionLogEntry, Goal, GoalModelItem, GoalModelVersion, Priority, Project, Task
from operator_site.admin import ReadOnlyAdmin, identifier_column
from operator_site.lineage_admin import history_table


# --- the goal model ----------------------------------------------------------------------------------
class GoalModelItemAdmin(GatedItemAdmin):
    """Shared by goals, priorities and projects: read-only, provenance, evidence and history."""

    kind: goal_model.ItemKind
    title_shown = identifier_column("title")  # a goal's or project's
    name_shown = identifier_column("name")  # a priority's

    @admin.display(description="history (every version that changed it)")
    def history(self, obj: GoalModelItem) -> SafeString:
        return history_table(goal_model.REVERTER, goal_model.entity_of(self.kind, obj.pk))


@admin.register(Goal)
class GoalAdmin(GoalModelItemAdmin):
    kind = goal_model.GOAL
    list_display = (
        "importance",
        "title_shown",
        "status",
        "project_count",
        "open_tasks",
        "source",
        "set_in_version",
    )
    list_display_links = ("title_shown",)
    list_filter = ("status", "source_kind")
    search_fields = ("title", "detail")
    ordering = ("importance", "id")
    readonly_fields = (
        "title_shown",
        "detail",
        "status",
        "importance",
        "source",
        "set_in_version",
        "evidence",
        "last_version",
        "updated_at",
        "history",
    )
    fields = readonly_fields

    def get_queryset(self, request: Any) -> Any:
        return (
            super()
            .get_queryset(request)
            .annotate(
                n_projects=Count("projects", filter=Q(projects__present=True), distinct=True),
                n_open_tasks=Count("tasks", filter=Q(tasks__status__in=Task.OPEN_STATUSES), distinct=True),
            )
        )

    @admin.display(description="projects", ordering="n_projects")
    def project_count(self, obj: Goal) -> int:
        return obj.n_projects  # type: ignore[attr-defined]

    @admin.display(description="open tasks", ordering="n_open_tasks")
    def open_tasks(self, obj: Goal) -> int:
        return obj.n_open_tasks  # type: ignore[attr-defined]


@admin.register(Priority)
class PriorityAdmin(GoalModelItemAdmin):
    kind = goal_model.PRIORITY
    list_display = ("position", "name_shown", "status", "source", "set_in_version")
    list_display_links = ("name_shown",)
    list_filter = ("status",)
    search_fields = ("name", "detail")
    ordering = ("position", "id")
    readonly_fields = (
        "name_shown",
        "detail",
        "status",
        "position",
        "source",
        "set_in_version",
        "evidence",
        "last_version",
        "updated_at",
        "history",
    )
    fields = readonly_fields


@admin.register(Project)
class ProjectAdmin(GoalModelItemAdmin):
    kind = goal_model.PROJECT
    list_display = ("title_shown", "status", "goal", "source", "set_in_version")
    list_filter = ("status", "goal")
    search_fields = ("title", "detail", "goal__title")
    list_select_related = ("goal",)
    readonly_fields = (
        "title_shown",
        "detail",
        "status",
        "goal",
        "source",
        "set_in_version",
        "last_version",
        "updated_at",
        "history",
    )
    fields = readonly_fields


@admin.register(GoalModelVersion)
class GoalModelVersionAdmin(GatedVersionAdmin):
    lineage_label = "goal model"
    reverter = goal_model.REVERTER
    revert_permission = "goals.revert_goal_model"
    what_label = "goal, priority or project · field"


# --- the board and the log ------------------------------------------------------------------------------
@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = (
        "title",
        "lane",
        "status",
        "priority",
        "goal_link",
        "project_link",
        "owner",
        "blocker",
        "updated_at",
        "updated_by",
    )
    list_filter = ("status", "priority", "lane", "owner", "goal", "project")
    search_fields = ("title", "key", "detail", "blocker", "goal__title", "project__title")
    ordering = ("lane", "status", "-updated_at")
    list_select_related = ("updated_by", "goal", "project")

    @admin.display(description="goal", ordering="goal__importance")
    def goal_link(self, obj: Task) -> str:
        return _item_link(obj.goal, "goal")

    @admin.display(description="project", ordering="project__title")
    def project_link(self, obj: Task) -> str:
        return _item_link(obj.project, "project")


def _item_link(item: GoalModelItem | None, model_name: str) -> str:
    if item is None:
        return "—"
    label = getattr(item, "title", "")
    if not item.present:
        return format_html("<s>{}</s> (undone)", label)
    url = reverse(f"admin:goals_{model_name}_change", args=[item.pk])
    return format_html('<a href="{}">{}</a>', url, label)


@admin.register(DecisionLogEntry)
class DecisionLogAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "title", "decision", "actor", "short_hash")
    search_fields = ("title", "decision", "rationale", "context")
    date_hierarchy = "created_at"
    ordering = ("-id",)

    @admin.display(description="hash")
    def short_hash(self, obj: DecisionLogEntry) -> str:
        return obj.entry_hash[:12]
