"""Fixtures and the scorecard of the security suite.

Every check records its figure with the `scorecard` fixture: how many cases it tried, and how many
got past (bypasses). The figures are printed at the end of the run and written to
`$OPERATOR_DATA_DIR/security-scorecard-<database>.json`, which is what `docs/security.md` quotes.
A check records its figure BEFORE asserting, so a failing run still shows what was found.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from hypothesis.configuration import set_hypothesis_home_dir

from operator_site import powers
from tests.fixtures import ROOT, Holder

# Hypothesis keeps its caches in the data folder, not in the work tree.
set_hypothesis_home_dir(str(Path(os.environ.get("OPERATOR_DATA_DIR", ROOT / "var")) / "hypothesis"))

_FIGURES: dict[str, dict[str, Any]] = {}
_LOCK = threading.Lock()

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
        with _LOCK:
            _FIGURES[f"{check:02d} {request.node.name}"] = {
                "check": check,
                "title": title,
                "test": request.node.nodeid,
                "cases": cases,
                "bypasses": bypasses,
                **detail,
            }

    return record


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FIGURES:
        return
    write = terminalreporter.write_line
    terminalreporter.section("security scorecard")
    total_cases = total_bypasses = findings = 0
    for key in sorted(_FIGURES):
        f = _FIGURES[key]
        if f["title"].startswith("finding"):  # a known weakness, tracked by a strict xfail
            findings += f["bypasses"]
        else:
            total_cases += f["cases"]
            total_bypasses += f["bypasses"]
        write(f"check {f['check']:>2}  cases {f['cases']:>6}  bypasses {f['bypasses']:>3}  {f['title']}")
    write(f"total     cases {total_cases:>6}  bypasses {total_bypasses:>3}  (open findings: {findings})")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _FIGURES:
        return
    try:
        vendor = connection.vendor
    except Exception:  # the database may already be gone; the figures are what matter
        vendor = "unknown"
    out = settings.DATA_DIR / f"security-scorecard-{vendor}.json"
    out.write_text(json.dumps({"database": vendor, "figures": _FIGURES}, indent=2, sort_keys=True) + "\n")


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
