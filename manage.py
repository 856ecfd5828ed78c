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
from collections import deque
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
    print(
        f"operator: installing dependencies ({', '.join(wanted) or 'runtime'}) into {VENV}; "
        "the first time takes a minute or two",
        flush=True,
    )
    pip_install(str(_venv_python()), _requirements(wanted))
    stamp_file.write_text(json.dumps({"pyproject": digest, "extras": list(wanted)}))


def progress_line(line: str) -> str | None:
    """What a person sees of one line of pip's output: the package being fetched or installed, not
    pip's every detail (the full output is shown if the install fails)."""
    text = line.strip()
    for prefix, verb in (("Collecting ", "collecting"), ("Downloading ", "downloading")):
        if text.startswith(prefix):
            return f"operator:   {verb} {text[len(prefix) :]}"
    if text.startswith("Installing collected packages:"):
        count = len([p for p in text.partition(":")[2].split(",") if p.strip()])
        return f"operator:   installing {count} packages..."
    if text.startswith("Successfully installed "):
        return f"operator:   installed {len(text.split()) - 2} packages"
    return None


def pip_install(python: str, requirements: list[str], extra_args: tuple[str, ...] = ()) -> None:
    """`pip install` with its progress shown one short line per package; on failure, pip's last
    lines and one line saying what failed (exit status 1)."""
    command = [python, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"]
    process = subprocess.Popen(
        [*command, *extra_args, *requirements],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    tail: deque[str] = deque(maxlen=30)
    satisfied = 0
    assert process.stdout is not None
    for line in process.stdout:
        tail.append(line.rstrip())
        satisfied += line.startswith("Requirement already satisfied")
        shown = progress_line(line)
        if shown:
            print(shown, flush=True)
    if process.wait() != 0:
        print("\n".join(tail), file=sys.stderr, flush=True)
        raise SystemExit(
            f"operator: installing dependencies failed (pip exited {process.returncode}; its last lines "
            "are above). Check the network or the package index, then run the command again."
        )
    already = f" ({satisfied} already installed)" if satisfied else ""
    print(f"operator: dependencies ready{already}", flush=True)


def _ensure_local_secret_key() -> None:
    """`serve` without SECRET_KEY: generate one into the data folder, readable by this user only."""
    from operator_site.configuration import read_dotenv  # inside the venv by now

    dotenv = read_dotenv(ROOT / ".env")
    if os.environ.get("SECRET_KEY") or dotenv.get("SECRET_KEY"):
        return
    data_dir = Path(os.environ.get("OPERATOR_DATA_DIR") or dotenv.get("OPERATOR_DATA_DIR") or ROOT / "var")
    key_file = data_dir / "secret_key"
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        if not key_file.exists():
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_urlsafe(50))
            print(f"operator: generated a local SECRET_KEY in {key_file}", flush=True)
    except OSError as exc:
        print(
            f"operator: OPERATOR_DATA_DIR: cannot write {key_file} ({exc.strerror or exc}); make the "
            "folder writable by this user, point OPERATOR_DATA_DIR at a writable folder, or set SECRET_KEY.",
            file=sys.stderr,
            flush=True,
        )
        sys.exit(78)


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

    try:
        execute_from_command_line(sys.argv)
    except Exception as exc:
        # A misconfiguration, an unreachable database, a port in use: one line that says which
        # setting, what was wrong and what to do, instead of a traceback.
        from operator_site.preflight import explain

        explained = explain(exc)
        if explained is None:
            raise
        line, status = explained
        print(line, file=sys.stderr, flush=True)
        sys.exit(status)


if __name__ == "__main__":
    main()
