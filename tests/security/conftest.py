"""Fixtures and the scorecard of the security suite.

Every check records its figure with the `scorecard` fixture: how many cases it tried, and how many
got past (bypasses). The figures are printed at the end of the run and written to
`$OPERATOR_DATA_DIR/security-scorecard-<database>.json`, which is what `docs/security.md` quotes.
A check records its figure BEFORE asserting, so a failing run still shows what was found.
The figures are kept, printed and written by tests/scorecard.py (its hooks are in tests/plugin.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from operator_site import powers
from tests import scorecard as scorecard_figures
from tests.fixtures import ROOT, Holder

# Hypothesis keeps its caches in the data folder, not in the work tree.
set_hypothesis_home_dir(str(Path(os.environ.get("OPERATOR_DATA_DIR", ROOT / "var")) / "hypothesis"))

# The principal kinds of the permission matrix (check 5), each with the allowlist it is issued.
KINDS: dict[str, tuple[str, list[str] | None]] = {
    "owner": ("human", None),
    "other_human": ("human", None),
    "full_agent": ("agent", None),
    "morning_runner": ("agent", list(powers.MORNING_RUNNER_TOOLS)),
    "night_runner": ("agent", list(powers.NIGHT_RUNNER_TOOLS)),
    "onboarding": ("agent", list(powers.ONBOARDING_TOOLS)),
}


@dataclass
class Figure:
    check: int
    title: str
    cases: int
    bypasses: int
    detail: dict[str, Any]


@pytest.fixture
def scorecard(request: pytest.FixtureRequest) -> Callable[..., None]:
    """`scorecard(check, title, cases=N, bypasses=M, **detail)` — one figure per test."""

    def record(check: int, title: str, *, cases: int, bypasses: int, **detail: Any) -> None:
        scorecard_figures.record(
            f"{check:02d} {request.node.name}",
            {
                "check": check,
                "title": title,
                "test": request.node.nodeid,
                "cases": cases,
                "bypasses": bypasses,
                **detail,
            },
        )

    return record


# --- principals --------------------------------------------------------------------------------------------
@pytest.fixture
def principals(make_principal: Callable[..., Holder], django_user_model: Any) -> dict[str, Holder]:
    """One holder per principal kind of the permission matrix (the owner linked to a staff login)."""
    user = django_user_model.objects.create_user(
        "owner", password="pw-owner-123", is_staff=True, is_superuser=True
    )
    made = {}
    for name, (kind, tools) in KINDS.items():
        made[name] = make_principal(
            name.replace("_", "-"), kind=kind, tools=tools, user=user if name == "owner" else None
        )
    return made


@pytest.fixture
def no_rate_limit(settings: Any) -> None:
    """Checks that hammer one token (fuzzing, tables) are about their own subject, not the limit."""
    settings.OPERATOR_RATE_LIMIT = 0
