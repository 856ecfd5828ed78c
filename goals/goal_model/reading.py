"""Reading the goal model: ranked goals, ordered priorities and projects (the orientation packet
reads the same queries), the whole snapshot, and the item a task links to."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db.models import F, QuerySet

from goals.answers import GoalAnswer, PriorityAnswer, ProjectAnswer
from goals.goal_model.kinds import GOAL, KINDS, ORDERED, PRIORITY, PROJECT, REMOVED, split_entity
from goals.goal_model.state import GOAL_MODEL, State, current_version, image_of, resolve
from goals.goal_model.versioning import VERSIONED
from goals.models import Goal, GoalModelItem, Priority, Project
from operator_site.lineage import Damage, Image, damaged_history
from operator_site.refusals import Refusal


# --- reading (the context packet, answers, the admin) ------------------------------------------------
def goal_image(goal_id: int) -> Image:
    row = Goal.everything.get(pk=goal_id)
    return {**image_of(GOAL, row), "importance": row.importance}


def goal_dict(image: Image) -> GoalAnswer:
    return {
        "id": image["id"],
        "title": image["title"],
        "detail": image["detail"] or None,
        "status": image["status"],
        "importance": image.get("importance"),
        "source": {"principal": image["source"]["name"], "kind": image["source"]["kind"]},
        "version": image["set_in_version"],
        "evidence": image.get("evidence"),
    }


def ranked_goals(*, statuses: Sequence[str] | None = ("active",), limit: int = 50) -> list[dict[str, Any]]:
    """Goals in order of importance (1 = most important), by default only the active ones; `statuses`
    None gives every ranked goal (active, paused, under review). Removed goals are never ranked.
    Each: id, title, detail, status, importance, source, version, evidence."""

    return ranked_goal_dicts(ranked_goals_query(None if statuses is None else tuple(statuses), limit))


def ranked_goals_query(statuses: tuple[str, ...] | None = ("active",), limit: int = 50) -> QuerySet[Goal]:
    """The rows of `ranked_goals` (also read by the orientation packet in its one statement)."""
    rows = Goal.objects.filter(importance__isnull=False).order_by("importance")
    if statuses is not None:
        rows = rows.filter(status__in=list(statuses))
    return rows[: max(0, limit)]


def ranked_goal_dicts(rows: Iterable[Goal]) -> list[GoalAnswer]:
    return [goal_dict({**image_of(GOAL, g), "importance": g.importance}) for g in rows]


def ordered_priorities(*, limit: int = 50) -> list[dict[str, Any]]:
    """The person's active priorities in order (position 1 first): id, name, detail, position."""
    return priority_dicts(ordered_priorities_query(limit))


def ordered_priorities_query(limit: int = 50) -> QuerySet[Priority]:
    return Priority.objects.filter(position__isnull=False).order_by("position")[: max(0, limit)]


def priority_dicts(rows: Iterable[Priority]) -> list[PriorityAnswer]:
    return [{"id": p.pk, "name": p.name, "detail": p.detail or None, "position": p.position} for p in rows]


def project_list(
    *, statuses: Sequence[str] | None = ("active",), goal: int | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """Projects (by default the active ones), each with its goal (id and title) if it has one,
    ordered by the importance of their goal (unlinked last), then title."""

    query = project_list_query(None if statuses is None else tuple(statuses), goal, limit)
    return [project_dict(p) for p in query]


def project_list_query(
    statuses: tuple[str, ...] | None = ("active",), goal: int | None = None, limit: int = 100
) -> QuerySet[Project]:
    """The rows of `project_list` (also read by the orientation packet in its one statement)."""
    rows = Project.objects.select_related("goal")
    if statuses is not None:
        rows = rows.filter(status__in=list(statuses))
    if goal is not None:
        rows = rows.filter(goal_id=goal)
    return rows.order_by(F("goal__importance").asc(nulls_last=True), "title", "id")[: max(0, limit)]


def project_dict(project: Project) -> ProjectAnswer:
    goal = project.goal
    return {
        "id": project.pk,
        "title": project.title,
        "detail": project.detail or None,
        "status": project.status,
        "goal": {"id": goal.pk, "title": goal.title, "status": goal.status if goal.present else "absent"}
        if goal
        else None,
        "version": project.set_in_version,
    }


def pending_notices(limit: int = 20) -> list[dict[str, Any]]:
    return VERSIONED.pending_notices(limit)


def goal_model_snapshot(*, as_of_version: int | None = None, include_removed: bool = False) -> dict[str, Any]:
    """The whole goal model: version, goals in ranking order (then removed ones if asked), priorities
    in order, projects; pending notices. `as_of_version` shows it as it stood then."""
    current = current_version()
    if as_of_version is None:
        state = State.load()
    else:
        VERSIONED.check_as_of(as_of_version, current)
        images = GOAL_MODEL.state_as_of(as_of_version)  # refuses if an image it needs is damaged
        state = State({name: {} for name in KINDS}, {GOAL.name: [], PRIORITY.name: []})
        for entity, image in images.items():
            if entity in ORDERED:
                state.orders[ORDERED[entity].name] = list(image["order"])
            else:
                kind, item_id = split_entity(entity)
                state.items[kind.name][item_id] = image
        _refuse_dangling_order(state, as_of_version)
    goal_order = state.orders[GOAL.name]
    goals = [
        goal_dict({**state.items[GOAL.name][i], "importance": rank})
        for rank, i in enumerate(goal_order, start=1)
    ]
    if include_removed:
        goals += [
            goal_dict({**img, "importance": None})
            for i, img in sorted(state.items[GOAL.name].items())
            if img["status"] == REMOVED
        ]
    priorities = [
        {
            **{k: state.items[PRIORITY.name][i][k] for k in ("id", "name", "detail", "status")},
            "position": rank,
        }
        for rank, i in enumerate(state.orders[PRIORITY.name], start=1)
    ]
    titles = {i: img["title"] for i, img in state.items[GOAL.name].items()}
    projects = [
        {
            "id": img["id"],
            "title": img["title"],
            "detail": img["detail"] or None,
            "status": img["status"],
            "goal": {"id": img["goal"], "title": titles.get(img["goal"])} if img.get("goal") else None,
        }
        for _, img in sorted(state.items[PROJECT.name].items())
        if include_removed or img["status"] != REMOVED
    ]
    return {
        "ok": True,
        "version": current,
        "as_of_version": as_of_version,
        "goals": goals,
        "priorities": priorities,
        "projects": projects,
        "pending_notices": pending_notices(),
    }


def _refuse_dangling_order(state: State, as_of_version: int) -> None:
    """Every id an order held at a version names an item present then: the lineage writes an order
    and its items in the same version. An order naming another id was edited by hand below the door;
    the ranking as of that version cannot be shown, so the read is refused (`damaged_row`) naming
    the order's row, rather than failing or showing a ranking with a hole."""
    for entity, kind in ORDERED.items():
        missing = [i for i in state.orders[kind.name] if i not in state.items[kind.name]]
        if not missing:
            continue
        rows = GOAL_MODEL.rows_as_of(as_of_version, [entity])
        why = f"its after image's order names {kind.name}(s) {', '.join(f'#{i}' for i in missing[:5])}"
        why += f", absent at version {as_of_version}"
        damages = [Damage(row.pk, row.version_id, row.entity, why) for row in rows]
        raise damaged_history(
            GOAL_MODEL.label, damages, f"its state as of version {as_of_version} cannot be rebuilt"
        )


# --- links from the board ------------------------------------------------------------------------------
def resolve_link(kind_name: str, target: int | str) -> GoalModelItem:
    """The goal or project a task links to: by id, or by a title matching exactly one item (live
    ones first, as everywhere in the goal model). Refuses (`target_not_found`, `ambiguous_target`
    with candidates, `invalid_link` for a removed one) rather than guess."""
    kind = KINDS[kind_name]
    items = {row["id"]: row for row in kind.model.objects.values("id", kind.label, "status")}
    found = resolve(State({kind.name: items}, {}), kind, target)
    if found.failed:
        what = "matches several" if found.outcome == "ambiguous" else "matches no"
        raise Refusal(
            "ambiguous_target" if found.outcome == "ambiguous" else "target_not_found",
            f"{target!r} {what} {kind.name}s; link by id (see candidates). Nothing was written.",
            field=kind.name,
            target=target,
            candidates=found.candidates,
        )
    row = kind.model.objects.get(pk=found.id)
    if row.status == REMOVED:
        raise Refusal(
            "invalid_link",
            f"{kind.name} #{row.pk} “{getattr(row, kind.label)}” is removed; work cannot be linked to it.",
            field=kind.name,
            target=target,
        )
    return row
