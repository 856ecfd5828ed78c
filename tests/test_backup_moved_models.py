"""An archive written before the evidence rows moved into the kernel still imports: it names them
`beliefs.instruction` / `beliefs.confirmationuse` (in the manifest, in each row, and in the natural
keys of the admin's history and of granted permissions) and lacks the migrations that moved them.
The archive here is this checkout's own export turned back into that shape (the labels and the
migration list an export before the move wrote; checksums recomputed as that export computed them)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zipfile
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command

from beliefs.services import record_instruction
from beliefs.tests.helpers import add, run_tool
from operator_site.cross_domain import backup
from operator_site.models import ConfirmationUse, Instruction
from tests.test_backup import manage

pytestmark = pytest.mark.django_db(transaction=True)

OLD = {new: old for old, new in backup.MOVED_MODELS.items()}


def _old_key(app: str, model: str) -> list[str]:
    return OLD.get(f"{app}.{model}", f"{app}.{model}").split(".")


def _as_before_the_move(archive: Path, out: Path) -> None:
    """Rewrite an archive as an operator before the move wrote it."""
    with zipfile.ZipFile(archive) as src:
        manifest = json.loads(src.read("MANIFEST.json"))
        contents = {name: src.read(name) for name in src.namelist()}
    for entry in manifest["files"]:
        rows = [json.loads(line) for line in contents.pop(entry["file"]).decode().splitlines()]
        for row in rows:
            row["model"] = OLD.get(row["model"], row["model"])
            fields = row["fields"]
            if row["model"] == "admin.logentry":
                fields["content_type"] = _old_key(*fields["content_type"])
            if row["model"] in ("auth.group", "auth.user"):
                key = "permissions" if row["model"] == "auth.group" else "user_permissions"
                fields[key] = [[codename, *_old_key(app, model)] for codename, app, model in fields[key]]
        data = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows).encode()
        if entry["model"] in OLD:
            entry["file"] = entry["file"].replace(entry["model"], OLD[entry["model"]])
            entry["model"] = OLD[entry["model"]]
        entry["sha256"] = hashlib.sha256(data).hexdigest()
        contents[entry["file"]] = data
    for app, names in backup.MOVE_MIGRATIONS.items():
        manifest["migrations"][app] = [n for n in manifest["migrations"][app] if n not in names]
    manifest["checksum"] = backup._file_list_checksum(manifest["files"])
    contents["MANIFEST.json"] = json.dumps(manifest, indent=2, sort_keys=True).encode()
    with zipfile.ZipFile(out, "w") as dst:
        for name, data in contents.items():
            dst.writestr(name, data)


@pytest.fixture
def operator_with_evidence(owner, agent) -> dict[str, Any]:
    said = record_instruction(principal=owner.principal, text="Please note my name is Iain from now on.")
    answer = run_tool(
        owner.principal,
        "operator_update_world_model",
        {
            "changes": [add("identity", "name", "Iain")],
            "confirmedInConversation": True,
            "confirmationQuote": "Please note my name is Iain from now on.",
        },
    )
    assert answer["ok"] is True, answer
    speakers = Group.objects.create(name="speakers")
    speakers.permissions.add(Permission.objects.get(codename="add_instruction"))
    LogEntry.objects.log_actions(
        owner.principal.user_id,
        [said],
        ADDITION,
        change_message="recorded from the admin",
        single_object=True,
    )
    return {"instruction": said.pk, "uses": ConfirmationUse.objects.count()}


def test_an_archive_written_before_the_move_still_imports(operator_with_evidence, tmp_path) -> None:
    assert ContentType.objects.get_for_model(Instruction).app_label == "operator_site"
    archive = tmp_path / "now.zip"
    call_command("operator_export", "-o", str(archive), stdout=StringIO())
    old = tmp_path / "before-the-move.zip"
    _as_before_the_move(archive, old)
    with zipfile.ZipFile(old) as z:
        manifest = json.loads(z.read("MANIFEST.json"))
        assert "beliefs.instruction" in {f["model"] for f in manifest["files"]}
        assert "0005_evidence_moves_out" not in manifest["migrations"]["beliefs"]
        assert b'"beliefs", "instruction"' in b"".join(z.read(f["file"]) for f in manifest["files"])

    db = tmp_path / "restored.sqlite3"
    result = manage("operator_import", str(old), database_url=f"sqlite:///{db}", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    with sqlite3.connect(db) as restored:
        assert restored.execute("SELECT id, text FROM beliefs_instruction").fetchall() == [
            (operator_with_evidence["instruction"], "Please note my name is Iain from now on.")
        ]
        assert (
            restored.execute("SELECT COUNT(*) FROM beliefs_confirmationuse").fetchone()[0]
            == (operator_with_evidence["uses"])
        )
        (evidence,) = restored.execute(
            "SELECT evidence_instruction_id FROM beliefs_belief WHERE key = 'name'"
        ).fetchone()
        assert evidence == operator_with_evidence["instruction"]
        # The admin's history and the group's permission name the kernel's model.
        assert restored.execute(
            "SELECT ct.app_label, ct.model FROM django_admin_log l "
            "JOIN django_content_type ct ON ct.id = l.content_type_id"
        ).fetchall() == [("operator_site", "instruction")]
        assert restored.execute(
            "SELECT p.codename, ct.app_label FROM auth_group_permissions gp "
            "JOIN auth_permission p ON p.id = gp.permission_id "
            "JOIN django_content_type ct ON ct.id = p.content_type_id"
        ).fetchall() == [("add_instruction", "operator_site")]


def test_only_the_moving_migrations_may_be_missing(operator_with_evidence, tmp_path) -> None:
    """The archive may lack the migrations that moved the models, and nothing else: one that lacks a
    migration that changed rows is still refused (import it with the version that wrote it)."""
    archive = tmp_path / "now.zip"
    call_command("operator_export", "-o", str(archive), stdout=StringIO())
    old = tmp_path / "older.zip"
    _as_before_the_move(archive, old)
    with zipfile.ZipFile(old) as z:
        manifest = json.loads(z.read("MANIFEST.json"))
    backup._check_migrations(manifest)  # accepted
    manifest["migrations"]["operator_site"].remove("0007_principal_evidence_since")
    with pytest.raises(backup.BackupError, match="written by an older operator") as refused:
        backup._check_migrations(manifest)
    assert "operator_site.0007_principal_evidence_since" in str(refused.value)
