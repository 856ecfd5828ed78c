"""Fixtures of the intent-path tests (the shared ones — principals, MCP clients — come from
tests/fixtures.py through tests/plugin.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from intents.lifecycle import ActionInput, record_intent
from intents.models import Intent
from tests.fixtures import Holder

SEED_ACTION = {"type": "spend", "title": "Annual plan renewal", "amount_cents": 4900}
SEED_REASON = (
    "Spending money, paid subscriptions, purchases, and paid vendor commitments require human approval "
    "before execution."
)


@pytest.fixture
def helper(make_principal: Callable[..., Holder], django_user_model: Any) -> Any:
    """A staff login (superuser, even) that is NOT linked to a human principal: it may look, never decide."""
    return django_user_model.objects.create_user(
        "helper", password="pw-helper-123", is_staff=True, is_superuser=True
    )


@pytest.fixture
def record(django_capture_on_commit_callbacks: Any) -> Callable[..., tuple[Intent, bool]]:
    """Record an intent the way the dispatcher does (one transaction), running the after-commit
    delivery of its notice (tests run inside a transaction that never commits)."""

    def run(principal: Any, now: datetime | None = None, **action: Any) -> tuple[Intent, bool]:
        principal = getattr(principal, "principal", principal)
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
            return record_intent(
                principal=principal, action=ActionInput(**{**SEED_ACTION, **action}), now=now
            )

    return run


@pytest.fixture
def t0() -> datetime:
    return timezone.now().replace(microsecond=0)
