"""`python3 manage.py operator_decision_log [--verify]`: print the decision log as Markdown (newest
last), or check its hash chain and report the first broken link (exit status 1)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from goals.models import DecisionLogEntry
from goals.services import render_markdown, verify_log


class Command(BaseCommand):
    help = "Print the decision log as Markdown, or --verify its hash chain."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--verify", action="store_true", help="check the chain; exit 1 at the first broken link"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["verify"]:
            check = verify_log()
            if not check.ok:
                raise CommandError(f"decision log broken at entry {check.broken_at}: {check.reason}")
            self.stdout.write(f"decision log intact: {check.entries} entries")
            return
        self.stdout.write(render_markdown(DecisionLogEntry.objects.order_by("id").iterator()))
