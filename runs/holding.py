"""Holding the run lock around one of the operator's own workers (the executor, the observe step, a
tick): start the run, keep it alive from a background thread, and finish it whatever happens.

`manage.py operator_execute`, `operator_observe` and `operator_tick` all hold their run through
these; docs/runs-and-ticks.md explains the lock, the keep-alive and what each exit status means.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import transaction

from operator_site.errors import log_failure, short_reason
from operator_site.models import Principal
from operator_site.refusals import Refusal
from runs.keepalive import KeepAlive
from runs.lock import MAX_RUN_SUMMARY_CHARS, StartedRun, finish_run, start_run


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def interrupt_on_sigterm() -> None:
    """SIGTERM (systemd stopping a unit) stops a worker command as Ctrl-C does: the work in hand is
    failed or cancelled with its reason, and the run finishes `cancelled`."""
    signal.signal(signal.SIGTERM, _interrupt)


def start(
    principal: Principal,
    *,
    kind: str,
    stale_after_s: int,
    note: str | None = None,
    now: datetime | None = None,
) -> StartedRun:
    """Start a run (its own transaction); raises `Refusal("already_running")` when the lock is held."""
    with transaction.atomic():
        return start_run(principal=principal, kind=kind, stale_after_s=stale_after_s, note=note, now=now)


def finish(
    started: StartedRun, principal: Principal, status: str, summary: str, now: datetime | None = None
) -> str:
    """Finish the run; returns its final status (`stale` if it was taken over or ended meanwhile)."""
    try:
        with transaction.atomic():
            return finish_run(
                principal=principal,
                run_id=started.run.id,
                token=started.token,
                status=status,
                summary=summary[:MAX_RUN_SUMMARY_CHARS],
                now=now,
            ).status
    except Refusal:
        return "stale"


def finish_crashed(
    started: StartedRun,
    principal: Principal,
    exc: BaseException,
    *,
    logger: logging.Logger,
    what: str,
    now: datetime | None = None,
) -> str:
    """The worker raised: the run finishes `cancelled` when it was interrupted (SIGTERM, Ctrl-C), else
    `error`, logged in full under an error id (the run's summary names the type and the id only)."""
    interrupted = isinstance(exc, KeyboardInterrupt | SystemExit)
    why = type(exc).__name__ if interrupted else short_reason(exc, log_failure(logger, what))
    summary = f"{what} {'stopped' if interrupted else 'crashed'}: {why}"
    return finish(started, principal, "cancelled" if interrupted else "error", summary, now)


@contextmanager
def held_run(
    principal: Principal,
    *,
    kind: str,
    stale_after_s: int,
    progress: str,
    logger: logging.Logger,
    now: datetime | None = None,
) -> Iterator[StartedRun]:
    """`with held_run(...) as started:` the body runs under a started run, heartbeated in the
    background. If the body raises, the run is finished (`finish_crashed`) and the exception goes on;
    otherwise the caller finishes it with `finish`, saying how it went."""
    started = start(principal, kind=kind, stale_after_s=stale_after_s, now=now)
    try:
        with KeepAlive(started, principal, progress=progress):
            yield started
    except BaseException as exc:
        finish_crashed(started, principal, exc, logger=logger, what=f"{kind} run", now=now)
        raise
