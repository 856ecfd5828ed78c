"""Back up and restore the person's operator: one self-describing archive of everything.

`export_archive(path)` writes a zip file:

- `MANIFEST.json` — what this is (format, version, the operator's and Django's versions, the source
  database), the migrations the data fits, and one entry per table: model, file, rows, SHA-256;
  `checksum` is the SHA-256 of that file list, so the manifest vouches for every byte;
- `data/NN-<app>.<model>.jsonl` — one JSON object per row (Django's serialisation of the model,
  natural keys for users, groups, permissions and content types; datetimes to the microsecond);
- `README.txt` — the same in words, for a person who finds the file in ten years.

Next to it, `<archive>.sha256` in `sha256sum -c` format.

Everything is exported — principals, admin logins, beliefs and their lineage, the goal model and
its lineage, the board, decisions and the decision log, intents and their events, directives,
runs, days, ticks, progress, observations, audit, notices — from one consistent snapshot of the
database (REPEATABLE READ on PostgreSQL, a read transaction on SQLite: writers are not blocked).
Principals' token digests are left out unless asked (`with_token_digests`): a restored operator
then issues new tokens (`serve` does for the owner; `operator_token create NAME --rotate` for the
others). Sessions and rate-limit counters are not exported: they are transient.

`import_archive(path)` restores into an EMPTY database of the same schema (it migrates first),
in ONE transaction, then verifies — row counts against the manifest, the decision log's hash
chain, each lineage (versions 1..n, every change's pre-image equal to the previous post-image of
its entity, the last post-image equal to the live row) — and rolls everything back if any check
fails. It moves an operator between SQLite and PostgreSQL as well. An archive written before a
model moved between apps (`MOVED_MODELS`) imports with its labels read as the new ones.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import io
import json
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import django
from django.apps import apps
from django.core import serializers
from django.core.management import call_command
from django.db import connection, models, transaction
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from beliefs.services import WORLD_MODEL
from goals.goal_model import GOAL_MODEL
from goals.services import verify_log
from operator_site import __version__
from operator_site.sql import export_snapshot, insert_raw, reset_sequences

FORMAT = "operator-export"
FORMAT_VERSION = 1
# The apps whose tables are the operator's data, in an order where what is referenced by natural
# key (users, groups) comes first. Everything else (sessions, content types, permissions) is
# transient or recreated by `migrate`.
APPS = ("auth", "admin", "operator_site", "beliefs", "goals", "intents", "runs")
SKIP = {
    "operator_site.ratecounter",  # per-window request counts: transient
    "auth.permission",  # recreated by `migrate` (referred to by natural key)
}
# Models that moved to another app while keeping their table: an archive written before the move
# names them (and their content types and permissions, by natural key) under the old label, and
# lacks the migrations that moved them, which changed Django's bookkeeping, not a row. Such an
# archive imports: its labels are read as the new ones (`_relabel`).
MOVED_MODELS = {
    "beliefs.instruction": "operator_site.instruction",
    "beliefs.confirmationuse": "operator_site.confirmationuse",
}
MOVE_MIGRATIONS = {
    "operator_site": {"0008_evidence_moves_in"},
    "goals": {"0005_evidence_instruction_in_the_kernel"},
    "beliefs": {"0005_evidence_moves_out"},
}
MIGRATION_APPS = (
    "contenttypes",
    "auth",
    "admin",
    "sessions",
    "operator_site",
    "beliefs",
    "goals",
    "intents",
    "runs",
)


class BackupError(Exception):
    """The archive cannot be written, read or restored: the message says why and what to do."""


# --- what is exported ------------------------------------------------------------------------------------
def exported_models() -> list[type[models.Model]]:
    out = []
    for label in APPS:
        for model in apps.get_app_config(label).get_models():
            if model._meta.label_lower in SKIP or model._meta.proxy or not model._meta.managed:
                continue
            out.append(model)
    # Within the list, a model referenced by natural key is loaded before the models that use it.
    return serializers.sort_dependencies([(None, out)], allow_cycles=True)


def applied_migrations() -> dict[str, list[str]]:
    recorder = MigrationRecorder(connection)
    applied: dict[str, list[str]] = {}
    for app, name in sorted(recorder.applied_migrations()):
        if app in MIGRATION_APPS:
            applied.setdefault(app, []).append(name)
    return applied


def _encode(value: Any) -> Any:
    """JSON for a serialised field value, exact: datetimes to the microsecond (Django's own JSON
    encoder cuts them to milliseconds, which would break the decision log's hash chain)."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return bytes(value).hex()
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"cannot export a value of type {type(value).__name__}")


def _rows(model: type[models.Model], with_token_digests: bool) -> Iterator[str]:
    queryset = model._base_manager.order_by("pk")
    for record in serializers.serialize(
        "python", queryset.iterator(chunk_size=2000), use_natural_foreign_keys=True
    ):
        if model._meta.label_lower == "operator_site.principal" and not with_token_digests:
            record["fields"]["token_digest"] = None
        yield json.dumps(record, default=_encode, ensure_ascii=False, sort_keys=True)


@contextmanager
def snapshot() -> Iterator[None]:
    """One consistent view of the whole database for the export, without blocking writers."""
    with export_snapshot():  # the database seam (operator_site/sql/)
        yield


def _file_list_checksum(files: list[dict[str, Any]]) -> str:
    canonical = json.dumps(files, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class ExportReport:
    path: Path
    sha256: str
    rows: dict[str, int]
    checks: dict[str, Any]
    with_token_digests: bool

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def export_archive(path: Path, *, with_token_digests: bool = False) -> ExportReport:
    """Write the archive (and its .sha256) to `path`; see the module docstring."""
    path = Path(path)
    files: list[dict[str, Any]] = []
    # Written beside the target and renamed when complete: a crash never leaves a half archive
    # under the final name, and a large history is streamed to disk, not held in memory.
    partial = path.with_name(path.name + ".partial")
    with snapshot(), zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        migrations = applied_migrations()
        checks = verify()
        for index, model in enumerate(exported_models(), start=1):
            label = model._meta.label_lower
            name = f"data/{index:02d}-{label}.jsonl"
            digest = hashlib.sha256()
            count = 0
            with archive.open(name, "w") as out:
                for line in _rows(model, with_token_digests):
                    data = (line + "\n").encode("utf-8")
                    digest.update(data)
                    out.write(data)
                    count += 1
            files.append({"model": label, "file": name, "rows": count, "sha256": digest.hexdigest()})
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "created_at": timezone.now().isoformat(),
            "operator_version": __version__,
            "django_version": _django_version(),
            "source_database": connection.vendor,
            "includes_token_digests": with_token_digests,
            "includes_password_hashes": True,
            "migrations": migrations,
            "verified_at_export": checks,
            "files": files,
            "checksum": _file_list_checksum(files),
        }
        archive.writestr("MANIFEST.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        archive.writestr("README.txt", _readme(manifest))
    sha = _file_sha256(partial)
    partial.replace(path)
    path.with_name(path.name + ".sha256").write_text(f"{sha}  {path.name}\n")
    return ExportReport(path, sha, {f["model"]: f["rows"] for f in files}, checks, with_token_digests)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _django_version() -> str:
    return django.get_version()


def _readme(manifest: dict[str, Any]) -> str:
    total = sum(f["rows"] for f in manifest["files"])
    return (
        "An export of one person's operator (the durable memory and doorway for their AI agents).\n\n"
        f"Written {manifest['created_at']} by operator {manifest['operator_version']} from a "
        f"{manifest['source_database']} database: {len(manifest['files'])} tables, {total} rows.\n\n"
        "MANIFEST.json describes it: the migrations the data fits, and per table its model, file, row\n"
        "count and SHA-256; `checksum` is the SHA-256 of that file list (canonical JSON). Each file in\n"
        "data/ holds one JSON object per row: {model, pk, fields}, Django's serialisation.\n\n"
        "Restore: python3 manage.py operator_import <this file>  (into an empty database).\n"
        + (
            "Token digests of principals are NOT included: issue new tokens after a restore.\n"
            if not manifest["includes_token_digests"]
            else "Token digests of principals ARE included: existing tokens keep working.\n"
        )
        + "Admin logins' password hashes are included: keep this file private.\n"
    )


# --- verification (at export, and after an import) -------------------------------------------------------
def verify() -> dict[str, Any]:
    """The integrity checks: the decision log's hash chain and each lineage. Raises nothing."""
    log = verify_log()
    checks: dict[str, Any] = {
        "decision_log": {
            "ok": log.ok,
            "entries": log.entries,
            "broken_at": log.broken_at,
            "reason": log.reason,
        }
    }
    for key, lineage in (("world_model", WORLD_MODEL), ("goal_model", GOAL_MODEL)):
        checks[key] = verify_lineage(lineage)
    return checks


def verify_lineage(lineage: Any) -> dict[str, Any]:
    """Versions 1..n, each extending the one before; per entity, every change's pre-image equal to
    the previous change's post-image; the last post-image equal to the live row."""
    numbers = list(lineage.version_model.objects.order_by("number").values_list("number", "supersedes"))
    problems = [
        f"version {number} extends {supersedes}, not {position - 1}"
        for position, (number, supersedes) in enumerate(numbers, start=1)
        if number != position or supersedes != position - 1
    ]
    previous: dict[str, Any] = {}
    changes = lineage.change_model.objects.order_by("entity", "version_id").values_list(
        "entity", "version_id", "before", "after"
    )
    for entity, version, before, after in changes.iterator(chunk_size=2000):
        if entity in previous and previous[entity] != before:
            problems.append(f"{entity} at version {version}: its pre-image is not the previous post-image")
        previous[entity] = after
    for entity, after in previous.items():
        if lineage.store.snapshot(entity) != after:
            problems.append(f"{entity}: the live row differs from its last recorded post-image")
    return {
        "ok": not problems,
        "versions": len(numbers),
        "entities": len(previous),
        "problems": problems[:20],
    }


# --- import -----------------------------------------------------------------------------------------------
@dataclass
class ImportReport:
    rows: dict[str, int] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def read_manifest(archive: zipfile.ZipFile) -> dict[str, Any]:
    try:
        manifest = json.loads(archive.read("MANIFEST.json"))
    except KeyError:
        raise BackupError("this zip file has no MANIFEST.json: it is not an operator export") from None
    except ValueError as exc:
        raise BackupError(f"MANIFEST.json is not valid JSON ({exc})") from None
    if manifest.get("format") != FORMAT:
        raise BackupError(f"this is not an operator export (format {manifest.get('format')!r})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise BackupError(
            f"export format version {manifest.get('format_version')} is not readable by this operator "
            f"(it reads version {FORMAT_VERSION})"
        )
    if not _same(_file_list_checksum(manifest.get("files", [])), manifest.get("checksum")):
        raise BackupError("MANIFEST.json's checksum does not match its file list: the archive was altered")
    return manifest


def _same(digest: str, expected: Any) -> bool:
    """Digests compared in constant time (the project's rule for every digest comparison)."""
    return isinstance(expected, str) and hmac.compare_digest(digest.encode(), expected.encode())


def _check_files(archive: zipfile.ZipFile, manifest: dict[str, Any]) -> None:
    for entry in manifest["files"]:
        try:
            data = archive.read(entry["file"])
        except KeyError:
            raise BackupError(
                f"{entry['file']} is listed in the manifest but missing from the archive"
            ) from None
        if not _same(hashlib.sha256(data).hexdigest(), entry["sha256"]):
            raise BackupError(
                f"{entry['file']} does not match its SHA-256: the archive is damaged or altered"
            )


def _check_sidecar(path: Path) -> None:
    sidecar = path.with_name(path.name + ".sha256")
    if not sidecar.exists():
        return
    expected = sidecar.read_text().split()[0] if sidecar.read_text().strip() else ""
    actual = _file_sha256(path)
    if not _same(expected, actual):
        raise BackupError(f"{path.name} does not match {sidecar.name}: the archive is damaged or altered")


def _check_migrations(manifest: dict[str, Any]) -> None:
    here = applied_migrations()
    theirs = manifest.get("migrations", {})
    missing_here = sorted(
        f"{app}.{n}" for app, names in theirs.items() for n in names if n not in here.get(app, [])
    )
    missing_there = sorted(
        f"{app}.{n}"
        for app, names in here.items()
        for n in names
        if n not in theirs.get(app, []) and n not in MOVE_MIGRATIONS.get(app, ())
    )
    if missing_here:
        raise BackupError(
            "the archive was written by a newer operator (migrations unknown here: "
            f"{_some(missing_here)}); upgrade this checkout, then import"
        )
    if missing_there:
        raise BackupError(
            f"the archive was written by an older operator ({manifest.get('operator_version')}; it lacks "
            f"migrations {_some(missing_there)}): import it with the version that wrote it, then upgrade "
            "(docs/deploy.md)"
        )


def _some(names: list[str]) -> str:
    return ", ".join(names[:5]) + ("…" if len(names) > 5 else "")


def _check_empty(models_: list[type[models.Model]]) -> None:
    held = {m._meta.label: n for m in models_ if (n := m._base_manager.count())}
    if held:
        listed = ", ".join(f"{n} {label}" for label, n in sorted(held.items())[:5])
        raise BackupError(
            f"the database is not empty ({listed}…): import into an empty database (a new DATABASE_URL, "
            "or drop and re-create this one); nothing was changed"
        )


def import_archive(path: Path, *, migrate: bool = True) -> ImportReport:
    """Restore the archive into an empty database, verify it, or change nothing (BackupError)."""
    path = Path(path)
    if not path.is_file():
        raise BackupError(f"{path} is not a file")
    _check_sidecar(path)
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise BackupError(f"{path} is not a zip file: not an operator export") from None
    with archive:
        manifest = read_manifest(archive)
        _check_files(archive, manifest)
        manifest = _relabel_manifest(manifest)
        if migrate:
            call_command("migrate", interactive=False, verbosity=0)
        _check_migrations(manifest)
        known = {m._meta.label_lower: m for m in exported_models()}
        unknown = [f["model"] for f in manifest["files"] if f["model"] not in known]
        if unknown:
            raise BackupError(f"the archive holds tables this operator does not have: {', '.join(unknown)}")
        report = ImportReport(manifest=manifest)
        with transaction.atomic():
            _check_empty(list(known.values()))
            for entry in manifest["files"]:
                model = known[entry["model"]]
                report.rows[entry["model"]] = _load(archive, entry, model)
            reset_sequences(list(known.values()))
            report.checks = verify()
            counted = {label: known[label]._base_manager.count() for label in report.rows}
            expected = {f["model"]: f["rows"] for f in manifest["files"]}
            report.checks["counts"] = {"ok": counted == expected, "rows": sum(counted.values())}
            failed = [name for name, check in report.checks.items() if not check["ok"]]
            if failed:
                raise BackupError(
                    f"the restored data did not verify ({', '.join(failed)}: "
                    f"{json.dumps({k: report.checks[k] for k in failed}, default=str)[:600]}); "
                    "everything was rolled back"
                )
    return report


def _load(archive: zipfile.ZipFile, entry: dict[str, Any], model: type[models.Model]) -> int:
    with archive.open(entry["file"]) as raw:
        records = [
            _relabel(json.loads(line), model)
            for line in io.TextIOWrapper(raw, encoding="utf-8")
            if line.strip()
        ]
    strays = {str(r.get("model")).lower() for r in records} - {entry["model"]}
    if strays:
        raise BackupError(f"{entry['file']} holds rows of another table ({', '.join(sorted(strays))})")
    if len(records) != entry["rows"]:
        raise BackupError(f"{entry['file']} holds {len(records)} rows, the manifest says {entry['rows']}")
    objects = []
    m2m = []
    for item in serializers.deserialize("python", records, handle_forward_references=True):
        if item.deferred_fields:
            raise BackupError(f"{entry['file']}: a row refers to something the archive does not hold")
        objects.append(item.object)
        if item.m2m_data:
            m2m.append(item)
    insert_raw(model, objects)
    for item in m2m:
        for accessor, values in item.m2m_data.items():
            getattr(item.object, accessor).set(values)
    return len(objects)


# --- archives written before a model moved ------------------------------------------------------------
def _moved(label: Any) -> Any:
    return MOVED_MODELS.get(label.lower(), label) if isinstance(label, str) else label


def _relabel_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest with each file's model under its current label (read after its checksum)."""
    files = [{**entry, "model": _moved(entry.get("model"))} for entry in manifest["files"]]
    return {**manifest, "files": files}


def _moved_key(app_label: Any, model_name: Any) -> tuple[Any, Any]:
    """A content type's natural key, `[app, model]`, under the model's current label."""
    if isinstance(app_label, str) and isinstance(model_name, str):
        moved = MOVED_MODELS.get(f"{app_label}.{model_name}".lower())
        if moved:
            app_label, model_name = moved.split(".")
    return app_label, model_name


def _relabel(record: dict[str, Any], model: type[models.Model]) -> dict[str, Any]:
    """One row of the archive with the labels of moved models read as their current ones: the row's
    own model, and the natural keys of content types (`[app, model]`, the admin's history) and of
    permissions (`[codename, app, model]`, users' and groups' permissions) that name one. Only
    fields that hold such keys are read: text that happens to look like one is left alone."""
    if not isinstance(record, dict):
        return record  # refused by the checks that follow
    record = {**record, "model": _moved(record.get("model"))}
    fields = record.get("fields")
    if not isinstance(fields, dict):
        return record
    fields = dict(fields)
    for related in [*model._meta.fields, *model._meta.many_to_many]:
        value = fields.get(related.name)
        if not related.is_relation or not isinstance(value, list):
            continue
        target = related.related_model._meta.label_lower
        if target == "contenttypes.contenttype" and len(value) == 2:
            fields[related.name] = list(_moved_key(*value))
        elif target == "auth.permission":
            fields[related.name] = [
                [key[0], *_moved_key(key[1], key[2])] if isinstance(key, list) and len(key) == 3 else key
                for key in value
            ]
    record["fields"] = fields
    return record
