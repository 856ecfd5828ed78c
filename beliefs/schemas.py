"""The shape of a world-model change, as `operator_update_world_model` takes it and a
`world_model_change` proposal carries it (one schema for both)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from beliefs.services import MAX_KEY_CHARS, MAX_VALUE_CHARS
from operator_site.display import Identifier

BeliefKind = Literal[
    "identity", "goal", "behavior_policy", "constraint", "preference", "note", "project", "risk"
]


class BeliefChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    op: Literal["add", "update", "retire"] = Field(
        description="add a new belief, update an active one (value and/or confidence), or retire one."
    )
    kind: BeliefKind = Field(description="The belief's kind; high-stakes kinds need confirmation evidence.")
    key: Identifier = Field(
        min_length=1,
        max_length=MAX_KEY_CHARS,
        description="Unique among active beliefs of its kind, e.g. name, home_city, diet.",
    )
    value: str | None = Field(
        None, max_length=MAX_VALUE_CHARS, description="Required to add; optional to update."
    )
    confidence: float | None = Field(None, ge=0, le=1, description="0..1, optional.")
