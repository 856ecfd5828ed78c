"""operator_context_packet: the orientation packet, bounded, in a fixed number of statements."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.db.models import Case, F, IntegerField, Q, QuerySet, Value, When
from django.utils import timezone

from beliefs.models import HIGH_STAKES_KINDS, LOW_STAKES_KINDS, Belief, WorldModelVersion
from beliefs.services import belief_dict, image_of
from goals.goal_model import (
    ordered_priorities_query,
    priority_dicts,
    project_dict,
    project_list_query,
    ranked_goal_dicts,
    ranked_goals_query,
)
from goals.models import Goal, GoalModelVersion, Priority, Project, Task
from goals.services import task_dict
from intents.answers import decision_dict, directive_dict, intent_dict
from intents.models import OPEN_DECISION_STATUSES, Decision, Directive, Intent, IntentStatus
from operator_site import sql
from operator_site.cross_domain.reads.common import (
    COUNT_CAP,
    LIMITS,
    LIST_CLIP,
    TEXT_CLIP,
    FigureQueries,
    PacketLimits,
    check_date,
    clip,
    counted,
    day_bounds,
    fenced,
)
from operator_site.models import Notification
from operator_site.proposals import kind_of
from operator_site.sql import Rows
from runs.answers import day_dict, progress_dict, run_status_of
from runs.lock import last_finished_query, running_run_query
from runs.models import Observation, OperatorDay, ProgressEntry

PRIORITY_RANK = Case(
    When(priority="urgent", then=Value(4)),
    When(priority="high", then=Value(3)),
    When(priority="normal", then=Value(2)),
    default=Value(1),
    output_field=IntegerField(),
)


def _open_tasks() -> QuerySet:
    """Open tasks, newest update first: the condition and the order of the partial index
    `task_open_recent`, so the database reads the open board, not the history of finished tasks."""
    return Task.objects.filter(sql.InConstants(F("status"), list(Task.OPEN_STATUSES))).order_by("-updated_at")


def _board_window(task_window: int) -> QuerySet:
    """The ranking of the top `task_window` open tasks by priority, then recency, among the
    COUNT_CAP most recently updated ones (ids and lanes only)."""
    recent = _open_tasks().values("id")[:COUNT_CAP]
    return (
        Task.objects.filter(id__in=recent)
        .annotate(rank=PRIORITY_RANK)
        .order_by("-rank", "-updated_at", "-id")
        .values_list("id", "lane")[:task_window]
    )


def _board(limits: PacketLimits) -> tuple[list[tuple[str, list[int]]], int, bool]:
    """The open tasks the packet shows, by lane: (lanes with the ids of their tasks, lanes left out,
    whether that number is a lower bound). One query, bounded by a cap, not by the board or its
    history (`_board_window`); the rows of the tasks shown come with the packet's other lists."""
    window = sql.tuples(_board_window, limits.task_window)
    lanes: dict[str, list[int]] = {}
    for task_id, lane in window:
        lanes.setdefault(lane, []).append(task_id)
    shown = [(lane, ids[: limits.tasks_per_lane]) for lane, ids in list(lanes.items())[: limits.lanes]]
    return shown, max(0, len(lanes) - len(shown)), len(window) >= limits.task_window


# What the packet's answers read of a related row (`task_dict`, `progress_dict`, …): `.only()` keeps
# the database from building JSON of every column of every row it lists (a principal's eleven
# columns for its name). A field read but not named here would cost a query per row, which
# tests/test_reads.py's fixed query count catches.
_NAME = ("name",)
_LINK = ("title", "status", "present")  # goals.services._linked; a priority has no link here


def _related(relation: str, fields: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{relation}__{field}" for field in fields)


def _shown_tasks(ids: tuple[int, ...]) -> QuerySet:
    """The rows of the tasks shown (`ids`: placeholders in `sql.read_many`, bound on every call)."""
    return (
        Task.objects.filter(id__in=list(ids))
        .select_related("updated_by", "goal", "project")
        .only(
            *("key", "title", "status", "priority", "owner", "blocker", "detail", "lane", "updated_at"),
            *("goal", "project", "updated_by"),
            *_related("updated_by", _NAME),
            *_related("goal", _LINK),
            *_related("project", _LINK),
        )
        .annotate(rank=PRIORITY_RANK)
        .order_by()
    )


# --- the goals section -------------------------------------------------------------------------------
def is_proposal(intent: Intent) -> bool:
    return kind_of(intent.action_type) is not None


def _board_figures(lanes: tuple[str, ...]) -> FigureQueries:
    """The open board's total, its counts by status and the counts of the lanes shown: one scan of
    the open board (`sql.Breakdown`) up to the cap."""
    parts = {f"tasks_{status}": Q(status=status) for status in Task.OPEN_STATUSES}
    parts |= {f"lane:{lane}": Q(lane=lane) for lane in lanes}
    return {"tasks_open": sql.Breakdown(_open_tasks(), parts)}, {}


def _board_figures_for(lanes: list[str]) -> tuple[Any, tuple[tuple[str, ...]]]:
    """The board's fixed figures for the lanes shown: compiled once per connection and set of
    lanes (~3-5 ms each; the lanes are bound values, so the statement's text depends only on
    their number), whatever order the board shows them in."""
    return _board_figures, (tuple(sorted(lanes)),)


def _packet_figures(end: datetime) -> FigureQueries:
    """The packet's counts and maxima whose conditions are fixed (the record's end changes once a
    day): compiled once per connection and day, read in the packet's one figures query."""
    counts = {
        "goals": Goal.objects.filter(importance__isnull=False, status=Goal.Status.ACTIVE),
        "goals_paused": Goal.objects.filter(status=Goal.Status.PAUSED),
        "goals_under_review": Goal.objects.filter(status=Goal.Status.UNDER_REVIEW),
        "priorities": Priority.objects.filter(position__isnull=False),
        "projects": Project.objects.filter(status=Project.Status.ACTIVE),
        "decisions": Decision.objects.filter(status__in=OPEN_DECISION_STATUSES),
        "approvals": Intent.objects.filter(status=IntentStatus.PENDING_APPROVAL),
        "high_stakes_beliefs": Belief.objects.filter(status=Belief.Status.ACTIVE, kind__in=HIGH_STAKES_KINDS),
        "low_stakes_beliefs": Belief.objects.filter(status=Belief.Status.ACTIVE, kind__in=LOW_STAKES_KINDS),
        "progress": ProgressEntry.objects.filter(created_at__lt=end),
        "observations": Observation.objects.filter(created_at__lt=end),
        "notifications_held": Notification.objects.filter(state=Notification.State.HELD),
        "safety_unacknowledged": Notification.objects.filter(safety=True, acknowledged_at__isnull=True),
    }
    maxima = {
        "goal_model_version": GoalModelVersion.objects.order_by("-number").values("number"),
        "world_model_version": WorldModelVersion.objects.order_by("-number").values("number"),
    }
    return counts, maxima


def _day_row(day: date) -> QuerySet:
    return OperatorDay.objects.filter(date=day)


def _open_decisions(limit: int) -> QuerySet:
    fields = [f.name for f in Decision._meta.concrete_fields if f.name != "decided_by"]
    return (
        Decision.objects.filter(status__in=OPEN_DECISION_STATUSES)
        .select_related("decided_by")
        .only(*fields, "decided_by", *_related("decided_by", _NAME))
        .order_by("-status", "created_at", "id")[:limit]
    )


def _pending_approvals(limit: int) -> QuerySet:
    return Intent.objects.filter(status=IntentStatus.PENDING_APPROVAL).order_by("created_at", "id")[:limit]


def _decisions_of_pending_approvals(limit: int) -> QuerySet:
    """Each shown intent's decisions: what `intent_dict` reads of its first (id, status, response)."""
    shown = _pending_approvals(limit).values("id")
    return Decision.objects.filter(intent_id__in=shown).only("intent", "status", "response").order_by("id")


def _directives_in_force(now: datetime) -> QuerySet:
    return Directive.objects.active(now).order_by("expires_at", "id")


def _high_stakes_beliefs(limit: int) -> QuerySet:
    return Belief.objects.filter(status=Belief.Status.ACTIVE, kind__in=HIGH_STAKES_KINDS).order_by(
        "kind", "key"
    )[:limit]


def _low_stakes_beliefs(limit: int) -> QuerySet:
    return Belief.objects.filter(status=Belief.Status.ACTIVE, kind__in=LOW_STAKES_KINDS).order_by(
        "-updated_at", "-id"
    )[:limit]


def _recent_progress(end: datetime, limit: int) -> QuerySet:
    return (
        ProgressEntry.objects.filter(created_at__lt=end)
        .select_related("day", "recorded_by")
        .only(
            *("summary", "outcome", "tried", "failed", "run", "tick", "created_at"),
            *("day__date", "recorded_by__name"),
        )
        .order_by("-id")[:limit]
    )


def _recent_observations(end: datetime, limit: int) -> QuerySet:
    return (
        Observation.objects.filter(created_at__lt=end)
        .select_related("day", "recorded_by")
        .only(
            *("kind", "summary", "source", "data", "created_at"),
            *("day__date", "recorded_by__name"),
        )
        .order_by("-id")[:limit]
    )


def _goals_packet(lists: dict[str, list[dict[str, Any]]], figures: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "goal_model_version": figures["goal_model_version"] or 0,
        "ranked_by": "importance (1 = most important); active goals only",
        "active": {
            "items": [clip(g) for g in lists["goals"]],
            **counted(figures["goals"], len(lists["goals"])),
        },
        "paused": min(figures["goals_paused"], COUNT_CAP),
        "under_review": min(figures["goals_under_review"], COUNT_CAP),
        "priorities": {
            "items": [clip(p) for p in lists["priorities"]],
            **counted(figures["priorities"], len(lists["priorities"])),
        },
        "projects": {
            "items": [clip(p) for p in lists["projects"]],
            **counted(figures["projects"], len(lists["projects"])),
        },
    }


# --- the orientation packet --------------------------------------------------------------------------
def context_packet(
    *, day: date | None = None, now: datetime | None = None, limits: PacketLimits = LIMITS
) -> dict[str, Any]:
    """The orientation packet an agent reads first (see the module docstring for its bounds).

    Current state (goals, tasks, decisions, approvals, directives, beliefs, runs, notifications) is
    as of now; the record (progress, observations) is the most recent up to the end of `day`.
    """
    now = now or timezone.now()
    day = check_date(day, now)
    _, end = day_bounds(day)

    # Open tasks: the top of the board by priority then recency, cut into lanes (one query).
    shown_lanes, lanes_left_out, lanes_left_out_is_lower_bound = _board(limits)
    shown_ids = tuple(i for _, ids in shown_lanes for i in ids)

    # Everything else from one snapshot (sql.read_many: ONE statement on PostgreSQL, a statement per
    # list on SQLite): each list becomes one JSON array in the database, and every count of the
    # packet is a capped scalar subquery.
    lists = {
        "day": Rows(_day_row, (day,)),
        "goals": Rows(ranked_goals_query, (("active",), limits.goals)),
        "priorities": Rows(ordered_priorities_query, (limits.priorities,)),
        "projects": Rows(project_list_query, (("active",), None, limits.projects)),
        "decisions": Rows(_open_decisions, (limits.decisions,)),
        "approvals": Rows(_pending_approvals, (limits.approvals,)),
        "approval_decisions": Rows(_decisions_of_pending_approvals, (limits.approvals,)),
        "directives": Rows(_directives_in_force, values={"now": now}),
        "high": Rows(_high_stakes_beliefs, (limits.high_stakes_beliefs,)),
        "low": Rows(_low_stakes_beliefs, (limits.low_stakes_beliefs,)),
        "progress": Rows(_recent_progress, (end, limits.progress)),
        "observations": Rows(_recent_observations, (end, limits.observations)),
        "running_run": Rows(running_run_query),
        "last_finished_run": Rows(last_finished_query),
    }
    if shown_ids:  # an empty board asks nothing more
        # One shape whatever the number shown, so one plan (and one prepared statement on
        # PostgreSQL): the ids padded to the most the lanes can show by repeating the last one
        # (`IN` reads a row once however often its id is listed).
        most = limits.lanes * limits.tasks_per_lane
        padded = shown_ids + shown_ids[-1:] * (most - len(shown_ids))
        lists["tasks"] = Rows(_shown_tasks, values={"ids": padded})
    found, figures = sql.read_many(
        lists,
        fixed_figures=[
            (_packet_figures, (end,)),
            _board_figures_for([lane for lane, _ in shown_lanes]),
        ],
        cap=COUNT_CAP,
    )
    day_row = found["day"][0] if found["day"] else None
    goal_lists = {
        "goals": ranked_goal_dicts(found["goals"]),
        "priorities": priority_dicts(found["priorities"]),
        "projects": [project_dict(p) for p in found["projects"]],
    }
    decisions, approvals, directives = found["decisions"], found["approvals"], found["directives"]
    first_decision: dict[int, Decision] = {}
    for decision in found["approval_decisions"]:  # ordered by id: the first is each intent's own
        first_decision.setdefault(decision.intent_id, decision)
    for intent in approvals:
        intent.opened_decision = first_decision.get(intent.id)
    high, low = found["high"], found["low"]
    progress, observations = found["progress"], found["observations"]
    running = found["running_run"][0] if found["running_run"] else None
    last = found["last_finished_run"][0] if found["last_finished_run"] else None
    run_status = run_status_of(running, last, now)
    by_id = {task.id: task for task in found.get("tasks", ())}

    shown_tasks = len(shown_ids)
    lane_sections = []
    for lane, ids in shown_lanes:
        kept = [by_id[i] for i in ids if i in by_id]
        lane_sections.append(
            {
                "lane": lane or None,
                "tasks": [clip(task_dict(t) | {"priority_rank": t.rank}) for t in kept],
                **counted(figures[f"lane:{lane}"], len(kept)),
            }
        )

    return {
        "ok": True,
        "date": day,
        "generated": now,
        "time_zone": settings.OPERATOR_TIME_ZONE,
        "day": day_dict(day_row) if day_row else {"date": day, "state": "not_opened"},
        "goals": _goals_packet(goal_lists, figures),
        "tasks": {
            "by_status": {s: figures[f"tasks_{s}"] for s in Task.OPEN_STATUSES},
            "ranked_by": "priority (urgent, high, normal, low), then most recently updated",
            "lanes": lane_sections,
            "lanes_left_out": lanes_left_out,
            "lanes_left_out_is_lower_bound": lanes_left_out_is_lower_bound,
            **counted(figures["tasks_open"], shown_tasks),
        },
        "pending_decisions": {
            "items": [clip(decision_dict(d)) for d in decisions],
            **counted(figures["decisions"], len(decisions)),
        },
        "awaiting_approval": {
            "items": [clip(intent_dict(i)) for i in approvals],
            **counted(figures["approvals"], len(approvals)),
            # Changes to the person's model that wait for their approval (among the items shown):
            # do not propose them again, and do not write them by another route meanwhile.
            "proposals": [
                {"id": i.id, "type": i.action_type, "title": i.title} for i in approvals if is_proposal(i)
            ],
        },
        "directives": {
            "items": [clip(directive_dict(d, now)) for d in directives[: limits.directives]],
            **counted(len(directives), min(len(directives), limits.directives)),
        },
        "beliefs": {
            "world_model_version": figures["world_model_version"] or 0,
            "high_stakes": {
                "items": [clip(belief_dict(image_of(b)) | {"kind": b.kind}, 600) for b in high],
                **counted(figures["high_stakes_beliefs"], len(high)),
            },
            "recent_low_stakes": {
                "items": [clip(belief_dict(image_of(b)) | {"kind": b.kind}) for b in low],
                **counted(figures["low_stakes_beliefs"], len(low)),
            },
        },
        "recent_progress": {
            "items": [clip(progress_dict(p)) for p in progress],
            **counted(figures["progress"], len(progress)),
        },
        "observations": fenced(observations, figures["observations"]),
        "runs": run_status,
        "notifications": {
            "held": min(figures["notifications_held"], COUNT_CAP),
            "held_is_lower_bound": figures["notifications_held"] > COUNT_CAP,
            "safety_unacknowledged": min(figures["safety_unacknowledged"], COUNT_CAP),
            "safety_unacknowledged_is_lower_bound": figures["safety_unacknowledged"] > COUNT_CAP,
        },
        "bounds": {
            "text_clip_chars": TEXT_CLIP,
            "list_clip_items": LIST_CLIP,
            "count_cap": COUNT_CAP,
            "note": "Every list is capped and says how many it left out; long texts are clipped. "
            "operator_state pages through the full rows.",
        },
    }
