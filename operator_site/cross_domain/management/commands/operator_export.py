"""`python3 manage.py operator_export [--output FILE] [--with-token-digests]`: write one
self-describing archive of the whole operator (cross_domain/backup.py), and FILE.sha256 beside it.
Safe while the service runs: it reads one consistent snapshot and blocks no writer."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from operator_site.cross_domain.backup import export_archive


class Command(BaseCommand):
    help = "Export everything into one archive with a checksum (restore it with operator_import)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--output",
            "-o",
            type=Path,
            default=None,
            help="the archive to write (default: operator-export-<UTC time>.zip here)",
        )
        parser.add_argument(
            "--with-token-digests",
            action="store_true",
            help="include the principals' token digests (restored tokens keep working; keep the file secret)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        path = opts["output"] or Path(f"operator-export-{datetime.now(UTC):%Y%m%d-%H%M%S}.zip")
        report = export_archive(path, with_token_digests=opts["with_token_digests"])
        self.stdout.write(
            f"operator: exported {report.total} rows of {len(report.rows)} tables to {report.path}"
        )
        self.stdout.write(f"  sha256 {report.sha256} (also in {report.path.name}.sha256)")
        self.stdout.write(
            "  token digests: "
            + ("included" if report.with_token_digests else "left out (issue new tokens after a restore)")
        )
        broken = [name for name, check in report.checks.items() if not check["ok"]]
        if broken:
            self.stderr.write(
                f"operator: WARNING: the source does not verify ({', '.join(broken)}); exported as it is"
            )
        else:
            self.stdout.write("  verified: decision log hash chain, world-model and goal-model lineage")
