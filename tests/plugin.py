"""Shared pytest set-up, loaded for every test in the tree (`-p tests.plugin` in pyproject.toml)."""

from __future__ import annotations

import os

# Tests never need a real secret; a fixed one keeps runs reproducible.
os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production")
# Tool calls run on worker threads; closing their connections after each call keeps the test
# database droppable at the end. Persistent connections are exercised by the live-server tests.
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "0")
# Deliver notices in the committing thread, so a test sees the delivery it caused.
os.environ.setdefault("OPERATOR_DELIVERY", "sync")

from tests.fixtures import *  # noqa: F403
