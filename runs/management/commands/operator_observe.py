"""`python3 manage.py operator_observe`: run the observe probes once, under its own run.

Each probe of `OPERATOR_OBSERVE_PROBES` is one brain call through the observe allowlist, and each
outcome one tainted observation (runs/observe.py). Prints the report as JSON.

Exit status: 0 when every probe was observed, and when there was nothing to do (no brain
configured: `"status": "brain_not_configured"`; no probes: `"no_probes"` — the run finishes
`skipped`); non-zero when a probe could not be carried out (it is still recorded; the run finishes
`error`), when another run holds the single-running lock (nothing is probed), or when the run went
stale under it.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from operator_site.refusals import Refusal
from runs import holding
from runs.keepalive import WORKER_STALE_AFTER_S
from runs.observe import observe


class Command(BaseCommand):
    help = "Run the observe probes through the brain and record each answer as a tainted observation."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--timeout", type=float, default=None, help="downstream deadline in s (default BRAIN_TIMEOUT_S)"
        )
        parser.add_argument(
            "--stale-after",
            type=int,
            default=WORKER_STALE_AFTER_S,
            help="run threshold, s (a background heartbeat keeps a live run fresh)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        holding.interrupt_on_sigterm()
        try:
            report = observe(timeout_s=opts["timeout"], stale_after_s=opts["stale_after"])
        except Refusal as refusal:
            raise CommandError(f"{refusal.code}: {refusal.reason}") from None
        self.stdout.write(json.dumps(report.as_dict(), indent=2, default=str))
        if report.status == "error":
            raise CommandError(report.reason or "a probe could not be carried out")
        if report.status == "stale":
            raise CommandError("the observe run went stale (another run took over); it stopped probing")
