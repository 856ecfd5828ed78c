"""The executor: carries out approved and queued intents through the brain (seed §4.5, §4.6).

An intent the gate allowed (`queued`) or a person approved (`approved`) is **claimed** with a
lease, moved to `executing`, handed to the handler for its type, which makes exactly one call on
the person's brain through the executor allowlist (`call_brain("executor", ...)`), and ends
`executed` or `failed` with what the brain answered recorded on the intent (`execution_result`)
and on its history. Nothing else is ever executed: every other status is left alone, and an
intent whose type has no handler fails with a reason rather than a guess.

**A handler never runs twice for one intent.** The rule, and why it holds:

1. *Claim* (one short transaction): pick the oldest claimable intent — `approved` or `queued`, or
   `executing` under a lease that expired — locked with `SELECT … FOR UPDATE SKIP LOCKED` on
   PostgreSQL (concurrent executors take different rows instead of queueing), serialised by the
   `IMMEDIATE` write lock on SQLite; the move itself is a compare-and-set on the status (and, for
   a reclaim, on the old lease token), so two claimants can never both win.
2. *Attempt* (its own committed transaction, BEFORE the brain is called): set `attempted_at` and
   `execution_key` with `UPDATE … WHERE status = 'executing' AND lease_token = <mine> AND
   attempted_at IS NULL AND lease_expires_at > now + timeout`. `attempted_at` is set once and never
   cleared, so at most one process ever gets past this line for an intent — whatever crashes,
   pauses or races happen around it. Only then is the brain called.
3. *Outcome*: `executed` or `failed`, compare-and-set on the lease token, the lease cleared.
4. *Reclaim*: an `executing` intent whose lease expired is claimable again. If it was never
   attempted (its executor died between claim and attempt), it is executed normally. If it WAS
   attempted (its executor died or hung between the brain call and recording the outcome), nobody
   knows whether the brain acted: it is failed with `attempt_interrupted`, never called again.
   The brain received the intent's `execution_key` in the request's `_meta`
   (`io.operator/idempotency-key`), so a brain that de-duplicates can be asked what happened.

The lease is longer than the downstream deadline (`lease_s > timeout_s`, by default
`BRAIN_TIMEOUT_S + 60 s`) and the attempt requires the remaining lease to outlast the deadline, so a
live executor's call has always been abandoned before anyone can reclaim its intent.

**A downstream timeout fails the intent** (`failed`, `error: brain_timeout`, the lease cleared).
It is not released for a retry: the call may have reached the brain (a stalled brain did receive
it) and a retry would risk doing the thing twice. The claim is never left pinned.

The executor runs under a run (`run_executor`: start, heartbeat after each intent and from a
background thread, finish) and respects the single-running lock. One intent that fails — any
exception, a poisoned row included — is failed with its reason (`fail_crashed`) and the pass goes
on to the next. The ticks call `execute_step(principal=…, run=…)` inside their
own run. Without `BRAIN_URL` nothing is claimed: the step reports `brain_not_configured` and
`run_executor` finishes its run `skipped`.

This module must not be called inside a transaction: the attempt must be committed before the
brain is called (the attempt's `transaction.atomic(durable=True)` refuses to nest).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from intents.gate import PROPOSAL_TYPES
from intents.models import Intent, IntentStatus
from intents.services import local_day, local_text, log_event, transition_intent
from operator_site.errors import log_failure, short_reason
from operator_site.face.envelope import Refusal
from operator_site.models import Principal
from runs import services as runs
from runs.brain import BrainError, BrainRefused, call_brain, check_allowed
from runs.keepalive import WORKER_STALE_AFTER_S, KeepAlive
from runs.powers import EXECUTOR_TOOLS

logger = logging.getLogger("operator.executor")

EXECUTOR_PRINCIPAL = "operator-executor"
IDEMPOTENCY_META_KEY = "io.operator/idempotency-key"
DEFAULT_LEASE_MARGIN_S = 60.0
DEFAULT_LIMIT = 50
CLAIMABLE = (IntentStatus.APPROVED, IntentStatus.QUEUED)
MAX_RESULT_TEXT_CHARS = 4000
MAX_ARGUMENT_CHARS = 500


# --- handlers: intent type → one brain call -------------------------------------------------------------
@dataclass(frozen=True)
class BrainCall:
    tool: str
    arguments: dict[str, Any]


class HandlerError(Exception):
    """The intent cannot be carried out as recorded (said before anything is called)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


@dataclass(frozen=True)
class Handler:
    tool: str
    build: Callable[[Intent], dict[str, Any]]
    does: str  # one line for the docs


def _slug(text: str, limit: int = 48) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "untitled"


def _as_markdown(intent: Intent) -> str:
    lines = [f"# {intent.title}", "", f"- {intent.action_type}, intent #{intent.id}"]
    if intent.recipient:
        lines.append(f"- for: {intent.recipient}")
    if intent.due:
        lines.append(f"- due: {local_text(intent.due)}")
    if intent.topic:
        lines.append(f"- topic: {intent.topic}")
    if intent.body:
        lines += ["", intent.body]
    return "\n".join(lines) + "\n"


def _write_as_file(intent: Intent) -> dict[str, Any]:
    """A note, reminder or draft becomes a Markdown file; a draft is written, never sent."""
    path = f"operator/{intent.action_type}s/{local_day(intent.created_at):%Y-%m-%d}-intent-{intent.id}-"
    return {"path": path + f"{_slug(intent.title)}.md", "payload": _as_markdown(intent)}


SAFE_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")


def _write_file(intent: Intent) -> dict[str, Any]:
    """The title is the relative path (what the person approved), the body is the content."""
    path = intent.title.strip()
    if not SAFE_PATH.fullmatch(path) or len(path) > 200:
        raise HandlerError(
            "invalid_path",
            f"A file_write intent's title must be the relative path of the file (like notes/plan.md: "
            f"letters, digits, '.', '_', '-' and '/', no leading '/' or '.'), not {path[:80]!r}; "
            "nothing was written.",
        )
    return {"path": path, "payload": intent.body}


def _run_in_workspace(intent: Intent) -> dict[str, Any]:
    if not intent.body.strip():
        raise HandlerError(
            "command_required",
            "A workspace action's body must hold the command to run (the title only names it); "
            "nothing was run.",
        )
    return {"command": intent.body}


def _query(intent: Intent) -> dict[str, Any]:
    return {"query": intent.body.strip() or intent.title}


_FILE = Handler("files_write", _write_as_file, "written as a Markdown file under `operator/<type>s/`")
_WRITE = Handler("files_write", _write_file, "`path` = the title (a relative path), `payload` = the body")
_RUN = Handler("actions_workspace_run", _run_in_workspace, "`command` = the body (required)")
_SEARCH = Handler("files_search", _query, "`query` = the body, or the title if the body is empty")
_RECALL = Handler("memory_recall", _query, "`query` = the body, or the title if the body is empty")

# Keys are normalised action types (intents.gate.normalise_type). Anything else: no handler.
HANDLERS: MappingProxyType[str, Handler] = MappingProxyType(
    {
        "note": _FILE,
        "reminder": _FILE,
        "draft": _FILE,
        "file_write": _WRITE,
        "write_file": _WRITE,
        "workspace_action": _RUN,
        "workspace_run": _RUN,
        "file_search": _SEARCH,
        "search_files": _SEARCH,
        "memory_recall": _RECALL,
        "recall": _RECALL,
    }
)
assert {h.tool for h in HANDLERS.values()} <= EXECUTOR_TOOLS, "a handler outside the executor allowlist"


def handler_for(action_type: str) -> Handler | None:
    return HANDLERS.get(action_type)


def follow_through(action_type: str) -> dict[str, Any]:
    """What happens after the person accepts an intent of this type, in words for the approval page,
    the Accept confirmation and the human API: which handler carries it out, or that nothing will.

    `runs` is True only when accepting leads to something being done: a proposal is applied at
    Accept; a type with a handler is carried out by the executor — if a brain is configured. Without
    `BRAIN_URL` the executor claims nothing (the approved intent waits, and can be withdrawn); a
    type with no handler is failed `no_handler` by the executor (nothing is ever sent or spent)."""
    if action_type in PROPOSAL_TYPES:
        return {
            "runs": True,
            "handler": "proposal",
            "tool": None,
            "text": "Accepting applies this change to your model at once, as a new version whose evidence "
            "is your approval (the executor is not involved).",
        }
    handler = handler_for(action_type)
    does = handler.does.replace("`", "") if handler is not None else ""
    if handler is None:
        return {
            "runs": False,
            "handler": None,
            "tool": None,
            "text": f"Nothing will carry this out: the executor has no handler for {action_type!r} intents "
            "(the brain offers no tool that does it). Accepting records your approval only; the "
            "executor will then mark it failed (no_handler) — nothing is sent, spent or published.",
        }
    if not settings.BRAIN_URL:
        return {
            "runs": False,
            "handler": handler.tool,
            "tool": handler.tool,
            "text": "Nothing will carry this out until a brain is configured (BRAIN_URL is empty): an "
            "accepted intent waits as approved, and you can withdraw it. With a brain, the executor "
            f"would carry it out with one call to the brain's {handler.tool} tool ({does}).",
        }
    return {
        "runs": True,
        "handler": handler.tool,
        "tool": handler.tool,
        "text": f"The executor carries it out on its next pass, with one call to the brain's {handler.tool} "
        f"tool ({does}). Until it claims it, you can withdraw it.",
    }


def execution_key(intent: Intent) -> str:
    """The idempotency key sent to the brain: one per intent and payload, stable across claims."""
    text = f"operator-intent|{intent.id}|{intent.idempotency_key}|{intent.payload_digest}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# --- the service principal ------------------------------------------------------------------------------
def executor_principal(name: str = EXECUTOR_PRINCIPAL) -> Principal:
    """The token-less agent principal the executor acts as (and holds its runs as).

    It may call no tool (`tools = []`) and has no token, so nobody can act as it over /mcp. A
    principal of that name that has a token, tools or is human is refused, not borrowed.
    """
    principal, _ = Principal.objects.get_or_create(
        name=name, defaults={"kind": Principal.Kind.AGENT, "tools": []}
    )
    if principal.kind != Principal.Kind.AGENT or principal.token_digest or principal.tools != []:
        raise ImproperlyConfigured(
            f"Principal {name!r} exists with a token, tools or as a human; the executor acts as a "
            "token-less agent of that name. Rename that principal."
        )
    return principal


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
    run: runs.StartedRun | None = None,
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
    principal = principal or executor_principal()
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


def _heartbeat(run: runs.StartedRun, principal: Principal, report: ExecutorReport, now: datetime) -> bool:
    done = len(report.outcomes)
    try:
        with transaction.atomic():
            runs.heartbeat(
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
    principal = principal or executor_principal()
    _lease_for(lease_s, float(settings.BRAIN_TIMEOUT_S if timeout_s is None else timeout_s))
    with transaction.atomic():
        started = runs.start_run(principal=principal, kind="executor", stale_after_s=stale_after_s, now=now)
    try:
        with KeepAlive(started, principal, progress="executor: carrying out intents"):
            report = execute_step(
                principal=principal, run=started, limit=limit, lease_s=lease_s, timeout_s=timeout_s, now=now
            )
    except BaseException as exc:
        cancelled = isinstance(exc, KeyboardInterrupt | SystemExit)
        why = type(exc).__name__ if cancelled else short_reason(exc, log_failure(logger, "executor pass"))
        _finish_run(
            started,
            principal,
            "cancelled" if cancelled else "error",
            f"executor {'stopped' if cancelled else 'crashed'}: {why}",
            now,
        )
        raise
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
    report.run_status = _finish_run(started, principal, status, summary, now)
    return report


def _finish_run(
    started: runs.StartedRun, principal: Principal, status: str, summary: str, now: datetime | None
) -> str:
    try:
        with transaction.atomic():
            return runs.finish_run(
                principal=principal,
                run_id=started.run.id,
                token=started.token,
                status=status,
                summary=summary,
                now=now,
            ).status
    except Refusal:
        return "stale"
