"""The admin index as a review dashboard: what needs the person, and where things stand.

A fixed handful of small queries, whatever the size of the history: intents awaiting approval
(count and the oldest), safety notices not delivered in time (a banner, and a row), safety notices
not yet acknowledged, intents the gate blocked (an agent that tried to send a password never
reaches the approval queue: this is where the person sees it tried), the latest world-model and
goal-model changes, the current run, and today's operator day.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from beliefs.models import WorldModelVersion
from goals.models import GoalModelVersion
from intents.models import Intent, IntentStatus
from operator_site.models import Notification
from operator_site.notifications import overdue_safety_notices
from runs.days import find_day
from runs.models import Run


def _latest_version(model: Any, admin_name: str) -> dict[str, Any] | None:
    version = model.objects.order_by("-number").first()
    if version is None:
        return None
    return {
        "number": version.number,
        "summary": version.summary or version.operation,
        "actor": version.actor,
        "at": version.created_at,
        "url": reverse(f"admin:{admin_name}_change", args=[version.number]),
        "list_url": reverse(f"admin:{admin_name}_changelist"),
    }


def _undelivered(now: Any) -> dict[str, Any]:
    """Safety notices the person has not been reached with (the escalation banner): computed on every
    view of the dashboard, whether or not the deliverer's escalation step has run."""
    overdue = overdue_safety_notices(now).filter(acknowledged_at__isnull=True)
    return {
        "count": overdue.count(),
        "notices": list(overdue[:5]),
        "minutes": f"{settings.OPERATOR_SAFETY_ESCALATE_MINUTES:g}",
        "url": reverse("admin:operator_site_notification_changelist")
        + "?safety__exact=1&delivered_at__isempty=1",
    }


BLOCKED_DAYS = 7  # how far back the dashboard lists what the gate blocked


def _blocked(now: Any) -> dict[str, Any]:
    """Intents the gate denied in the last week: the count and the latest few, each with its reason."""
    recent = Intent.objects.filter(
        status=IntentStatus.BLOCKED, created_at__gte=now - timedelta(days=BLOCKED_DAYS)
    ).order_by("-created_at", "-id")
    return {
        "count": recent.count(),
        "latest": list(recent[:3]),
        "days": BLOCKED_DAYS,
        "url": reverse("admin:intents_intent_changelist") + "?status__exact=blocked",
    }


def review_summary() -> dict[str, Any]:
    pending = Intent.objects.filter(status=IntentStatus.PENDING_APPROVAL)
    oldest = pending.order_by("created_at", "id").first()
    safety = Notification.objects.filter(safety=True, acknowledged_at__isnull=True)
    latest_safety = safety.order_by("-id").first()
    running = Run.objects.filter(status=Run.Status.RUNNING).select_related("holder").first()
    last_run = Run.objects.exclude(status=Run.Status.RUNNING).order_by("-started_at").first()
    today = timezone.localdate()
    day = find_day(today)
    now = timezone.now()
    return {
        "approvals": {
            "count": pending.count(),
            "oldest": oldest,
            "oldest_age": (now - oldest.created_at) if oldest else None,
            "url": reverse("admin:intents_intent_changelist") + "?status__exact=pending_approval",
        },
        "safety": {
            "count": safety.count(),
            "latest": latest_safety,
            "url": reverse("admin:operator_site_notification_changelist")
            + "?safety__exact=1&acknowledged_at__isnull=True",
        },
        "undelivered": _undelivered(now),
        "blocked": _blocked(now),
        "world_model": _latest_version(WorldModelVersion, "beliefs_worldmodelversion"),
        "goal_model": _latest_version(GoalModelVersion, "goals_goalmodelversion"),
        "run": {
            "running": running,
            "heartbeat_age": (now - running.last_heartbeat_at) if running else None,
            "last": last_run,
            "url": reverse("admin:runs_run_changelist"),
        },
        "day": {"date": today, "day": day, "url": reverse("admin:runs_operatorday_changelist")},
    }
