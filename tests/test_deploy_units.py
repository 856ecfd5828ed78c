"""The systemd units in docs/deploy/systemd/ are real unit files: `systemd-analyze verify` accepts
every one of them (no error, no warning), with the install paths pointed at this checkout. Skipped
only where systemd-analyze is missing (CI installs it and sets OPERATOR_REQUIRE_SYSTEMD=1)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import ROOT

UNITS = ROOT / "docs" / "deploy" / "systemd"
INSTALL = "/srv/operator"


def analyze() -> str:
    binary = shutil.which("systemd-analyze")
    if binary is None:
        if os.environ.get("OPERATOR_REQUIRE_SYSTEMD") == "1":
            pytest.fail(
                "systemd-analyze is required here (OPERATOR_REQUIRE_SYSTEMD=1); apt-get install systemd"
            )
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    return binary


def installed_copies(tmp_path: Path) -> list[Path]:
    """The units as installed on this machine: the checkout for /srv/operator, this Python for its venv's."""
    out = []
    for unit in sorted(UNITS.iterdir()):
        text = (
            unit.read_text()
            .replace(f"{INSTALL}/.venv/bin/python", sys.executable)
            .replace(INSTALL, str(ROOT))
        )
        copy = tmp_path / unit.name
        copy.write_text(text)
        out.append(copy)
    return out


def test_every_unit_and_timer_verifies(tmp_path: Path) -> None:
    binary = analyze()
    units = installed_copies(tmp_path)
    names = {u.name for u in units}
    assert {
        "operator.service",
        "operator-tick@.service",
        "operator-execute.timer",
        "operator-deliver.timer",
    } <= names
    assert {f"operator-tick-{mode}.timer" for mode in ("morning", "check-in", "night")} <= names
    result = subprocess.run(
        [binary, "verify", *map(str, units)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr


def test_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    """The check can fail: a misspelt key and a bad calendar are reported."""
    binary = analyze()
    units = installed_copies(tmp_path)
    service = tmp_path / "operator-deliver.service"
    service.write_text(service.read_text().replace("Type=oneshot", "Type=oneshot\nExecStrat=/bin/true"))
    timer = tmp_path / "operator-deliver.timer"
    timer.write_text(timer.read_text().replace("OnCalendar=*-*-* *:*:30", "OnCalendar=every so often"))
    result = subprocess.run(
        [binary, "verify", *map(str, units)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Unknown key 'ExecStrat'" in result.stderr and result.returncode != 0


def test_the_units_run_what_exists() -> None:
    """Every manage.py command a unit starts is a real command, with arguments it accepts."""
    from django.core.management import get_commands

    commands = get_commands()
    for unit in UNITS.iterdir():
        for line in unit.read_text().splitlines():
            if "manage.py " in line and line.startswith(("ExecStart", "ExecStartPre")):
                name = line.split("manage.py ", 1)[1].split()[0]
                assert name in commands, f"{unit.name}: manage.py {name} does not exist"
