#!/usr/bin/env python3
"""Django's command-line utility for the operator, and the project's own bootstrap.

Two commands need nothing on the machine but ``python3`` (>= 3.11):

    python3 manage.py serve      # .venv, install, migrate, owner token, uvicorn on 127.0.0.1:8000
    python3 manage.py runtests   # .venv with the test extras, then the whole pytest suite

Every other command re-executes inside the project's virtual environment when it exists, so
``python3 manage.py operator_token list`` works without activating anything. Set
``OPERATOR_NO_VENV=1`` to run in the current interpreter instead (it must have the dependencies).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("OPERATOR_VENV") or ROOT / ".venv")
# Which optional-dependency groups each bootstrapping command needs.
BOOTSTRAP_COMMANDS = {"serve": (), "runtests": ("dev",)}


def _venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _in_project_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def _requirements(extras: tuple[str, ...]) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return reqs


def _ensure_venv(extras: tuple[str, ...]) -> None:
    """Create .venv and install what pyproject.toml lists, once per change of pyproject.toml."""
    if not _venv_python().exists():
        print(f"operator: creating virtual environment in {VENV}", flush=True)
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    stamp_file = VENV / ".operator-installed.json"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    stamp = json.loads(stamp_file.read_text()) if stamp_file.exists() else {}
    installed = set(stamp.get("extras", [])) if stamp.get("pyproject") == digest else None
    if installed is not None and set(extras) <= installed:
        return
    wanted = tuple(sorted(set(extras) | (installed or set())))
    print(f"operator: installing dependencies ({', '.join(wanted) or 'runtime'})", flush=True)
    subprocess.check_call(
        [
            str(_venv_python()),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            *_requirements(wanted),
        ]
    )
    stamp_file.write_text(json.dumps({"pyproject": digest, "extras": list(wanted)}))


def _ensure_local_secret_key() -> None:
    """`serve` without SECRET_KEY: generate one into the data folder, readable by this user only."""
    if os.environ.get("SECRET_KEY"):
        return
    data_dir = Path(os.environ.get("OPERATOR_DATA_DIR") or ROOT / "var")
    data_dir.mkdir(parents=True, exist_ok=True)
    key_file = data_dir / "secret_key"
    if not key_file.exists():
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(50))
        print(f"operator: generated a local SECRET_KEY in {key_file}", flush=True)


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    use_venv = os.environ.get("OPERATOR_NO_VENV") != "1" and not _in_project_venv()
    if use_venv and (command in BOOTSTRAP_COMMANDS or _venv_python().exists()):
        if command in BOOTSTRAP_COMMANDS:
            _ensure_venv(BOOTSTRAP_COMMANDS[command])
        python = str(_venv_python())
        os.execv(python, [python, str(ROOT / "manage.py"), *sys.argv[1:]])

    if command == "runtests":
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-m", "pytest", *sys.argv[2:]])
    if command == "serve":
        _ensure_local_secret_key()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "operator_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
