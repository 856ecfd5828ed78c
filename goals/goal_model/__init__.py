"""The goal model: the person's goals, priorities and projects, changed only through one lineage
and, for goals and priorities, only on the person's word. The rules are in
docs/goals-and-board.md; callers import from here."""

from goals.goal_model.kinds import (
    GOAL,
    MAX_CHANGES,
    PRIORITY,
    PROJECT,
    SCOPE,
    ItemKind,
    entity_of,
    is_high_stakes,
    split_entity,
)
from goals.goal_model.reading import (
    goal_dict,
    goal_model_snapshot,
    ordered_priorities,
    ordered_priorities_query,
    pending_notices,
    priority_dicts,
    project_dict,
    project_list,
    project_list_query,
    ranked_goal_dicts,
    ranked_goals,
    ranked_goals_query,
    resolve_link,
)
from goals.goal_model.state import GOAL_MODEL, current_version, image_of, verify_consistency
from goals.goal_model.versioning import (
    REVERTER,
    VERSIONED,
)
from goals.goal_model.writing import apply_goal_change, reconcile_goal_model

__all__ = [
    "GOAL",
    "GOAL_MODEL",
    "MAX_CHANGES",
    "PRIORITY",
    "PROJECT",
    "REVERTER",
    "SCOPE",
    "VERSIONED",
    "ItemKind",
    "apply_goal_change",
    "current_version",
    "entity_of",
    "goal_dict",
    "goal_model_snapshot",
    "image_of",
    "is_high_stakes",
    "ordered_priorities",
    "ordered_priorities_query",
    "pending_notices",
    "priority_dicts",
    "project_dict",
    "project_list",
    "project_list_query",
    "ranked_goal_dicts",
    "ranked_goals",
    "ranked_goals_query",
    "reconcile_goal_model",
    "resolve_link",
    "split_entity",
    "verify_consistency",
]
