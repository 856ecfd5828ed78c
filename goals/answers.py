"""The declared shapes of the goals app's answers (checked against the real tools by
tests/test_answer_shapes.py, so a shape and the function that builds it cannot drift apart)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from beliefs.answers import SourceAnswer


class LinkAnswer(TypedDict):
    """A task's (or project's) goal or project, briefly; "absent" when its addition was undone."""

    id: int
    title: str
    status: str


class TaskAnswer(TypedDict):
    id: int
    key: str
    title: str
    status: str
    priority: Any
    owner: str | None
    blocker: str | None
    detail: str | None
    lane: str | None
    goal: LinkAnswer | None
    project: LinkAnswer | None
    updated: datetime
    updated_by: str | None


class DecisionLogAnswer(TypedDict):
    id: int
    title: str
    decision: str
    rationale: str
    alternatives: Any
    context: str | None
    actor: str
    created: datetime
    hash: str


class GoalAnswer(TypedDict):
    id: int
    title: str
    detail: str | None
    status: str
    importance: int | None
    source: SourceAnswer
    version: int
    evidence: dict[str, Any] | None


class PriorityAnswer(TypedDict):
    id: int
    name: str
    detail: str | None
    position: int | None


class ProjectAnswer(TypedDict):
    id: int
    title: str
    detail: str | None
    status: str
    goal: LinkAnswer | None
    version: int
