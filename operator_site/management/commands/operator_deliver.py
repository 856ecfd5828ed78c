"""`python3 manage.py operator_deliver [--json]`: deliver every due notice, release those whose
directive lapsed, retry failures that are due. Safe to run from cron at any rate, and beside the
server. Prints one line saying what happened (with the console e-mail backend: "printed to the
console, not sent"); `--json` prints the ids by outcome instead."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from operator_site.mail import delivery_summary
from operator_site.notifications import deliver_due


class Command(BaseCommand):
    help = "Deliver due notices (email/webhook), release held ones whose directive lapsed, retry failures."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the notice ids by outcome as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        report = deliver_due().as_dict()
        self.stdout.write(
            json.dumps(report) if opts["json"] else f"operator_deliver: {delivery_summary(report)}"
        )
