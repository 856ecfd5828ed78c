"""Shared pytest set-up, loaded for every test in the tree (`-p tests.plugin` in pyproject.toml)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests never need a real secret; a fixed one keeps runs reproducible.
os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production")
# Tool calls run on worker threads; closing their connections after each call keeps the test
# database droppable at the end. Persistent connections are exercised by the live-server tests.
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "0")
# Deliver notices in the committing thread, so a test sees the delivery it caused.
os.environ.setdefault("OPERATOR_DELIVERY", "sync")

from tests.fixtures import *  # noqa: F403

# The fast inner loop is `pytest -m "not slow"` (README, "Contributing"). Slow means a real socket,
# a browser, a Node.js peer, a PostgreSQL race, a fuzzer or a subprocess server: marked here from
# what a test already declares or where it lives, so no test has to remember the mark.
SLOW_MARKERS = frozenset({"socket", "postgres"})
SLOW_FILES = frozenset(
    {
        "tests/browser",
        "tests/interop",
        "tests/security/test_02_fuzz.py",
        "tests/security/test_10_races.py",
        "tests/security/test_11_faults.py",
        "tests/security/test_15_deadlines.py",
        "tests/security/test_18_token_rotation.py",
        "tests/security/test_19_admin_crawl.py",
        "tests/test_mcp_clients.py",
        "tests/test_serving.py",
        "tests/test_access_log.py",
        "tests/test_deploy_units.py",
        "beliefs/tests/test_evidence_property.py",
    }
)
_ROOT = Path(__file__).resolve().parents[1]


def _is_slow(item: pytest.Item) -> bool:
    if any(item.get_closest_marker(name) for name in SLOW_MARKERS):
        return True
    relative = Path(str(item.path)).resolve().relative_to(_ROOT).as_posix()
    return any(relative == f or relative.startswith(f + "/") for f in SLOW_FILES) or "races" in relative


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
