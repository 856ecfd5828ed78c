"""The security scorecard's figures (recorded by the `scorecard` fixture of tests/security), printed at
the end of the run and written to `$OPERATOR_DATA_DIR/security-scorecard-<database>.json`.

Its hooks live in tests/plugin.py, so they run in every process of a run: with pytest-xdist
(`-n 2`, the fast loop) each worker hands its figures to the controller, which prints and writes the
whole card once; without it the one process does both.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

FIGURES: dict[str, dict[str, Any]] = {}
LOCK = threading.Lock()
_WORKER_KEY = "security_scorecard"


def record(key: str, figure: dict[str, Any]) -> None:
    with LOCK:
        FIGURES[key] = figure


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workeroutput")


def hand_to_controller(session: pytest.Session) -> bool:
    """On an xdist worker: put this worker's figures where the controller reads them; True if so."""
    if not _is_xdist_worker(session.config):
        return False
    with LOCK:
        session.config.workeroutput[_WORKER_KEY] = json.dumps(FIGURES, default=str)  # type: ignore[attr-defined]
    return True


def take_from_worker(node: Any) -> None:
    """On the xdist controller: a worker finished; add its figures."""
    figures = json.loads(getattr(node, "workeroutput", {}).get(_WORKER_KEY) or "{}")
    with LOCK:
        FIGURES.update(figures)


def summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    write = terminalreporter.write_line
    terminalreporter.section("security scorecard")
    total_cases = total_bypasses = findings = 0
    for key in sorted(FIGURES):
        f = FIGURES[key]
        if f["title"].startswith("finding"):  # a known weakness, tracked by a strict xfail
            findings += f["bypasses"]
        else:
            total_cases += f["cases"]
            total_bypasses += f["bypasses"]
        write(f"check {f['check']:>2}  cases {f['cases']:>6}  bypasses {f['bypasses']:>3}  {f['title']}")
    write(f"total     cases {total_cases:>6}  bypasses {total_bypasses:>3}  (open findings: {findings})")


def write_file() -> None:
    if not FIGURES:
        return
    from django.conf import settings
    from django.db import connection

    try:
        vendor = connection.vendor
    except Exception:  # the database may already be gone; the figures are what matter
        vendor = "unknown"
    out = settings.DATA_DIR / f"security-scorecard-{vendor}.json"
    out.write_text(json.dumps({"database": vendor, "figures": FIGURES}, indent=2, sort_keys=True) + "\n")
