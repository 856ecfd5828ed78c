"""`python3 manage.py operator_powers`: print docs/powers.md (every power granted and withheld)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from operator_site.powers import render_markdown


class Command(BaseCommand):
    help = "Print the table of every power granted and withheld (docs/powers.md)."

    def handle(self, *args: Any, **opts: Any) -> None:
        self.stdout.write(render_markdown(), ending="")
