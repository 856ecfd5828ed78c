"""`python3 manage.py operator_import ARCHIVE`: restore an operator_export archive into an EMPTY
database (migrated first), in one transaction, then verify it — row counts, the decision log's hash
chain, each lineage — and roll everything back if anything fails. Exit status 1, with one line,
when the archive or the database is not fit (altered, another schema version, not empty)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from operator_site.cross_domain.backup import BackupError, import_archive


class Command(BaseCommand):
    help = "Restore an operator_export archive into an empty database and verify it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("archive", type=Path)

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            report = import_archive(opts["archive"])
        except BackupError as exc:
            raise CommandError(f"operator_import: {exc}") from None
        manifest = report.manifest
        self.stdout.write(
            f"operator: restored {report.total} rows of {len(report.rows)} tables from {opts['archive']} "
            f"(written {manifest.get('created_at')} from {manifest.get('source_database')})"
        )
        checks = report.checks
        self.stdout.write(
            f"  verified: counts; decision log ({checks['decision_log']['entries']} entries); world model "
            f"({checks['world_model']['versions']} versions); goal model "
            f"({checks['goal_model']['versions']} versions)"
        )
        if not manifest.get("includes_token_digests"):
            self.stdout.write(
                "  tokens were not in the archive: `python3 manage.py serve` issues the owner a new one; "
                "others: python3 manage.py operator_token create NAME --rotate"
            )
