"""Helpers of the goal-model tests (fixtures live in conftest.py)."""

from __future__ import annotations

from goals.models import Goal, GoalModelChange, GoalModelVersion, Priority, Project, Task
from operator_site.models import ConfirmationUse, Notification

APPLY = "operator_apply_goal_change"
RECONCILE = "operator_reconcile_goal_model"
REVERT = "operator_revert_goal_model"


def ranking() -> list[str]:
    """The titles of ranked goals, most important first."""
    return list(
        Goal.objects.filter(importance__isnull=False).order_by("importance").values_list("title", flat=True)
    )


def ranks() -> list[int]:
    return list(
        Goal.everything.filter(importance__isnull=False)
        .order_by("importance")
        .values_list("importance", flat=True)
    )


def everything() -> dict[str, list[tuple]]:
    """Every row the goal model, its evidence spending and its notices consist of (to prove a refused
    call left all of them untouched)."""
    tables = {
        "goals": Goal.everything,
        "priorities": Priority.everything,
        "projects": Project.everything,
        "versions": GoalModelVersion.objects,
        "changes": GoalModelChange.objects,
        "uses": ConfirmationUse.objects,
        "notices": Notification.objects,
        "tasks": Task.objects,
    }
    return {name: list(manager.order_by("pk").values_list()) for name, manager in tables.items()}
