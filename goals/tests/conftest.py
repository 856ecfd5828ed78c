"""Fixtures of the goal-model tests: what the person said (instruction rows, the only evidence), the
goal tools called through the real dispatcher (validation, one transaction with its audit row, the
envelope; `beliefs.tests.helpers.run_tool`), and a snapshot of every goal-model row."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from beliefs import services as beliefs_services
from beliefs.tests.helpers import run_tool
from goals.models import Goal
from goals.tests.helpers import APPLY
from operator_site.models import Instruction


@pytest.fixture
def tool() -> Callable[..., dict[str, Any]]:
    return run_tool


@pytest.fixture
def say(owner: Any) -> Callable[..., Instruction]:
    """Record an instruction as the owner (a human) or as `by` (a holder or a principal)."""

    def record(text: str, by: Any = None, hours_ago: float = 0) -> Instruction:
        holder = by or owner
        principal = holder.principal if hasattr(holder, "principal") else holder
        return beliefs_services.record_instruction(
            principal=principal, text=text, channel="chat", now=timezone.now() - timedelta(hours=hours_ago)
        )

    return record


@pytest.fixture
def goal_change(owner: Any, say: Callable[..., Instruction]) -> Callable[..., dict[str, Any]]:
    """`operator_apply_goal_change` with fresh evidence: the person first says a sentence naming the
    goal, and the call quotes it (each instruction authorises a change of a given goal once)."""
    notes = itertools.count(1)

    def change(by: Any = None, *, action: str, about: str | None = None, **arguments: Any) -> dict[str, Any]:
        principal = (by or owner).principal if hasattr(by or owner, "principal") else by
        name = about or arguments.get("title") or arguments.get("goal")
        if isinstance(name, int):
            name = Goal.objects.get(pk=name).title
        detail = arguments.get("detail")
        about_detail = f" ({detail})" if detail else ""
        rank = arguments.get("importance")
        at_rank = f" at position {rank}" if rank is not None else ""  # a rank change names its rank
        verb = action.replace("_", " ")
        text = f"Yes please {verb} the goal {name}{at_rank}{about_detail} now, note {next(notes)}."
        say(text)
        return run_tool(
            principal,
            APPLY,
            {"action": action, "confirmedInConversation": True, "confirmationQuote": text, **arguments},
        )

    return change


@pytest.fixture
def add_goal(goal_change: Callable[..., dict[str, Any]]) -> Callable[..., int]:
    """Add a goal as the person; returns its id."""

    def add(title: str, **arguments: Any) -> int:
        made = goal_change(action="add", title=title, **arguments)
        assert made["ok"] is True, made
        return made["goal"]["id"]

    return add


@pytest.fixture
def anyio_backend() -> str:
    """The face runs on asyncio. (With trio installed, anyio's plugin would also parametrize every
    async test over trio, whose loop the PostgreSQL database threads cannot hand results back to.)"""
    return "asyncio"
