"""`python manage.py operator_tick MODE [--date YYYY-MM-DD] [--observe] [--json]`: one tick, safe to
call from cron or a systemd timer. Every mode but `status` runs under its own run (`runs/holding.py`),
the tick and the run's heartbeat in ONE transaction, so a tick whose run was taken over commits
nothing. Exit status: 0 done; 75 another run holds the lock (try again later); 1 refused, failed or
stale; 130 interrupted; 2 bad usage. docs/runs-and-ticks.md ("manage.py operator_tick") has it all.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from operator_site.cross_domain import ticks
from operator_site.errors import failed_step, log_failure
from operator_site.face.envelope import to_json
from operator_site.mail import delivery_summary
from operator_site.models import Principal
from operator_site.notifications import deliver_due
from operator_site.refusals import Refusal
from runs import holding
from runs.keepalive import WORKER_STALE_AFTER_S, KeepAlive
from runs.lock import StartedRun, heartbeat
from runs.models import MAX_STALE_AFTER_S, MIN_STALE_AFTER_S

logger = logging.getLogger("operator.ticks")
T = TypeVar("T")

EXIT_LOCK_HELD = 75  # EX_TEMPFAIL (sysexits.h): a temporary condition, try again later
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def tick_summary(answer: dict[str, Any]) -> str:
    """A few lines for a person reading a terminal or a timer's log."""
    run = answer.get("run", {})
    lines = [f"operator_tick {answer['mode']}: {run.get('status', '?')} (run {answer.get('run_id')})"]
    tick = answer.get("tick") or {}
    if tick.get("headline"):
        lines.append(f"  {tick['headline']}")
    if tick.get("note"):
        lines.append(f"  {tick['note']}")
    if answer.get("error"):
        lines.append(f"  {answer['error']}: {answer.get('reason') or run.get('summary', '')}")
    if "delivery" in answer:
        lines.append(f"  {delivery_summary(answer['delivery'])}")
    if "observe" in answer:
        observe = answer["observe"]
        lines.append(
            f"  observe: {observe.get('status')}"
            + (f" ({observe['reason']})" if observe.get("reason") else "")
        )
    for failed in answer.get("failed_steps") or []:
        lines.append(f"  step failed: {failed.get('step')} ({failed.get('error_id')})")
    lines.append("  (--json prints the full answer)")
    return "\n".join(lines)


def status_summary(result: dict[str, Any]) -> str:
    day = result.get("day") or {}
    lines = [
        f"operator_tick status: {result['date']} ({day.get('state', 'not_opened')}); nothing was written"
    ]
    if result.get("headline"):
        lines.append(f"  since the previous tick: {result['headline']}")
    figures = result.get("figures") or {}
    if figures.get("headline"):
        lines.append(f"  today: {figures['headline']}")
    runs = result.get("runs") or {}
    running = runs.get("running")
    if running:
        lines.append(
            f"  run lock: held by run {running['id']} ({running['kind']}, {running['holder']}, "
            f"last heartbeat {running['last_heartbeat']})"
        )
    else:
        last = runs.get("last_finished")
        after = f"; last run {last['id']} ({last['kind']}) finished {last['status']}" if last else ""
        lines.append(f"  run lock: free{after}")
    lines.append("  (--json prints the full answer)")
    return "\n".join(lines)


def step(name: str, failed: list[dict[str, Any]], fn: Callable[[], T]) -> T | None:
    """One step after the tick (delivery, observe), isolated: whatever it raises (but an interrupt)
    is logged and listed in `failed` — never its text, which the log keeps under the error id."""
    try:
        return fn()
    except Exception as exc:
        failed.append(failed_step(name, exc, log_failure(logger, "tick step %s", name)))
        return None


def _date(text: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not a date (YYYY-MM-DD): {text!r}") from None


def start_tick_run(principal: Principal, mode: str, stale_after_s: int) -> StartedRun:
    """Start the tick's run, or raise CommandError(75) naming the run that holds the lock."""
    try:
        return holding.start(
            principal,
            kind=f"tick:{mode}",
            stale_after_s=stale_after_s,
            note=f"manage.py operator_tick {mode}",
        )
    except Refusal as refusal:
        if refusal.code == "already_running":
            held = refusal.extra.get("running", {})
            raise CommandError(
                f"operator_tick {mode}: another run holds the lock — run {held.get('id')} "
                f"({held.get('kind')}, held by {held.get('holder')}, last heartbeat "
                f"{held.get('last_heartbeat')}); it becomes stale in {held.get('stale_in_s')} s. "
                "Nothing was done; try again later.",
                returncode=EXIT_LOCK_HELD,
            ) from None
        raise CommandError(
            f"operator_tick {mode}: {refusal.code}: {refusal.reason}", returncode=EXIT_FAILED
        ) from None


def fenced_tick(
    started: StartedRun, principal: Principal, mode: str, day: datetime.date | None
) -> dict[str, Any]:
    """The tick and its run's heartbeat in ONE transaction: a run taken over meanwhile (heartbeat
    refused, `run_stale`) rolls the tick back, so a replaced holder commits nothing."""
    with transaction.atomic():
        heartbeat(
            principal=principal, run_id=started.run.id, token=started.token, progress=f"tick {mode}: running"
        )
        return ticks.run_tick(principal=principal, mode=mode, day=day, run=started.run)


class Command(BaseCommand):
    help = "Run one tick (morning, start, check-in, night, status) under a run of the single-running lock."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("mode", choices=ticks.TICK_MODES)
        parser.add_argument(
            "--date",
            type=_date,
            default=None,
            help="the local date (YYYY-MM-DD); only night (closing a past day) and status take another day",
        )
        parser.add_argument(
            "--observe",
            action="store_true",
            help="also run the observe step (brain probes → tainted observations) under the same run",
        )
        parser.add_argument(
            "--json", action="store_true", help="print the tick's full answer as JSON (default: a summary)"
        )
        parser.add_argument(
            "--stale-after",
            type=int,
            default=WORKER_STALE_AFTER_S,
            help=f"the run's stale threshold in s ({MIN_STALE_AFTER_S}..{MAX_STALE_AFTER_S}, capped at "
            "OPERATOR_RUN_MAX_STALE_MINUTES; a background heartbeat keeps a live tick's run fresh)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        holding.interrupt_on_sigterm()
        mode, day = opts["mode"], opts["date"]
        if mode == "status":
            try:
                result = ticks.run_tick(principal=None, mode="status", day=day)
            except Refusal as refusal:
                raise CommandError(f"{refusal.code}: {refusal.reason}", returncode=EXIT_FAILED) from None
            self.stdout.write(to_json(result) if opts["json"] else status_summary(result))
            return
        if opts["observe"] and mode == "night":
            raise CommandError("--observe goes with morning, start or check-in, not night", returncode=2)
        with transaction.atomic():
            principal = Principal.objects.service(ticks.TICK_PRINCIPAL)
        started = start_tick_run(principal, mode, opts["stale_after"])
        # A background heartbeat keeps the run fresh while the tick works (a long delivery or observe
        # step included), so the threshold can be short: a killed tick gives the lock back soon.
        with KeepAlive(started, principal, progress=f"tick {mode}: working"):
            answer = self.tick_then_finish(started, principal, mode, day, opts["observe"])
        self.stdout.write(to_json(answer) if opts["json"] else tick_summary(answer))
        run = answer["run"]
        if run["status"] != "ok":
            why = f"{answer['error']}: {answer.get('reason')}" if answer.get("error") else run["summary"]
            raise CommandError(
                f"operator_tick {mode}: the run finished {run['status']} — {why}", returncode=EXIT_FAILED
            )

    def tick_then_finish(
        self,
        started: StartedRun,
        principal: Principal,
        mode: str,
        day: datetime.date | None,
        observe: bool,
    ) -> dict[str, Any]:
        """Everything after the run started: the fenced tick, delivery, the observe step, the finish.
        Always finishes the run (or finds it taken over); re-raises what it cannot answer for."""
        answer: dict[str, Any] = {"ok": True, "mode": mode, "run_id": started.run.id}
        try:
            answer["tick"] = fenced_tick(started, principal, mode, day)
        except Refusal as refusal:
            # Refused by the tick (nothing of it was written), or by the heartbeat (the run was
            # taken over: the tick was rolled back with it, and the run is no longer ours to finish).
            taken_over = bool(refusal.extra.get("stale"))
            final = (
                "stale"
                if taken_over
                else holding.finish(started, principal, "error", f"{refusal.code}: {refusal.reason}")
            )
            answer.update(ok=False, error=refusal.code, reason=refusal.reason)
            answer["run"] = {"status": final, "summary": refusal.reason}
            return answer
        except BaseException as exc:
            holding.finish_crashed(started, principal, exc, logger=logger, what=f"tick {mode}")
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise CommandError(f"operator_tick {mode}: interrupted", returncode=EXIT_INTERRUPTED) from exc
            raise
        summary = answer["tick"].get("headline") or f"{mode} tick done"
        status = "error" if answer["tick"].get("failed_steps") else "ok"
        failed: list[dict[str, Any]] = []
        try:
            if mode == "morning":
                # Each step after the tick is isolated: one that fails is recorded (and the run
                # finishes `error`), the next still runs.
                delivery = step("deliver_notices", failed, lambda: deliver_due().as_dict())
                if delivery is not None:
                    answer["delivery"] = delivery
            if observe:
                # Imported here: only the command, and only when asked, reaches the brain.
                from runs.observe import observe_step

                report = step("observe", failed, lambda: observe_step(run=started))
                if report is not None:
                    answer["observe"] = report.as_dict()
                    summary += f"; observe: {report.status}"
                    if report.status == "stale":
                        answer.update(ok=False, error="run_stale")
                        answer["run"] = {"status": "stale", "summary": report.reason}
                        return answer
                    if report.status == "error":
                        status, summary = "error", f"{summary} ({report.reason})"
            if failed:
                answer["failed_steps"] = failed
                status = "error"
                summary += "; failed: " + ", ".join(f"{f['step']} ({f['reason']})" for f in failed)
            with transaction.atomic():
                heartbeat(
                    principal=principal,
                    run_id=started.run.id,
                    token=started.token,
                    progress=f"tick {mode}: done",
                )
        except Refusal as refusal:  # the heartbeat after the tick: the run was taken over meanwhile
            answer.update(ok=False, error=refusal.code, reason=refusal.reason)
            answer["run"] = {"status": "stale", "summary": refusal.reason}
            return answer
        except BaseException as exc:
            holding.finish_crashed(started, principal, exc, logger=logger, what=f"tick {mode}")
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise CommandError(f"operator_tick {mode}: interrupted", returncode=EXIT_INTERRUPTED) from exc
            raise
        final = holding.finish(started, principal, status, summary)
        answer["ok"] = final == "ok"
        answer["run"] = {"status": final, "summary": summary}
        return answer


__all__ = ["Command", "fenced_tick", "start_tick_run"]
