"""`python3 manage.py operator_docs [--check]`: write the generated documents — docs/configuration.md
and .env.example from the settings declaration, and the README's list of tools from the registry.
With --check, write nothing and exit 1 if any of them is out of date (the tests check the same)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from operator_site import docs


class Command(BaseCommand):
    help = "Regenerate docs/configuration.md, .env.example and the README's tool list (or --check them)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--check", action="store_true", help="exit 1 if a generated document is stale")

    def handle(self, *args: Any, **opts: Any) -> None:
        stale = []
        for path, text in docs.generated().items():
            current = path.read_text(encoding="utf-8") if path.exists() else ""
            if current == text:
                continue
            stale.append(path)
            if not opts["check"]:
                path.write_text(text, encoding="utf-8")
                self.stdout.write(f"operator: wrote {_rel(path)}")
        if opts["check"] and stale:
            raise CommandError(
                f"out of date: {', '.join(_rel(p) for p in stale)} (run: python3 manage.py operator_docs)"
            )
        if not stale:
            self.stdout.write("operator: generated documents are up to date")


def _rel(path: Path) -> str:
    return str(path.relative_to(docs.ROOT))
