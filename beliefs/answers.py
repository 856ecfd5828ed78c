"""The declared shapes of the beliefs app's answers (checked against the real tools by
tests/test_answer_shapes.py, so a shape and the function that builds it cannot drift apart)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict


class SourceAnswer(TypedDict):
    principal: str
    kind: str


class InstructionAnswer(TypedDict):
    id: int
    kind: str
    text: str
    channel: str | None
    refs: Any
    recorded_by: str
    human_authored: bool
    created: datetime


class BeliefAnswer(TypedDict):
    key: str
    value: str
    confidence: float | None
    status: str
    stakes: str
    source: SourceAnswer
    version: int
    evidence: dict[str, Any] | None
