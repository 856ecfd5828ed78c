"""Backup and restore: `operator_export` writes one self-describing archive with a checksum;
`operator_import` restores it into an empty database and verifies it (counts, the decision log's
hash chain, each lineage), or changes nothing. Round trip SQLite → PostgreSQL → SQLite and
PostgreSQL → SQLite → PostgreSQL, on real databases and real processes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import httpx2
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from beliefs.models import WorldModelVersion
from goals.models import DecisionLogEntry
from operator_site.cross_domain import backup
from operator_site.models import Principal
from tests.fixtures import ROOT, call

pytestmark = [pytest.mark.socket, pytest.mark.django_db(transaction=True)]


# --- an operator with a history ---------------------------------------------------------------------
async def _populate(url: str, owner_token: str, agent_token: str) -> None:
    async with httpx2.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {owner_token}"}, timeout=60
    ) as owner:
        steps: list[tuple[str, dict[str, Any]]] = [
            ("operator_record_instruction", {"text": "Please note my name is Iain from now on."}),
            (
                "operator_update_world_model",
                {
                    "changes": [
                        {"op": "add", "kind": "preference", "key": "coffee", "value": "flat white, no sugar"}
                    ]
                },
            ),
            (
                "operator_update_world_model",
                {
                    "changes": [{"op": "add", "kind": "identity", "key": "name", "value": "Iain"}],
                    "confirmedInConversation": True,
                    "confirmationQuote": "Please note my name is Iain from now on.",
                },
            ),
            (
                "operator_update_world_model",
                {
                    "changes": [
                        {"op": "add", "kind": "note", "key": "parking", "value": "bay 12, 0.5 m clearance"}
                    ]
                },
            ),
            ("operator_revert_world_model", {}),
            ("operator_record_instruction", {"text": "I really want to run a marathon next autumn."}),
            (
                "operator_apply_goal_change",
                {
                    "action": "add",
                    "title": "Run a marathon",
                    "importance": 1,
                    "confirmedInConversation": True,
                    "confirmationQuote": "I really want to run a marathon next autumn.",
                },
            ),
            (
                "operator_reconcile_goal_model",
                {
                    "changes": [
                        {
                            "entity": "project",
                            "op": "add",
                            "fields": {"title": "Couch to 10k", "goal": "Run a marathon"},
                        }
                    ]
                },
            ),
            (
                "operator_update_task",
                {"key": "water-plants", "patch": {"title": "Water the plants", "lane": "home"}},
            ),
            ("operator_update_task", {"key": "water-plants", "patch": {"status": "done"}}),
            ("operator_set_directive", {"kind": "quiet", "minutes": 30, "reason": "deep work"}),
            (
                "operator_record_progress",
                {"summary": "Sorted the inbox", "outcome": "done", "tried": ["rules"]},
            ),
            ("operator_tick", {"mode": "morning"}),
        ]
        for i in range(3):
            steps.append(
                (
                    "operator_log_decision",
                    {
                        "title": f"Decision {i}",
                        "decision": f"Do {i} — ünïcode ✓",
                        "rationale": "Because.",
                        "alternatives": ["not"],
                    },
                )
            )
        for tool, arguments in steps:
            answer = await call(owner, tool, arguments)
            assert answer.get("ok", True) is not False, (tool, answer)
    async with httpx2.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {agent_token}"}, timeout=60
    ) as agent:
        for tool, arguments in [
            (
                "operator_record_action_intent",
                {"action": {"type": "spend", "title": "Annual plan", "amount_cents": 4900}},
            ),
            ("operator_record_action_intent", {"action": {"type": "note", "title": "Remember the milk"}}),
            ("operator_record_observation", {"kind": "world", "summary": "Rain later", "tainted": False}),
            (
                "operator_update_world_model",
                {"changes": [{"op": "update", "kind": "preference", "key": "coffee", "value": "espresso"}]},
            ),
            ("operator_state", {}),
            ("operator_update_decision", {"id": 1, "status": "approved"}),  # refused: an audit row
        ]:
            await call(agent, tool, arguments)


@pytest.fixture
def populated(live_server_uvicorn, owner, agent) -> None:
    asyncio.run(_populate(f"{live_server_uvicorn.url}", owner.token, agent.token))
    assert WorldModelVersion.objects.count() >= 4 and DecisionLogEntry.objects.count() == 3


# --- scratch databases -----------------------------------------------------------------------------------
def _postgres_admin_url() -> str:
    if connection.vendor == "postgresql":
        s = connection.settings_dict
        user, host, port = s.get("USER") or "postgres", s.get("HOST") or "127.0.0.1", s.get("PORT") or 5432
        return f"postgres://{user}@{host}:{port}/postgres"
    return os.environ.get("OPERATOR_TEST_POSTGRES_URL") or "postgres://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def scratch_postgres() -> Iterator[Any]:
    """Makes fresh PostgreSQL databases (named after this run's, so parallel checkouts never meet)
    and drops them afterwards."""
    import psycopg

    admin = _postgres_admin_url()
    try:
        conn = psycopg.connect(
            admin.replace("postgres://", "postgresql://"), autocommit=True, connect_timeout=5
        )
    except psycopg.OperationalError as exc:
        if os.environ.get("OPERATOR_REQUIRE_POSTGRES") == "1":
            raise
        pytest.skip(f"no PostgreSQL for the round trip at {admin} ({exc}); set OPERATOR_TEST_POSTGRES_URL")
    base = (
        connection.settings_dict["NAME"]
        if connection.vendor == "postgresql"
        else re.sub(r"[^a-z0-9_]", "_", ROOT.name.lower()) + "_test"
    )
    made: list[str] = []

    def make(suffix: str) -> str:
        name = f"{base}_restore_{suffix}"[:60]
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return admin.rsplit("/", 1)[0] + f"/{name}"

    yield make
    for name in made:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    conn.close()


def export(path: Path, *flags: str) -> None:
    call_command("operator_export", "-o", str(path), *flags, stdout=StringIO())


def manage(*args: str, database_url: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "OPERATOR_NO_VENV": "1",
        "OPERATOR_DATA_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return result


def records(archive: Path) -> dict[str, list[dict[str, Any]]]:
    """Every row of an archive, by model (JSON values compared as values: key order is free)."""
    with zipfile.ZipFile(archive) as z:
        manifest = json.loads(z.read("MANIFEST.json"))
        return {
            entry["model"]: [json.loads(line) for line in z.read(entry["file"]).decode().splitlines()]
            for entry in manifest["files"]
        }


def manifest_of(archive: Path) -> dict[str, Any]:
    with zipfile.ZipFile(archive) as z:
        return json.loads(z.read("MANIFEST.json"))


# --- the round trip ---------------------------------------------------------------------------------
def test_round_trip_through_the_other_database_and_back(populated, tmp_path, scratch_postgres) -> None:
    first = tmp_path / "first.zip"
    export(first)
    original = records(first)
    assert manifest_of(first)["verified_at_export"]["decision_log"]["ok"] is True

    here = connection.vendor
    other_url = scratch_postgres("other") if here == "sqlite" else f"sqlite:///{tmp_path / 'other.sqlite3'}"
    back_url = scratch_postgres("back") if here == "postgresql" else f"sqlite:///{tmp_path / 'back.sqlite3'}"

    restored = manage("operator_import", str(first), database_url=other_url, tmp_path=tmp_path)
    assert restored.returncode == 0, restored.stderr
    assert "verified: counts; decision log (3 entries)" in restored.stdout
    second = tmp_path / "second.zip"
    exported = manage("operator_export", "-o", str(second), database_url=other_url, tmp_path=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert manifest_of(second)["source_database"] != here
    assert records(second) == original

    again = manage("operator_import", str(second), database_url=back_url, tmp_path=tmp_path)
    assert again.returncode == 0, again.stderr
    third = tmp_path / "third.zip"
    assert (
        manage("operator_export", "-o", str(third), database_url=back_url, tmp_path=tmp_path).returncode == 0
    )
    assert records(third) == original
    checks = manifest_of(third)["verified_at_export"]
    assert all(check["ok"] for check in checks.values()), checks
    assert checks["world_model"]["versions"] >= 4 and checks["goal_model"]["versions"] >= 2


def test_the_archive_describes_itself_and_leaves_token_digests_out(populated, tmp_path) -> None:
    archive = tmp_path / "a.zip"
    export(archive)
    manifest = manifest_of(archive)
    assert manifest["format"] == "operator-export" and manifest["format_version"] == 1
    assert manifest["includes_token_digests"] is False and manifest["migrations"]["beliefs"]
    counts = {f["model"]: f["rows"] for f in manifest["files"]}
    assert counts["operator_site.principal"] == Principal.objects.count()
    assert counts["goals.decisionlogentry"] == 3 and counts["operator_site.auditevent"] > 10
    assert "sessions.session" not in counts and "auth.permission" not in counts
    principals = records(archive)["operator_site.principal"]
    assert all(p["fields"]["token_digest"] is None for p in principals)
    sidecar = (tmp_path / "a.zip.sha256").read_text().split()
    assert sidecar == [hashlib.sha256(archive.read_bytes()).hexdigest(), "a.zip"]
    with zipfile.ZipFile(archive) as z:
        assert "operator_import" in z.read("README.txt").decode()

    with_digests = tmp_path / "b.zip"
    export(with_digests, "--with-token-digests")
    digests = {
        p["fields"]["name"]: p["fields"]["token_digest"]
        for p in records(with_digests)["operator_site.principal"]
    }
    assert digests["owner"] == Principal.objects.get(name="owner").token_digest is not None


def test_restored_tokens_work_only_when_the_digests_were_exported(populated, owner, tmp_path) -> None:
    for flag, should_work in (("--with-token-digests", True), (None, False)):
        archive = tmp_path / f"{flag}.zip"
        export(archive, *([flag] if flag else []))
        url = f"sqlite:///{tmp_path / f'restored{flag}.sqlite3'}"
        assert manage("operator_import", str(archive), database_url=url, tmp_path=tmp_path).returncode == 0
        probe = manage("operator_token", "list", database_url=url, tmp_path=tmp_path)
        assert probe.returncode == 0, probe.stderr
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            digest = db.execute(
                "SELECT token_digest FROM operator_site_principal WHERE name='owner'"
            ).fetchone()[0]
        assert (digest == owner.principal.token_digest) is should_work
        assert (digest is not None) is should_work


# --- what the import refuses ------------------------------------------------------------------------
def _rewrite(archive: Path, out: Path, edit_file: str | None, edit: Any, *, fix_checksums: bool) -> None:
    """Copy `archive` to `out`, passing one data file's text through `edit`."""
    with zipfile.ZipFile(archive) as src:
        manifest = json.loads(src.read("MANIFEST.json"))
        contents = {name: src.read(name) for name in src.namelist()}
    for entry in manifest["files"]:
        if entry["model"] == edit_file:
            data = edit(contents[entry["file"]].decode()).encode()
            contents[entry["file"]] = data
            if fix_checksums:  # a careful forger recomputes every checksum
                entry["sha256"] = hashlib.sha256(data).hexdigest()
    if fix_checksums:
        manifest["checksum"] = backup._file_list_checksum(manifest["files"])
    contents["MANIFEST.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(out, "w") as dst:
        for name, data in contents.items():
            dst.writestr(name, data)


def test_an_import_into_a_database_that_is_not_empty_changes_nothing(populated, tmp_path) -> None:
    archive = tmp_path / "a.zip"
    export(archive)
    before = Principal.objects.count()
    with pytest.raises(CommandError, match="the database is not empty"):
        call_command("operator_import", str(archive), stdout=StringIO())
    assert Principal.objects.count() == before


@pytest.mark.parametrize(
    ("model", "edit", "fix", "words"),
    [
        (
            "goals.decisionlogentry",
            lambda t: t.replace("Because.", "Because I said so."),
            False,
            "does not match its SHA-256",
        ),
        (None, None, "manifest-rows", "checksum does not match its file list"),
        # Checksums recomputed: the content checks still catch what was changed.
        (
            "goals.decisionlogentry",
            lambda t: t.replace("Because.", "Because I said so.", 1),
            True,
            "decision_log",
        ),
        (
            "beliefs.worldmodelchange",
            lambda t: t.replace("flat white, no sugar", "black, two sugars", 1),
            True,
            "world_model",
        ),
        # A row of another table smuggled into a file (checksums recomputed).
        (
            "goals.task",
            lambda t: (
                t + json.dumps({"model": "auth.user", "pk": 999, "fields": {"username": "mallory"}}) + "\n"
            ),
            True,
            "holds rows of another table (auth.user)",
        ),
        # A row taken out (file checksum recomputed, the manifest's row count left): counted.
        ("goals.task", lambda t: "\n".join(t.splitlines()[1:]) + "\n", True, "the manifest says"),
    ],
)
def test_an_altered_archive_is_refused_and_nothing_is_restored(
    populated, tmp_path, model, edit, fix, words
) -> None:
    archive = tmp_path / "a.zip"
    export(archive)
    altered = tmp_path / "altered.zip"
    if fix == "manifest-rows":

        def bump(_: str) -> str:
            raise AssertionError

        with zipfile.ZipFile(archive) as src:
            contents = {n: src.read(n) for n in src.namelist()}
        manifest = json.loads(contents["MANIFEST.json"])
        manifest["files"][0]["rows"] += 1
        contents["MANIFEST.json"] = json.dumps(manifest).encode()
        with zipfile.ZipFile(altered, "w") as dst:
            for name, data in contents.items():
                dst.writestr(name, data)
    else:
        _rewrite(archive, altered, model, edit, fix_checksums=bool(fix))
    url = f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
    result = manage("operator_import", str(altered), database_url=url, tmp_path=tmp_path)
    assert result.returncode == 1 and words in result.stderr, result.stderr
    with sqlite3.connect(tmp_path / "fresh.sqlite3") as db:
        tables = [
            r[0]
            for r in db.execute("SELECT name FROM sqlite_master WHERE name LIKE 'operator_site_principal'")
        ]
        if tables:
            assert db.execute("SELECT COUNT(*) FROM operator_site_principal").fetchone()[0] == 0


def test_a_damaged_file_or_a_foreign_schema_is_refused(populated, tmp_path) -> None:
    archive = tmp_path / "a.zip"
    export(archive)
    url = f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
    # The sidecar checksum no longer matches the file.
    (tmp_path / "a.zip.sha256").write_text("0" * 64 + "  a.zip\n")
    result = manage("operator_import", str(archive), database_url=url, tmp_path=tmp_path)
    assert result.returncode == 1 and "does not match a.zip.sha256" in result.stderr
    (tmp_path / "a.zip.sha256").unlink()
    # Written by a newer operator (a migration this checkout does not have).
    with zipfile.ZipFile(archive) as src:
        contents = {n: src.read(n) for n in src.namelist()}
    manifest = json.loads(contents["MANIFEST.json"])
    manifest["migrations"]["beliefs"].append("9999_from_the_future")
    contents["MANIFEST.json"] = json.dumps(manifest).encode()
    newer = tmp_path / "newer.zip"
    with zipfile.ZipFile(newer, "w") as dst:
        for name, data in contents.items():
            dst.writestr(name, data)
    result = manage("operator_import", str(newer), database_url=url, tmp_path=tmp_path)
    assert result.returncode == 1 and "written by a newer operator" in result.stderr
    assert "beliefs.9999_from_the_future" in result.stderr
    # Not an archive at all.
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip")
    result = manage("operator_import", str(junk), database_url=url, tmp_path=tmp_path)
    assert result.returncode == 1 and "is not a zip file" in result.stderr
