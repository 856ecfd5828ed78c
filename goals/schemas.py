"""The shape of a goal-model change, as `operator_reconcile_goal_model` takes it and a
`goal_model_change` proposal carries it (one schema for both)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from operator_site.display import IdOrIdentifier, check_identifier


class GoalModelChangeItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entity: Literal["goal", "priority", "project"] = Field(description="What the change is about.")
    op: Literal["add", "update", "pause", "resume", "mark_under_review", "remove", "rerank", "move"] = Field(
        description="goal: add, update, pause, resume, mark_under_review, remove, rerank. priority: add, "
        "update, move, remove. project: add, update, remove."
    )
    target: IdOrIdentifier | None = Field(
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

    @field_validator("fields")
    @classmethod
    def _titles_are_identifiers(cls, fields: dict[str, Any]) -> dict[str, Any]:
        # Titles and names are what later changes target (and the goal link targets one now): they
        # refuse hidden characters at the door, like every identifier (operator_site.display).
        for name in ("title", "name", "goal"):
            value = fields.get(name)
            if isinstance(value, str):
                try:
                    check_identifier(value)
                except ValueError as exc:
                    raise ValueError(f"fields.{name} {exc}") from None
        return fields
