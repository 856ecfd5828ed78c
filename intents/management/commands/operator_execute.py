"""`python3 manage.py operator_execute`: one executor pass under its own run.

Claims approved and queued intents with a lease, carries each out through the brain (executor
allowlist) and ends it `executed` or `failed` (intents/executor.py). Prints the report as JSON.

Exit status: 0 after a pass, also when no brain is configured (`"status": "brain_not_configured"`,
the run finishes `skipped`); non-zero when another run holds the single-running lock (nothing is
claimed) or the run went stale under it. Safe from cron or a systemd timer: a second copy started
while one runs is refused by the lock, and a copy that dies leaves claims that expire.
SIGTERM stops it like Ctrl-C: an intent whose brain call was in flight is failed ("interrupted"),
never retried, and the run finishes `cancelled`.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from intents.executor import DEFAULT_LIMIT, run_executor
from operator_site.refusals import Refusal
from runs import holding
from runs.keepalive import WORKER_STALE_AFTER_S


class Command(BaseCommand):
    help = "Execute approved and queued intents through the brain (one pass, under a run)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="most intents in this pass")
        parser.add_argument(
            "--timeout", type=float, default=None, help="downstream deadline in s (default BRAIN_TIMEOUT_S)"
        )
        parser.add_argument(
            "--lease", type=float, default=None, help="claim lease in s (default: the deadline + 60 s)"
        )
        parser.add_argument(
            "--stale-after",
            type=int,
            default=WORKER_STALE_AFTER_S,
            help="run threshold, s (a background heartbeat keeps a live executor's run fresh)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["limit"] < 1:
            raise CommandError("--limit must be at least 1")
        holding.interrupt_on_sigterm()
        try:
            report = run_executor(
                limit=opts["limit"],
                lease_s=opts["lease"],
                timeout_s=opts["timeout"],
                stale_after_s=opts["stale_after"],
            )
        except Refusal as refusal:
            raise CommandError(f"{refusal.code}: {refusal.reason}") from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(report.as_dict(), indent=2, default=str))
        if report.status == "stale":
            raise CommandError("the executor's run went stale (another run took over); it stopped claiming")
