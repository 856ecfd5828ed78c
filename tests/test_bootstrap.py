"""The first `serve` shows what it installs: manage.py's pip wrapper prints one short line per
package (and pip's own last lines if the install fails), instead of 45 silent seconds."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.fixtures import ROOT


def manage_module():
    spec = importlib.util.spec_from_file_location("operator_manage", ROOT / "manage.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pip_lines_become_short_progress_lines() -> None:
    progress = manage_module().progress_line
    assert progress("Collecting Django<5.3,>=5.2\n") == "operator:   collecting Django<5.3,>=5.2"
    assert progress("  Downloading django-5.2.19-py3-none-any.whl (8.3 MB)") == (
        "operator:   downloading django-5.2.19-py3-none-any.whl (8.3 MB)"
    )
    assert progress("Installing collected packages: a, b, c") == "operator:   installing 3 packages..."
    assert progress("Successfully installed a-1 b-2") == "operator:   installed 2 packages"
    assert progress("  Using cached x.whl") is None
    assert progress("Requirement already satisfied: django in /x") is None


def test_a_real_install_shows_progress_and_a_last_line(capsys) -> None:
    manage = manage_module()
    # Everything is installed already; --no-index keeps the test off the network.
    manage.pip_install(sys.executable, ["Django>=5.2,<5.3", "uvicorn"], extra_args=("--no-index",))
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("operator: dependencies ready (")


def test_a_failed_install_ends_in_one_line_saying_so(capsys) -> None:
    manage = manage_module()
    with pytest.raises(SystemExit) as failed:
        manage.pip_install(sys.executable, ["operator-no-such-package-xyz"], extra_args=("--no-index",))
    assert "operator: installing dependencies failed" in str(failed.value)
    assert "operator-no-such-package-xyz" in capsys.readouterr().err  # pip's own last lines
