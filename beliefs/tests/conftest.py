"""Fixtures of the beliefs tests: recording what the person said, and calling the world-model tools
through the real dispatcher (one transaction, audit row, envelope) without an HTTP round trip."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from beliefs import services
from beliefs.tests.helpers import run_tool
from operator_site.models import Instruction


@pytest.fixture
def tool() -> Callable[..., dict[str, Any]]:
    return run_tool


@pytest.fixture
def say(owner: Any) -> Callable[..., Instruction]:
    """Record an instruction as the owner (a human) or as `by` (a holder or a principal)."""

    def record(text: str, by: Any = None, hours_ago: float = 0, kind: str = "instruction") -> Instruction:
        holder = by or owner
        principal = holder.principal if hasattr(holder, "principal") else holder
        return services.record_instruction(
            principal=principal,
            text=text,
            kind=kind,
            channel="chat",
            now=timezone.now() - timedelta(hours=hours_ago),
        )

    return record
