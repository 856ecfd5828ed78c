"""The shape of a goal-model change, as `operator_reconcile_goal_model` takes it and a
`goal_model_change` proposal carries it (one schema for both)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt


class GoalModelChangeItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entity: Literal["goal", "priority", "project"] = Field(description="What the change is about.")
    op: Literal["add", "update", "pause", "resume", "mark_under_review", "remove", "rerank", "move"] = Field(
        description="goal: add, update, pause, resume, mark_under_review, remove, rerank. priority: add, "
        "update, move, remove. project: add, update, remove."
    )
    target: StrictInt | str | None = Field(
        None,
        description="Not for add: the item's id, or its exact title (a priority's name) matching exactly "
        "one item.",
    )
    fields: dict[str, Any] = Field(
        default_factory=dict,
        description="goal: title, detail (add/update), importance (add/rerank). priority: name, detail "
        "(add/update), position (add/move). project: title, detail, status (active|paused|done), goal "
        "(id or title; null unlinks) for add/update.",
    )
