"""A worker's heartbeat from a background thread, so its run can use a short stale threshold: a live
worker is never taken for dead during a long step, and a killed one (its thread dies with it) gives
the lock back soon. A refused heartbeat (taken over, or ended by the person) stops the thread and is
kept in `lost`. docs/runs-and-ticks.md ("The cap") explains the trade-off.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from django.db import connection, transaction

from operator_site.models import Principal
from operator_site.refusals import Refusal
from runs.lock import MAX_RUN_PROGRESS_CHARS, StartedRun, heartbeat

logger = logging.getLogger("operator.runs")

# The stale threshold of the operator's own workers (executor, observe, ticks): a killed one gives the
# lock back within two minutes. Long steps are covered by the background heartbeat, not the threshold.
WORKER_STALE_AFTER_S = 120


class KeepAlive:
    """`with KeepAlive(started, principal): ...` — heartbeats `started` in the background."""

    def __init__(
        self,
        started: StartedRun,
        principal: Principal,
        *,
        every_s: float | None = None,
        progress: str = "working",
    ) -> None:
        self.started = started
        self.principal = principal
        self.every_s = every_s if every_s is not None else max(1.0, started.run.stale_after_s / 4)
        self.progress = progress
        self.beats = 0
        self.lost: Refusal | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"operator-keepalive-run-{started.run.id}", daemon=True
        )

    def __enter__(self) -> KeepAlive:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        # A beat in flight finishes on its own (it is one short statement); the worker does not wait
        # on a slow database to finish its own run.
        self._thread.join(timeout=5)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.every_s):
                try:
                    with transaction.atomic():
                        heartbeat(
                            principal=self.principal,
                            run_id=self.started.run.id,
                            token=self.started.token,
                            progress=self.progress[:MAX_RUN_PROGRESS_CHARS],
                        )
                    self.beats += 1
                except Refusal as refusal:
                    # Finished by the worker itself a moment ago (already_finished) is the normal end;
                    # taken over or ended by the person is worth a warning.
                    self.lost = refusal
                    level = logging.INFO if refusal.code == "already_finished" else logging.WARNING
                    logger.log(level, "run %s: heartbeat refused (%s)", self.started.run.id, refusal.code)
                    return
                except Exception:
                    logger.exception("run %s: background heartbeat failed; retrying", self.started.run.id)
        finally:
            connection.close()
