"""Configuration you can see: one declaration of every setting (operator_site/settings.py), the
documents generated from it, the code checked against it, and misconfiguration that ends in one
line naming the setting — checked on real `manage.py` processes."""

from __future__ import annotations

import ast
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import global_settings

from operator_site import configuration, docs
from operator_site import settings as settings_module
from tests.fixtures import ROOT, free_port

CODE_DIRS = ("operator_site", "beliefs", "goals", "intents", "runs")
# Variables of the platform, not of the operator.
PLATFORM_VARIABLES = {"DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE", "HOME", "PATH"}
ENV_READERS = {"os.environ.get", "os.getenv", "os.environ.setdefault", "os.environ.pop"}


def python_files(*, tests: bool) -> list[Path]:
    files = [ROOT / "manage.py"]
    for top in (*CODE_DIRS, "tests") if tests else CODE_DIRS:
        for path in (ROOT / top).rglob("*.py"):
            parts = set(path.relative_to(ROOT).parts)
            if "migrations" in parts:
                continue
            is_test = "tests" in parts
            if is_test == tests or (not tests and not is_test):
                files.append(path)
    return sorted(set(files))


def reads(paths: list[Path]) -> tuple[set[str], set[str]]:
    """(settings attributes read as `settings.X` / getattr(settings, "X"), environment variables
    read through os.environ / os.getenv), over the given files."""
    attrs: set[str] = set()
    variables: set[str] = set()
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            is_name = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            if is_name and node.value.id == "settings" and node.attr.isupper():
                attrs.add(node.attr)
            if isinstance(node, ast.Call):
                func = node.func
                name = ast.unparse(func)
                first = node.args[0] if node.args else None
                literal = first.value if isinstance(first, ast.Constant) else None
                if name == "getattr" and len(node.args) >= 2:
                    target = node.args[0]
                    key = node.args[1]
                    if ast.unparse(target) == "settings" and isinstance(key, ast.Constant):
                        attrs.add(key.value)
                if name in ENV_READERS and literal:
                    variables.add(literal)
            subscript = isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ"
            if subscript and isinstance(node.slice, ast.Constant):
                variables.add(node.slice.value)
    return attrs, variables


def declared() -> list[configuration.Setting]:
    return settings_module.config.declared


# --- the documents ---------------------------------------------------------------------------------------
def test_every_generated_document_matches_the_code() -> None:
    for path, text in docs.generated().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is out of date: run `python3 manage.py operator_docs`"
        )


def test_env_example_names_exactly_the_declared_settings() -> None:
    mentioned = configuration.env_example_names((ROOT / ".env.example").read_text(encoding="utf-8"))
    deployable = {s.name for s in declared() if s.read_by != "tests"}
    assert mentioned == deployable


def test_the_reference_lists_every_setting_with_its_default() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for setting in declared():
        assert f"| `{setting.name}` | `{setting.default_text}` |" in text, setting.name
        assert setting.meaning, f"{setting.name} has no meaning"


# --- the declaration against what the code reads ----------------------------------------------------------
def test_every_setting_the_code_reads_is_declared_or_django_s_own() -> None:
    attrs, _ = reads(python_files(tests=False))
    declared_attrs = {s.attr for s in declared()} | {s.name for s in declared()}
    undeclared = {a for a in attrs if a not in declared_attrs and not hasattr(global_settings, a)}
    assert undeclared == set(), f"read by the code but not declared in settings: {sorted(undeclared)}"


def test_every_environment_variable_the_code_or_the_tests_read_is_declared() -> None:
    _, variables = reads(python_files(tests=False) + python_files(tests=True))
    names = {s.name for s in declared()}
    undeclared = variables - names - PLATFORM_VARIABLES
    assert undeclared == set(), f"read from the environment but not declared: {sorted(undeclared)}"


def test_every_declared_setting_is_read_by_someone() -> None:
    attrs, variables = reads(python_files(tests=False) + python_files(tests=True))
    for setting in declared():
        if setting.read_by == "settings":
            used = setting.attr in attrs or setting.name in attrs or hasattr(global_settings, setting.attr)
        else:
            used = setting.name in variables or setting.read_by == "prometheus-client"
        assert used, f"{setting.name} is declared but nothing reads it"


def test_settings_reads_the_environment_only_through_the_declaration() -> None:
    tree = ast.parse((ROOT / "operator_site" / "settings.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            text = ast.unparse(node)
            assert not text.startswith(("os.environ", "os.getenv", "env.")), (
                f"settings.py line {node.lineno} reads the environment directly ({text}): declare it with "
                "config.<type>(NAME, default, meaning) instead"
            )


def test_a_declaration_reads_env_file_and_environment_with_the_environment_winning(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("# comment\nA_NUMBER=5\nexport A_WORD='hello'\nA_FLAG=yes\n")
    config = configuration.Config(env_file=env_file, environ={"A_NUMBER": "7"})
    assert config.int("A_NUMBER", 1, "a number.", min=0, max=10) == 7
    assert config.str("A_WORD", "", "a word.") == "hello"
    assert config.bool("A_FLAG", False, "a flag.") is True
    assert config.list("A_LIST", ["x"], "a list.") == ["x"]
    # Set but empty: a text or list setting is empty (e.g. no e-mail address); a typed one is its default.
    empty = configuration.Config(environ={"AN_ADDRESS": "", "HOSTS": "", "A_LIMIT": " "})
    assert empty.str("AN_ADDRESS", "owner@localhost", "an address.") == ""
    assert empty.list("HOSTS", ["localhost"], "hosts.") == []
    assert empty.int("A_LIMIT", 60, "a limit.") == 60
    with pytest.raises(ValueError, match="declared twice"):
        config.str("A_WORD", "", "again.")


@pytest.mark.parametrize(
    ("method", "raw", "extra", "words"),
    [
        ("int", "abc", {}, "is not a whole number"),
        ("int", "0", {"min": 1, "max": 5}, "out of range (allowed: 1 to 5)"),
        ("float", "nan", {}, "not a finite number"),
        ("bool", "ture", {}, "is not true or false"),
        ("url", "localhost:5432", {}, "is not a URL"),
        ("json", "[{", {}, "is not valid JSON"),
    ],
)
def test_a_value_that_does_not_fit_is_one_line_naming_the_setting(method, raw, extra, words) -> None:
    config = configuration.Config(environ={"THE_SETTING": raw})
    default = {"int": 1, "float": 1.0, "bool": False, "url": "", "json": []}[method]
    with pytest.raises(configuration.ConfigError) as failed:
        getattr(config, method)("THE_SETTING", default, "meaning.", **extra)
    message = str(failed.value)
    assert message.startswith("THE_SETTING: ") and words in message and "\n" not in message
    assert "docs/configuration.md" in message


# --- misconfiguration on real processes ------------------------------------------------------------
def manage(*args: str, env: dict[str, str] | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, "OPERATOR_NO_VENV": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("OPERATOR_RATE_LIMIT", "lots", "'lots' is not a whole number"),
        ("DEBUG", "ture", "is not true or false"),
        ("OPERATOR_DB_INLINE", "maybe", "is not one of auto, true, false"),
        ("OPERATOR_TIME_ZONE", "Mars/Olympus", "is not a known time zone"),
        ("DATABASE_URL", "mysqlish://x", "'mysqlish' is not a supported database"),
        ("DATABASE_URL", "localhost:5432", "is not a URL"),
        ("OPERATOR_OBSERVE_PROBES", '{"not": "a list"}', "must be a JSON list of objects"),
        ("OPERATOR_APPROVAL_EXPIRY_DAYS", "0", "out of range"),
    ],
)
def test_a_bad_setting_stops_every_command_with_one_line(tmp_path: Path, variable, value, words) -> None:
    result = manage("check", env={"OPERATOR_DATA_DIR": str(tmp_path), variable: value})
    assert result.returncode == 78
    line = one_line(result)
    assert line.startswith(f"operator: configuration error: {variable}: ") and words in line, line


def test_a_data_folder_that_cannot_be_created_is_named_in_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = manage("check", env={"OPERATOR_DATA_DIR": str(blocker / "data")})
    assert result.returncode == 78
    line = one_line(result)
    assert "OPERATOR_DATA_DIR: cannot create the data folder" in line and str(blocker / "data") in line


def test_an_unwritable_data_folder_is_named_in_one_line(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root writes through permission bits; /proc/self is a folder even root cannot write in.
        data, shown = "/proc/self", "/proc/"
    else:
        folder = tmp_path / "data"
        folder.mkdir()
        folder.chmod(0o555)
        data = shown = str(folder)
    result = manage("check", env={"OPERATOR_DATA_DIR": data})
    assert result.returncode == 78, result.stderr
    line = one_line(result)
    assert line.startswith("operator: configuration error: OPERATOR_DATA_DIR: ")
    assert shown in line and "not writable" in line


def test_an_unreachable_database_is_one_line_naming_it(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    url = f"postgres://someone:hunter2@127.0.0.1:{port}/operator_nowhere"
    result = manage("migrate", env={"OPERATOR_DATA_DIR": str(tmp_path), "DATABASE_URL": url})
    assert result.returncode == 69
    line = one_line(result)
    assert f"cannot reach postgres://someone@127.0.0.1:{port}/operator_nowhere (DATABASE_URL)" in line
    assert "connection refused" in line and "hunter2" not in line


def test_serve_with_an_unreachable_database_prints_no_credential(tmp_path: Path) -> None:
    url = f"postgres://postgres@127.0.0.1:{free_port()}/operator_nowhere"
    result = manage(
        "serve", "--port", str(free_port()), env={"OPERATOR_DATA_DIR": str(tmp_path), "DATABASE_URL": url}
    )
    assert result.returncode == 69
    assert "cannot reach" in one_line(result)
    assert "OPERATOR_TOKEN" not in result.stdout and "password" not in result.stdout


def test_a_port_in_use_stops_serve_before_any_credential_is_created(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = manage("serve", "--port", str(port), env={"OPERATOR_DATA_DIR": str(tmp_path)})
    assert result.returncode == 69
    line = one_line(result)
    assert f"port {port} on 127.0.0.1 is already in use" in line and f"--port {port + 1}" in line
    assert "OPERATOR_TOKEN" not in result.stdout and "password" not in result.stdout
    database = tmp_path / "operator.sqlite3"
    if database.exists():  # nothing was migrated, no principal created
        with sqlite3.connect(database) as conn:
            tables = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        assert tables == []


# --- the console e-mail backend says what it does -----------------------------------------------------
@pytest.mark.django_db
def test_the_console_backend_says_printed_not_sent(
    settings, capsys, django_capture_on_commit_callbacks
) -> None:
    from operator_site import mail, notifications
    from operator_site.models import Notification

    settings.EMAIL_BACKEND = "operator_site.mail.ConsoleBackend"
    with django_capture_on_commit_callbacks(execute=True):
        notice, _ = notifications.notify(kind="approval_request", title="Approve: renew plan")
    notice = Notification.objects.get(pk=notice.pk)
    printed = capsys.readouterr().out
    assert mail.NOT_SENT in printed and "Approve: renew plan" in printed
    assert "printed to the console, not sent" in mail.NOT_SENT
    assert notice.channels == ["console"]  # not "email": nothing was sent

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    with django_capture_on_commit_callbacks(execute=True):
        other, _ = notifications.notify(kind="approval_request", title="Approve: another")
    assert Notification.objects.get(pk=other.pk).channels == ["email"]


def test_serve_says_e_mail_is_printed_not_sent(tmp_path: Path) -> None:
    """The banner `serve` prints before it starts listening (stopped right after by a port clash
    would print nothing; so the banner is checked on a real start, then the server is stopped)."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
        "OPERATOR_NO_VENV": "1",
        "OPERATOR_DATA_DIR": str(tmp_path),
    }
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--no-access-log"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line)
            if "serving MCP at" in line:
                break
    finally:
        process.terminate()
        process.wait(timeout=30)
    text = "".join(seen)
    assert "notices are e-mailed to the console — printed here, not sent" in text, text
    assert "created the owner's bearer token" in text  # a real first start


@pytest.mark.django_db
def test_operator_deliver_says_printed_not_sent_with_the_console_backend(settings, capsys) -> None:
    import json
    from io import StringIO

    from django.core.management import call_command

    from operator_site import notifications

    settings.OPERATOR_DELIVERY = "off"
    settings.EMAIL_BACKEND = "operator_site.mail.ConsoleBackend"
    notifications.notify(kind="approval_request", title="Approve: renew plan")
    out = StringIO()
    call_command("operator_deliver", stdout=out)
    assert out.getvalue().strip() == "operator_deliver: notices: 1 printed to the console, not sent"
    assert "delivered" not in out.getvalue()
    notifications.notify(kind="approval_request", title="Approve: another")
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    out = StringIO()
    call_command("operator_deliver", "--json", stdout=out)
    assert len(json.loads(out.getvalue())["delivered"]) == 1


def test_the_bare_server_of_the_systemd_unit_also_fails_in_one_line(tmp_path: Path) -> None:
    """`python -m operator_site.serving` (what operator.service runs): a wrong setting is one line
    and exit 78, which the unit does not restart on; a port in use is one line and exit 69."""
    env = {**os.environ, "OPERATOR_NO_VENV": "1", "OPERATOR_DATA_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    command = [sys.executable, "-m", "operator_site.serving", "--port", str(free_port())]
    bad = subprocess.run(
        command,
        cwd=ROOT,
        env={**env, "OPERATOR_RATE_WINDOW_S": "0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 78 and "OPERATOR_RATE_WINDOW_S: '0' is out of range" in one_line(bad)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run(
            [*command[:-1], str(port)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
    assert busy.returncode == 69 and f"port {port} on 127.0.0.1 is already in use" in one_line(busy)
