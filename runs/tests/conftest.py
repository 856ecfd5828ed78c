"""Fixtures of the runs app's tests (the shared ones — principals, MCP clients — come from
tests/fixtures.py through tests/plugin.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.utils import timezone

from tests.fixtures import Holder


@pytest.fixture
def relief(make_principal: Callable[..., Holder]) -> Holder:
    """A second agent: the one that takes over a stalled holder's run."""
    return make_principal("relief", kind="agent")


@pytest.fixture
def t0() -> datetime:
    """A fixed instant the tests move forward from (services take `now` explicitly)."""
    return timezone.now().replace(microsecond=0)


@pytest.fixture
def row_of() -> Callable[[Any], dict[str, Any]]:
    """Every column of a row, read fresh from the database: compare before/after to prove that a
    refused write changed nothing."""

    def read(obj: Any) -> dict[str, Any]:
        return type(obj).objects.filter(pk=obj.pk).values().get()

    return read
