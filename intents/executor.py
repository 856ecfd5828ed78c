"""The executor: carries out approved and queued intents through the brain, each at most once.

Claim (a lease), record the attempt (committed before the brain is called), make one brain call
through the handler for the intent's type (`intents/handlers.py`), end `executed` or `failed`.
docs/gate.md ("The executor") explains why a handler never runs twice for one intent. Never call
this module inside a transaction: the attempt must be committed before the brain is called.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from intents.gate import PROPOSAL_TYPES
from intents.handlers import HANDLERS, BrainCall, HandlerError, handler_for
from intents.lifecycle import log_event, transition_intent
from intents.models import Intent, IntentStatus
from operator_site.errors import log_failure, short_reason
from operator_site.models import Principal
from operator_site.refusals import Refusal
from runs import holding
from runs.brain import BrainError, BrainRefused, call_brain, check_allowed
from runs.keepalive import WORKER_STALE_AFTER_S
from runs.lock import StartedRun, heartbeat

logger = logging.getLogger("operator.executor")

EXECUTOR_PRINCIPAL = "operator-executor"
IDEMPOTENCY_META_KEY = "io.operator/idempotency-key"
DEFAULT_LEASE_MARGIN_S = 60.0
DEFAULT_LIMIT = 50
CLAIMABLE = (IntentStatus.APPROVED, IntentStatus.QUEUED)
MAX_RESULT_TEXT_CHARS = 4000
MAX_ARGUMENT_CHARS = 500


def execution_key(intent: Intent) -> str:
    """The idempotency key sent to the brain: one per intent and payload, stable across claims."""
    text = f"operator-intent|{intent.id}|{intent.idempotency_key}|{intent.payload_digest}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# --- claims --------------------------------------------------------------------------------------------
@dataclass
class Claim:
    intent: Intent
    token: str
    expires_at: datetime
    reclaimed: bool  # it was `executing` under someone else's expired lease


def _claimable(now: datetime) -> Any:
    qs = (
        Intent.objects.filter(
            Q(status__in=CLAIMABLE) | Q(status=IntentStatus.EXECUTING, lease_expires_at__lt=now)
        )
        # A proposal is applied by the person's approval itself, never by the executor.
        .exclude(action_type__in=PROPOSAL_TYPES)
        .order_by("id")
    )
    if connection.features.has_select_for_update_skip_locked:
        # PostgreSQL: a row another executor is claiming right now is skipped, not waited for.
        qs = qs.select_for_update(skip_locked=True)
    # SQLite: the IMMEDIATE transaction already holds the database's write lock.
    return qs


def claim_next(
    *,
    principal: Principal,
    lease_s: float,
    holder: str,
    now: datetime,
    exclude: set[int] | frozenset = frozenset(),
) -> Claim | None:
    """Claim the oldest claimable intent (not in `exclude`) with a lease of `lease_s`; None if none.

    Approved/queued intents move to `executing` through `transition_intent` (the legal-move table
    and a compare-and-set); an `executing` intent under an expired lease is re-leased by a
    compare-and-set on its old token. Either way exactly one claimant wins. An intent whose claim
    raises (a poisoned row) is left where it was, logged, added to `exclude` (when it is a set: the
    caller's pass skips it) and the next one is claimed instead.
    """
    skip = set(exclude)
    for _ in range(_CLAIM_ATTEMPTS):
        picked: list[int] = []
        try:
            claim = _claim_one(
                principal=principal, lease_s=lease_s, holder=holder, now=now, exclude=skip, picked=picked
            )
        except Exception:
            if not picked:
                raise  # not about one intent (the database is gone): the pass cannot go on
            # Claiming this one intent failed (a poisoned row): its claim was rolled back, it stays
            # where it was, logged; the pass goes on without it.
            log_failure(logger, "executor: claiming intent %s", picked[0])
            if isinstance(exclude, set):
                exclude.add(picked[0])  # the caller's pass skips it from now on
            skip.add(picked[0])
            continue
        if not isinstance(claim, int):
            return claim
        skip.add(claim)  # lost that one to someone else: try the next
    return None


_CLAIM_ATTEMPTS = 20


def _claim_one(
    *,
    principal: Principal,
    lease_s: float,
    holder: str,
    now: datetime,
    exclude: set[int],
    picked: list[int] | None = None,
) -> Claim | int | None:
    """One claim attempt: the claim, None (nothing claimable), or the id of an intent lost to a race.
    The id of the intent it picked is appended to `picked` (so a failure can be pinned on it)."""
    token = secrets.token_hex(16)
    expires = now + timedelta(seconds=lease_s)
    lease = {"lease_token": token, "lease_holder": holder[:200], "lease_expires_at": expires}
    with transaction.atomic():
        intent = _claimable(now).exclude(id__in=exclude).first()
        if intent is None:
            return None
        if picked is not None:
            picked.append(intent.id)
        if intent.status == IntentStatus.EXECUTING:
            won = Intent.objects.filter(
                id=intent.id,
                status=IntentStatus.EXECUTING,
                lease_token=intent.lease_token,
                lease_expires_at__lt=now,
            ).update(updated_at=now, claims=F("claims") + 1, **lease)
            if not won:
                return intent.id
            log_event(
                intent,
                "reclaimed",
                by=principal,
                via="executor",
                from_status=intent.status,
                to_status=intent.status,
                note=f"the lease of {intent.lease_holder or 'an executor'} expired "
                f"at {intent.lease_expires_at:%Y-%m-%d %H:%M:%S} UTC",
                data={"lease_expires_at": expires.isoformat(), "holder": holder[:200]},
                now=now,
            )
            reclaimed = True
        else:
            try:
                transition_intent(
                    principal=principal,
                    intent_id=intent.id,
                    to=IntentStatus.EXECUTING,
                    via="executor",
                    note="claimed by the executor",
                    now=now,
                    fields={**lease, "claims": F("claims") + 1},
                    data={"lease_expires_at": expires.isoformat(), "holder": holder[:200]},
                )
            except Refusal:
                return intent.id  # it moved meanwhile (cancelled, or another claimant)
            reclaimed = False
    intent.refresh_from_db()
    return Claim(intent=intent, token=token, expires_at=expires, reclaimed=reclaimed)


def _mark_attempt(
    claim: Claim, *, principal: Principal, call: BrainCall, key: str, timeout_s: float, now: datetime
) -> bool:
    """Record, committed, that this claim is about to call the brain. False: it may not call."""
    with transaction.atomic(durable=True):
        marked = Intent.objects.filter(
            id=claim.intent.id,
            status=IntentStatus.EXECUTING,
            lease_token=claim.token,
            attempted_at__isnull=True,
            lease_expires_at__gt=now + timedelta(seconds=timeout_s),
        ).update(attempted_at=now, execution_key=key, updated_at=now)
        if marked:
            log_event(
                claim.intent,
                "attempt",
                by=principal,
                via="executor",
                from_status=IntentStatus.EXECUTING,
                to_status=IntentStatus.EXECUTING,
                note=f"calling {call.tool} on the brain",
                data={"tool": call.tool, "execution_key": key, "timeout_s": timeout_s},
                now=now,
            )
    return bool(marked)


# --- outcomes ------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    intent_id: int
    action_type: str
    status: str  # executed | failed | lost
    error: str | None = None
    reason: str | None = None
    tool: str | None = None
    called: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_ARGUMENT_CHARS:
        return value[:MAX_ARGUMENT_CHARS] + f"… ({len(value)} characters)"
    return value


def _finish(
    claim: Claim, to: str, *, principal: Principal, result: dict[str, Any], note: str, now: datetime
) -> bool:
    """End the claimed intent `to` (executed | failed) with `result`; compare-and-set on the lease."""
    try:
        with transaction.atomic():
            transition_intent(
                principal=principal,
                intent_id=claim.intent.id,
                to=to,
                via="executor",
                note=note[:1000],
                now=now,
                where={"lease_token": claim.token},
                fields={"lease_token": "", "lease_expires_at": None, "execution_result": result},
                data=result,
            )
        return True
    except Refusal as refusal:
        # Moved by someone else (a tool call, or a reclaim after our lease expired): keep what the
        # brain answered in the history anyway, so it is never lost.
        with transaction.atomic():
            log_event(
                claim.intent,
                "execution_result",
                by=principal,
                via="executor",
                note=f"not recorded on the intent: {refusal.reason}"[:1000],
                data=result,
                now=now,
            )
        return False


def _fail_without_call(
    claim: Claim, *, principal: Principal, error: str, reason: str, now: datetime, tool: str | None = None
) -> Outcome:
    result = {"ok": False, "called": False, "error": error, "reason": reason, "tool": tool}
    done = _finish(claim, IntentStatus.FAILED, principal=principal, result=result, note=reason, now=now)
    intent = claim.intent
    status = IntentStatus.FAILED if done else "lost"
    return Outcome(intent.id, intent.action_type, status, error=error, reason=reason, tool=tool)


def fail_crashed(claim: Claim, *, principal: Principal, exc: BaseException, now: datetime) -> Outcome:
    """Carrying out a claimed intent raised: fail the intent, saying why, and log the details.

    Whether the brain was called is read back from the intent (`attempted_at` is committed before
    any call), so the record says so honestly. If even the failure cannot be recorded (the database
    is gone), the outcome is `lost`: the lease lapses and a later pass finds it, as after a crash."""
    error_id = log_failure(logger, "executor: intent %s", claim.intent.id)
    intent = claim.intent
    try:
        attempted = Intent.objects.filter(id=intent.id, attempted_at__isnull=False).exists()
        reason = (
            f"The executor failed while carrying out this intent ({short_reason(exc, error_id)}). "
            + (
                "The brain had been called: whether it acted is unknown, so it is not called again."
                if attempted
                else "The brain was not called."
            )
            + " Record a new intent if it is still wanted."
        )
        result = {
            "ok": False,
            "called": attempted,
            "error": "internal_error",
            "reason": reason,
            "error_id": error_id,
        }
        done = _finish(claim, IntentStatus.FAILED, principal=principal, result=result, note=reason, now=now)
    except Exception:
        logger.exception(
            "executor: could not record the failure of intent %s (error id %s)", intent.id, error_id
        )
        done, attempted, reason = False, False, f"the failure could not be recorded (error id {error_id})"
    return Outcome(
        intent.id,
        intent.action_type,
        IntentStatus.FAILED if done else "lost",
        error="internal_error",
        reason=reason,
        called=attempted,
    )


def execute_claimed(
    claim: Claim, *, principal: Principal, timeout_s: float, clock: Callable[[], datetime]
) -> Outcome:
    """Carry out one claimed intent: at most one brain call, then executed or failed."""
    intent = claim.intent
    if claim.reclaimed and intent.attempted_at is not None:
        return _fail_without_call(
            claim,
            principal=principal,
            error="attempt_interrupted",
            reason=(
                f"An executor called the brain for this intent at "
                f"{intent.attempted_at:%Y-%m-%d %H:%M:%S} UTC and its claim expired before it recorded "
                "the outcome. Whether the brain acted is unknown, so it is not called again (a second "
                "call could do the thing twice). The brain received "
                f"idempotency key {intent.execution_key}; check there, and record a new intent if it is "
                "still wanted."
            ),
            now=clock(),
        )
    handler = handler_for(intent.action_type)
    if handler is None:
        known = ", ".join(sorted(HANDLERS))
        return _fail_without_call(
            claim,
            principal=principal,
            error="no_handler",
            reason=(
                f"The executor has no handler for action type {intent.action_type!r}: the brain offers no "
                f"tool that does it, so nothing was done (the executor does not guess). Types it can carry "
                f"out: {known}."
            ),
            now=clock(),
        )
    try:
        call = BrainCall(handler.tool, handler.build(intent))
        check_allowed("executor", call.tool)
    except HandlerError as exc:
        return _fail_without_call(
            claim, principal=principal, error=exc.code, reason=exc.reason, now=clock(), tool=handler.tool
        )
    except BrainRefused as exc:
        return _fail_without_call(
            claim, principal=principal, error=exc.code, reason=str(exc), now=clock(), tool=handler.tool
        )

    key = execution_key(intent)
    if not _mark_attempt(claim, principal=principal, call=call, key=key, timeout_s=timeout_s, now=clock()):
        return Outcome(
            intent.id,
            intent.action_type,
            "lost",
            error="claim_lost",
            reason="the claim changed hands before the brain was called; nothing was called",
            tool=call.tool,
        )

    arguments = {k: _short(v) for k, v in call.arguments.items()}
    result: dict[str, Any] = {"tool": call.tool, "arguments": arguments, "execution_key": key, "called": True}
    started = time.monotonic()
    try:
        answer = call_brain(
            "executor", call.tool, call.arguments, timeout_s=timeout_s, meta={IDEMPOTENCY_META_KEY: key}
        )
    except BrainError as exc:  # timeout (stall, drip-feed), connection refused, protocol error...
        result.update(ok=False, error=exc.code, reason=str(exc)[:1000])
    except BaseException:  # interrupted (SIGTERM, Ctrl-C) mid-call: fail it now rather than at lease expiry
        result.update(ok=False, error="interrupted", reason="the executor was stopped during the brain call")
        result["duration_ms"] = round((time.monotonic() - started) * 1000)
        _finish(
            claim, IntentStatus.FAILED, principal=principal, result=result, note=result["reason"], now=clock()
        )
        raise
    else:
        text = answer.text
        result.update(
            ok=not answer.is_error,
            is_error=answer.is_error,
            tainted=True,  # the brain's words are data, never instructions
            text=text[:MAX_RESULT_TEXT_CHARS],
            truncated=len(text) > MAX_RESULT_TEXT_CHARS,
        )
        if answer.is_error:
            result.update(error="brain_error_result", reason=f"{call.tool} answered with an error")
    result["duration_ms"] = round((time.monotonic() - started) * 1000)
    if result["ok"]:
        to, note = IntentStatus.EXECUTED, f"{call.tool} done"
    else:
        to, note = IntentStatus.FAILED, f"{call.tool} failed: {result['reason']}"
    done = _finish(claim, to, principal=principal, result=result, note=note, now=clock())
    return Outcome(
        intent.id,
        intent.action_type,
        to if done else "lost",
        error=result.get("error"),
        reason=result.get("reason"),
        tool=call.tool,
        called=True,
    )


# --- a pass of the executor ------------------------------------------------------------------------------
@dataclass
class ExecutorReport:
    status: str = "ok"  # ok | brain_not_configured | stale
    reason: str | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    run_id: int | None = None
    run_status: str | None = None

    def as_dict(self) -> dict[str, Any]:
        by_status = {
            s: [o.intent_id for o in self.outcomes if o.status == s] for s in ("executed", "failed", "lost")
        }
        return {
            "ok": self.status in {"ok", "brain_not_configured"},
            "status": self.status,
            "reason": self.reason,
            "run_id": self.run_id,
            "run_status": self.run_status,
            **by_status,
            "outcomes": [o.as_dict() for o in self.outcomes],
        }


def _lease_for(lease_s: float | None, timeout_s: float) -> float:
    lease = timeout_s + DEFAULT_LEASE_MARGIN_S if lease_s is None else lease_s
    if lease <= timeout_s:
        raise ValueError(f"the lease ({lease:g} s) must outlast the downstream deadline ({timeout_s:g} s)")
    return lease


def execute_step(
    *,
    principal: Principal | None = None,
    run: StartedRun | None = None,
    limit: int = DEFAULT_LIMIT,
    lease_s: float | None = None,
    timeout_s: float | None = None,
    now: datetime | None = None,
) -> ExecutorReport:
    """Execute up to `limit` claimable intents, one at a time; the ticks call this inside their run.

    `run` (the caller's started run) gets a heartbeat after each intent; if the heartbeat answers
    that the run went stale, the step stops claiming (status `stale`). `now` fixes the clock (tests).
    Never call it inside a transaction.
    """
    principal = principal or Principal.objects.service(EXECUTOR_PRINCIPAL)
    timeout = float(settings.BRAIN_TIMEOUT_S if timeout_s is None else timeout_s)
    lease = _lease_for(lease_s, timeout)
    report = ExecutorReport()
    if not settings.BRAIN_URL:
        report.status = "brain_not_configured"
        report.reason = "No brain is configured (BRAIN_URL is empty): nothing was claimed or executed."
        return report
    clock = (lambda: now) if now is not None else timezone.now
    holder = f"{principal.name}@{socket.gethostname()}:{os.getpid()}" + (f" run {run.run.id}" if run else "")
    seen: set[int] = set()
    while len(report.outcomes) < limit:
        claim = claim_next(principal=principal, lease_s=lease, holder=holder, now=clock(), exclude=seen)
        if claim is None:
            break
        seen.add(claim.intent.id)
        try:
            outcome = execute_claimed(claim, principal=principal, timeout_s=timeout, clock=clock)
        except Exception as exc:
            # One intent's failure — a poisoned row, a handler bug, anything — fails that intent with
            # a recorded reason; the pass goes on to the next one.
            outcome = fail_crashed(claim, principal=principal, exc=exc, now=clock())
        report.outcomes.append(outcome)
        if run is not None and not _heartbeat(run, principal, report, clock()):
            report.status = "stale"
            report.reason = "the run went stale (another run took over): stopped claiming"
            break
    return report


def _heartbeat(run: StartedRun, principal: Principal, report: ExecutorReport, now: datetime) -> bool:
    done = len(report.outcomes)
    try:
        with transaction.atomic():
            heartbeat(
                principal=principal,
                run_id=run.run.id,
                token=run.token,
                progress=f"{done} intents handled",
                now=now,
            )
    except Refusal:
        return False
    return True


def run_executor(
    *,
    principal: Principal | None = None,
    limit: int = DEFAULT_LIMIT,
    lease_s: float | None = None,
    timeout_s: float | None = None,
    stale_after_s: int = WORKER_STALE_AFTER_S,
    now: datetime | None = None,
) -> ExecutorReport:
    """`manage.py operator_execute`: one executor pass under its own run (kind `executor`), kept alive
    by a background heartbeat (`runs.keepalive`): a killed executor gives the lock back within
    `stale_after_s`, however long the brain call it was in.

    Raises `Refusal("already_running")` when another run holds the single-running lock (nothing is
    claimed). Finishes the run `skipped` when no brain is configured, `ok` after a pass (failed
    intents are outcomes, not run errors), `error` if the pass itself crashed.
    """
    principal = principal or Principal.objects.service(EXECUTOR_PRINCIPAL)
    _lease_for(lease_s, float(settings.BRAIN_TIMEOUT_S if timeout_s is None else timeout_s))
    with holding.held_run(
        principal,
        kind="executor",
        stale_after_s=stale_after_s,
        progress="executor: carrying out intents",
        logger=logger,
        now=now,
    ) as started:
        report = execute_step(
            principal=principal, run=started, limit=limit, lease_s=lease_s, timeout_s=timeout_s, now=now
        )
    report.run_id = started.run.id
    if report.status == "stale":
        report.run_status = "stale"
        return report
    counts = report.as_dict()
    summary = (
        report.reason
        if report.status == "brain_not_configured"
        else f"executed {len(counts['executed'])}, failed {len(counts['failed'])}, lost {len(counts['lost'])}"
    )
    status = "skipped" if report.status == "brain_not_configured" else "ok"
    report.run_status = holding.finish(started, principal, status, summary, now)
    return report
