"""The run lock: at most one `running` run (a partial unique index), a heartbeat as dead-man's switch,
a fencing token per run, stale recovery by conditional update, and the person's "End this run".

Every guarantee is a database constraint or a conditional update, so it holds across processes and
hosts; docs/runs-and-ticks.md explains the lock, its fencing and its cap.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from operator_site.models import Principal
from operator_site.refusals import Refusal
from runs.answers import RunStatusAnswer, answered_runs, run_status_of
from runs.checks import check_text
from runs.days import current_day
from runs.models import DEFAULT_STALE_AFTER_S, MAX_STALE_AFTER_S, MIN_STALE_AFTER_S, Run

RUN_TOKEN_PREFIX = "run_"  # noqa: S105 - a recognisable prefix, not a secret
MAX_KIND_CHARS = 64
MAX_NOTE_CHARS = 500
MAX_RUN_PROGRESS_CHARS = 1000
MAX_RUN_SUMMARY_CHARS = 4000
MAX_END_REASON_CHARS = 200

# A start that loses the insert race but then finds no running run (the winner finished in between)
# tries again; a few attempts are plenty, since each loss means someone else made progress.
_START_ATTEMPTS = 3


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _new_token() -> str:
    return RUN_TOKEN_PREFIX + secrets.token_urlsafe(32)


@dataclass
class StartedRun:
    """A started run, its fencing token (shown once), and the stale runs its start recovered.
    `asked_stale_after_s` is what the caller asked for when the operator's cap lowered it."""

    run: Run
    token: str
    recovered: list[Run] = field(default_factory=list)
    asked_stale_after_s: int | None = None


def max_stale_after_s() -> int:
    """The longest stale threshold the operator allows a run (OPERATOR_RUN_MAX_STALE_MINUTES)."""
    return max(MIN_STALE_AFTER_S, min(MAX_STALE_AFTER_S, settings.OPERATOR_RUN_MAX_STALE_MINUTES * 60))


def running_run() -> Run | None:
    """The run holding the lock, if any (the database allows at most one)."""
    return running_run_query().first()


def running_run_query() -> QuerySet[Run]:
    return Run.objects.select_related("holder", "day").filter(status=Run.Status.RUNNING).order_by("pk")[:1]


def last_finished_query() -> QuerySet[Run]:
    return answered_runs().exclude(status=Run.Status.RUNNING).order_by("-id")[:1]


def _run_as_answered(run_id: int) -> Run | None:
    return answered_runs().filter(id=run_id).first()


def _mark_stale(run: Run, *, principal: Principal | None, now: datetime, reason: str) -> bool:
    """Mark `run` stale if it is still running and its heartbeat is still past the threshold.

    A conditional update: a heartbeat that commits first moves `last_heartbeat_at` past the cutoff
    and this matches 0 rows (PostgreSQL re-checks the condition on the row it waited for).
    """
    cutoff = now - timedelta(seconds=run.stale_after_s)
    changed = Run.objects.filter(id=run.id, status=Run.Status.RUNNING, last_heartbeat_at__lt=cutoff).update(
        status=Run.Status.STALE, ended_at=now, ended_by=principal, end_reason=reason[:300]
    )
    return changed == 1


def _recover(current: Run, *, principal: Principal | None, now: datetime) -> bool:
    """Mark the running run `current` stale if its heartbeat is older than its threshold."""
    if current.overdue_s(now) <= 0:
        return False
    silent = round((now - current.last_heartbeat_at).total_seconds())
    who = principal.name if principal else "the operator"
    reason = f"no heartbeat for {silent} s (threshold {current.stale_after_s} s); marked stale by {who}"
    if not _mark_stale(current, principal=principal, now=now, reason=reason):
        return False
    current.refresh_from_db(from_queryset=answered_runs())  # with the rows its answer names
    return True


def recover_stale_runs(*, principal: Principal | None, now: datetime | None = None) -> list[Run]:
    """Mark every running run whose heartbeat is older than its threshold `stale`; returns them.

    The start of a run does this for the run in its way; the morning tick calls it. (There is at
    most one running run.) `principal` None means the operator itself (a scheduled tick).
    """
    now = now or timezone.now()
    current = running_run()
    if current is not None and _recover(current, principal=principal, now=now):
        return [current]
    return []


def _already_running(current: Run, now: datetime) -> Refusal:
    stale_in = max(0, round(-current.overdue_s(now)))
    details = {
        "id": current.id,
        "kind": current.kind,
        "holder": current.holder.name,
        "started": current.started_at,
        "last_heartbeat": current.last_heartbeat_at,
        "stale_after_s": current.stale_after_s,
        "stale_in_s": stale_in,
    }
    return Refusal(
        "already_running",
        f"Run {current.id} ({current.kind}, held by {current.holder.name}) is running since "
        f"{current.started_at:%Y-%m-%d %H:%M:%S} UTC; it becomes stale if it sends no heartbeat for "
        f"{stale_in} more seconds. Nothing was started.",
        running=details,
        retry_after_s=stale_in,
    )


def start_run(
    *,
    principal: Principal,
    kind: str | None = None,
    stale_after_s: int = DEFAULT_STALE_AFTER_S,
    note: str | None = None,
    now: datetime | None = None,
) -> StartedRun:
    """Start a run under the single-running lock, recovering a stale holder first.

    Refuses `already_running` (with the running run's id, kind, holder, started, last heartbeat) when
    a live run holds the lock. The returned token is the run's fencing token: heartbeat and finish
    need it, and it is not stored (only its digest).
    """
    kind = check_text("kind", kind, MAX_KIND_CHARS) or "run"
    note = check_text("note", note, MAX_NOTE_CHARS)
    if not MIN_STALE_AFTER_S <= stale_after_s <= MAX_STALE_AFTER_S:
        raise Refusal(
            "out_of_range", f"stale_after_s must be between {MIN_STALE_AFTER_S} and {MAX_STALE_AFTER_S}."
        )
    asked = None
    if stale_after_s > (cap := max_stale_after_s()):
        asked, stale_after_s = stale_after_s, cap
    now = now or timezone.now()
    recovered: list[Run] = []
    current = running_run()
    if current is not None:
        if _recover(current, principal=principal, now=now):
            recovered = [current]
        else:
            if current.overdue_s(now) > 0:
                # It looked dead, but a heartbeat or another start got there first: who holds it now?
                current = running_run()
            if current is not None:
                raise _already_running(current, now)
    day = current_day(principal=principal, via="operator_run_start", now=now)
    token = _new_token()
    for _ in range(_START_ATTEMPTS):
        try:
            with transaction.atomic():
                run = Run.objects.create(
                    kind=kind,
                    holder=principal,
                    status=Run.Status.RUNNING,
                    note=note,
                    started_at=now,
                    last_heartbeat_at=now,
                    stale_after_s=stale_after_s,
                    token_digest=token_digest(token),
                    day=day,
                )
        except IntegrityError:
            # Another start won the insert race. Read who holds the lock now; if it already
            # finished, the lock is free again: try once more.
            current = running_run()
            if current is not None:
                raise _already_running(current, now) from None
            continue
        if recovered:
            Run.objects.filter(id__in=[r.id for r in recovered], taken_over_by__isnull=True).update(
                taken_over_by=run
            )
            for stale in recovered:
                stale.taken_over_by = run
        return StartedRun(run=run, token=token, recovered=recovered, asked_stale_after_s=asked)
    raise Refusal("busy", "The run lock changed hands repeatedly while starting; try again.", retry=True)


def _update_held_run(run_id: int, token: str, action: str, **values: Any) -> Run:
    """Write `values` to the run `run_id` if `token` is its fencing token and it is still running —
    one conditional update, the fence itself — and answer the run as it now is. Nothing changed: the
    refusal says why (no such run, a wrong token, or no longer running: `stale: true`). Two
    statements either way; the token is compared in the update's condition and, on a refusal, again
    in constant time to tell a wrong token from a run that ended."""
    digest = token_digest(token or "")
    changed = Run.objects.filter(id=run_id, status=Run.Status.RUNNING, token_digest=digest).update(**values)
    run = _run_as_answered(run_id)
    if run is None:
        raise Refusal("not_found", f"There is no run {run_id}.", run_id=run_id)
    if changed:
        return run
    if not hmac.compare_digest(run.token_digest, digest):
        raise Refusal(
            "wrong_token", f"That token does not hold run {run_id}; nothing changed.", run_id=run_id
        )
    raise _not_running(run, action)


def _not_running(run: Run, action: str) -> Refusal:
    """Why a heartbeat or finish of a run that is no longer running changed nothing."""
    if run.status == Run.Status.CANCELLED and run.ended_by_id not in (None, run.holder_id):
        return Refusal(
            "run_ended",
            f"Run {run.id} was ended by {run.ended_by.name} at {run.ended_at:%Y-%m-%d %H:%M:%S} UTC "
            f"({run.end_reason}): its {action} changed nothing. Stop working under this run.",
            stale=True,
            run_id=run.id,
            status=run.status,
            end_reason=run.end_reason or None,
        )
    if run.status == Run.Status.STALE:
        took = f" and taken over by run {run.taken_over_by_id}" if run.taken_over_by_id else ""
        return Refusal(
            "run_stale",
            f"Run {run.id} was marked stale at {run.ended_at:%Y-%m-%d %H:%M:%S} UTC{took}: its {action} "
            "changed nothing. Stop working under this run.",
            stale=True,
            run_id=run.id,
            status=run.status,
            taken_over_by=run.taken_over_by_id,
            end_reason=run.end_reason or None,
        )
    return Refusal(
        "already_finished",
        f"Run {run.id} was already finished as {run.status} at {run.ended_at:%Y-%m-%d %H:%M:%S} UTC: its "
        f"{action} changed nothing. Stop working under this run.",
        stale=True,
        run_id=run.id,
        status=run.status,
    )


def heartbeat(
    *, principal: Principal, run_id: int, token: str, progress: str | None = None, now: datetime | None = None
) -> Run:
    """The dead-man's switch: refresh the run held by `token`.

    A heartbeat that arrives late but before anyone took over still refreshes the lease (the holder
    is alive and nobody replaced it). On a run already marked stale or finished it refuses with
    `stale: true`, telling the runner to stop; nothing is written.
    """
    progress = check_text("progress", progress, MAX_RUN_PROGRESS_CHARS)
    now = now or timezone.now()
    values: dict[str, Any] = {"last_heartbeat_at": now, "heartbeats": F("heartbeats") + 1}
    if progress:
        values["progress"] = progress
    return _update_held_run(run_id, token, "heartbeat", **values)


def finish_run(
    *,
    principal: Principal,
    run_id: int,
    token: str,
    status: str,
    summary: str | None = None,
    now: datetime | None = None,
) -> Run:
    """Close the run held by `token` as ok, error, skipped, cancelled or stale. Once: a second finish,
    or a finish after the run was taken over, changes nothing and says why."""
    if status not in Run.FINISH_STATUSES:
        raise Refusal("invalid_status", f"status must be one of {', '.join(Run.FINISH_STATUSES)}.")
    summary = check_text("summary", summary, MAX_RUN_SUMMARY_CHARS)
    now = now or timezone.now()
    return _update_held_run(
        run_id,
        token,
        "finish",
        status=status,
        summary=summary,
        ended_at=now,
        ended_by=principal,
        end_reason=f"finished by its holder as {status}",
    )


def end_run(*, principal: Principal, run_id: int, reason: str = "", now: datetime | None = None) -> Run:
    """A person ends a running run (the admin's "End this run"): whoever holds it, however long its
    threshold. Recorded on the run — `cancelled`, ended by this person, when and why — and the lock
    is free at once. The old holder's token fences nothing any more: its heartbeat and finish are
    conditional on `running` and change 0 rows, answering `run_ended` (stop working). Only a person
    (an active human principal) may do this; a run no longer running is refused, nothing changed."""
    if not principal.is_human or not principal.active:
        raise Refusal("not_human", "Only a person on the human allowlist can end a run.")
    reason = check_text("reason", reason, MAX_END_REASON_CHARS)
    now = now or timezone.now()
    why = f"ended by {principal.name} from the admin" + (f": {reason}" if reason else "")
    changed = Run.objects.filter(id=run_id, status=Run.Status.RUNNING).update(
        status=Run.Status.CANCELLED, ended_at=now, ended_by=principal, end_reason=why[:300]
    )
    run = _run_as_answered(run_id)
    if run is None:
        raise Refusal("not_found", f"There is no run {run_id}.", run_id=run_id)
    if not changed:
        raise Refusal(
            "not_running",
            f"Run {run.id} is {run.status}, not running: there is nothing to end.",
            run_id=run.id,
            status=run.status,
        )
    return run


def run_status(now: datetime | None = None) -> RunStatusAnswer:
    """The lock at a glance, for status reads: the running run (or None) and the last finished one."""
    now = now or timezone.now()
    return run_status_of(running_run(), last_finished_query().first(), now)
