"""Dispatch of one `tools/call`: argument validation, admission, allowlist, actor overwrite, the
transaction, the audit row, the envelope.

Order of events for a call to a registered tool:

1. The arguments are validated against the tool's pydantic model (the same model its published
   `inputSchema` was derived from), on the event loop; nothing is written yet.
2. ONE unit of database work (face/db.py: a hand-off to a database thread, or inline on SQLite):
   a. a presented bearer token is admitted — the bearer check and the rate count, one statement
      on its own (face/admission.py); a refused token ends the request with 401/429/503 and
      nothing else happens;
   b. the principal's allowlist is checked; a tool outside it is refused before anything runs;
      then a bad argument (from 1) is refused, an `isError` result naming the field;
   c. `actor`, where the tool takes one, is overwritten with the principal's identity. What the
      caller claimed goes to the audit row only (docs/security.md, check 7);
   d. one transaction runs the tool and appends the audit row. A `Refusal` (including a lost
      version race) rolls the whole transaction back, and the refusal and its audit row are
      written on their own. Nothing is ever half-written. (A read on PostgreSQL needs no
      transaction: see `_unit`.)
Every refusal in 2b is audited too.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, DataError, InterfaceError, OperationalError, connection, transaction
from mcp_types import CallToolResult
from pydantic import ValidationError

from operator_site import metrics
from operator_site.errors import log_failure
from operator_site.face import door
from operator_site.face.admission import NotAdmitted, Presented, admit
from operator_site.face.db import run_db
from operator_site.face.envelope import envelope
from operator_site.face.registry import ToolSpec
from operator_site.models import AuditEvent, Principal
from operator_site.refusals import Refusal
from operator_site.sql import read_snapshot, write_transaction

logger = logging.getLogger("operator.face")

_MISSING = object()
# Larger claimed actors are kept as a digest: an audit row is not a place to store megabytes.
_MAX_CLAIMED_ACTOR_CHARS = 2000
# What an operator bearer token looks like (auth.TOKEN_PREFIX + token_urlsafe), for masking.
_TOKEN_LIKE = re.compile(r"opk_[A-Za-z0-9_\-]{16,}")


@dataclass(frozen=True)
class ToolCall:
    """What a tool function knows about its call: who is acting, and what they claimed."""

    principal: Principal
    tool: ToolSpec
    claimed_actor: Any = None

    @property
    def actor(self) -> str:
        """The acting identity, always from the principal, never from the `actor` argument."""
        return self.principal.name


def canonical_digest(arguments: Any) -> str:
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    # "surrogatepass": a lone surrogate (refused at the door) must not stop the digest of the call
    # that is refused for it.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def internal_error(error_id: str) -> dict[str, Any]:
    """What the caller is told of an unexpected failure: never the exception's text (it may quote the
    database, SQL or the person's data), only an id to find the log line by."""
    return {
        "ok": False,
        "error": "internal_error",
        "reason": f"The operator failed to complete this call; nothing was written. Error id {error_id} "
        "(it is in the operator's log).",
        "error_id": error_id,
    }


def _claimed_for_audit(claimed: Any) -> Any:
    if claimed is _MISSING:
        return None
    try:
        text = json.dumps(claimed, ensure_ascii=False, allow_nan=False, default=str)
    except (ValueError, RecursionError):
        return {"not_kept": "not plain JSON"}
    if door.raw_problem(claimed) is not None or door.unstorable_text(text):
        # NUL, a lone surrogate: no database stores it. The claim is kept as a digest.
        escaped = json.dumps(claimed, default=str)
        return {"not_kept": "not storable", "sha256": hashlib.sha256(escaped.encode()).hexdigest()}
    if _TOKEN_LIKE.search(text):
        # A bearer token sent as the actor (a confused or injected agent) is not copied into the
        # audit trail: the claim is kept with every token-shaped part masked.
        return json.loads(_TOKEN_LIKE.sub("opk_[redacted]", text))
    if len(text) <= _MAX_CLAIMED_ACTOR_CHARS:
        return claimed
    return {"truncated": True, "chars": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def audit_tool_name(name: str) -> str:
    """A tool name as the audit row keeps it: bounded, and storable whatever an unknown name held."""
    name = name[:200]
    if door.unstorable_text(name):
        name = json.dumps(name)[1:-1][:200]  # escaped: \u0000, \ud800
    return name


def _write_audit(
    principal: Principal,
    tool: str,
    outcome: str,
    code: str,
    started: float,
    args_digest: str,
    claimed: Any,
    durable: bool = True,
    insert: Callable[[AuditEvent], Any] | None = None,
) -> None:
    """Append the call's audit row. `durable=False` (a read's row, written on its own): committed
    without waiting for the WAL flush on PostgreSQL (`sql.insert_async_commit`; the trade-off is in
    docs/performance.md). `insert`: how the row is inserted (the unit's `last`: the transaction's
    last statement)."""
    AuditEvent.append(
        durable=durable,
        insert=insert,
        principal=principal.pk,
        tool=audit_tool_name(tool),
        outcome=outcome,
        error_code=code,
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        args_sha256=args_digest,
        claimed_actor=_claimed_for_audit(claimed),
    )


def _field_errors(exc: ValidationError) -> list[dict[str, str]]:
    """Field names and messages only: the rejected values are the caller's data, not ours to echo."""
    out = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(part) for part in err["loc"]) or "(arguments)"
        out.append({"field": loc, "message": err["msg"]})
    return out


def _unit(spec: ToolSpec) -> AbstractContextManager[Any]:
    """The transaction a call runs in; what it yields, if anything, inserts the audit row last.

    Every write, and every call on SQLite (where a transaction is also the reads' one snapshot),
    runs in one transaction with its audit row (`sql.write_transaction`: on PostgreSQL the audit row
    travels with the COMMIT, one round trip). A read on PostgreSQL is
    written without one when it is a single query (under READ COMMITTED each statement sees its own
    snapshot whether or not it is inside a transaction, so BEGIN and COMMIT would buy nothing but
    two round trips); a read of several queries (`spec.snapshot`: the packet, operator_state,
    operator_history, the world model) runs in `sql.read_snapshot()`, and its audit row is written
    after it (the snapshot is read-only), in the round trip of the snapshot's COMMIT.
    """
    if spec.read_only and connection.vendor == "postgresql":
        return read_snapshot() if spec.snapshot else nullcontext()
    return write_transaction()


def _audit_after(spec: ToolSpec) -> bool:
    """Whether the audit row of a successful call is written after its unit: a one-query read on
    PostgreSQL (it has no transaction), on its own and committed without waiting for the WAL flush
    (`_write_audit(durable=False)`). Every other call's unit inserts the row as its transaction's
    last statement (`last`): a write's with its COMMIT; a snapshot read's after the snapshot's
    COMMIT, in a transaction of its own that does not wait for the flush — each one round trip."""
    return spec.read_only and not spec.snapshot and connection.vendor == "postgresql"


def _run_in_transaction(
    spec: ToolSpec, call: ToolCall, args: Any, started: float, args_digest: str, claimed: Any
) -> CallToolResult:
    outcome = AuditEvent.Outcome.ERROR  # what the metrics count this call as (set by each branch)
    try:
        after = _audit_after(spec)
        audit_ok = functools.partial(
            _write_audit, call.principal, spec.name, AuditEvent.Outcome.OK, "", started, args_digest, claimed
        )
        with _unit(spec) as last:
            result = spec.fn(call, args)
            if not after:
                audit_ok(insert=last)
        if after:
            audit_ok(durable=False)
        outcome = AuditEvent.Outcome.OK
        return envelope(result)
    except Refusal as refusal:
        outcome = AuditEvent.Outcome.REFUSED
        # The transaction above is rolled back: the refusal (a lost version race included: the
        # {ok: false, retry: true}) leaves only its audit row behind.
        _guarded_audit(call, spec, AuditEvent.Outcome.REFUSED, refusal.code, started, args_digest, claimed)
        return envelope(refusal.as_result())
    except DataError:
        outcome = AuditEvent.Outcome.REFUSED
        # A value the database itself refuses (out of range, malformed for its column): the
        # caller's input, not an outage — say so, and do not invite a retry of the same call.
        logger.info("tool %s: the database refused a value", spec.name)
        _guarded_audit(call, spec, AuditEvent.Outcome.REFUSED, "invalid_value", started, args_digest, claimed)
        return envelope(
            {
                "ok": False,
                "error": "invalid_value",
                "reason": "The database refused one of the values given (out of range or malformed); "
                "nothing was written.",
            },
            is_error=True,
        )
    except (OperationalError, InterfaceError):
        # The database went away or timed out: retryable. (Its text stays in the log.)
        logger.exception("database unavailable in tool %s", spec.name)
        _guarded_audit(
            call, spec, AuditEvent.Outcome.ERROR, "database_unavailable", started, args_digest, claimed
        )
        return envelope(
            {
                "ok": False,
                "error": "database_unavailable",
                "reason": "The database did not complete this call; nothing was written. Retry shortly.",
                "retry": True,
            },
            is_error=True,
        )
    except Exception:
        outcome = AuditEvent.Outcome.ERROR
        # Anything else — a constraint the code did not expect, a bug, a poisoned row — is not
        # retryable: the same call would fail the same way. The caller gets an id, the log the rest.
        error_id = log_failure(logger, "tool %s", spec.name)
        _guarded_audit(call, spec, AuditEvent.Outcome.ERROR, "internal_error", started, args_digest, claimed)
        return envelope(internal_error(error_id), is_error=True)
    finally:
        metrics.observe_call(spec.name, outcome, started)


def _guarded_audit(
    call: ToolCall, spec: ToolSpec, outcome: str, code: str, started: float, args_digest: str, claimed: Any
) -> None:
    """The audit row of a call that did not succeed, written on its own (the call's transaction was
    rolled back). If it cannot be written as it is, it is written without the claimed actor; if the
    database will not take it at all, the gap is logged — the caller still gets its answer."""
    for attempt in (claimed, _MISSING):
        try:
            # In autocommit (the dispatcher's case) the insert is its own transaction; inside a
            # caller's transaction a savepoint keeps a failed insert from spoiling it.
            with transaction.atomic() if connection.in_atomic_block else nullcontext():
                _write_audit(call.principal, spec.name, outcome, code, started, args_digest, attempt)
            return
        except (OperationalError, InterfaceError):
            break
        except Exception:
            logger.exception("could not write the audit row of a %s call as it is", spec.name)
    logger.warning("could not audit %s (%s): the database did not take the row", spec.name, code)


def _refuse_before_dispatch(
    principal: Principal, tool: str, code: str, started: float, args_digest: str, claimed: Any
) -> None:
    # The refusal does not depend on the database; if the database cannot take its audit row right
    # now, the caller still gets the refusal (not a protocol error), and the gap is logged.
    try:
        _write_audit(principal, tool, AuditEvent.Outcome.REFUSED, code, started, args_digest, claimed)
    except DatabaseError:
        logger.warning("could not audit a %s refusal of %s: the database is unavailable", code, tool[:200])


async def audit_unknown_tool(principal: Principal, name: str, arguments: dict[str, Any]) -> None:
    started = time.perf_counter()
    claimed = arguments.get("actor", _MISSING) if isinstance(arguments, dict) else _MISSING
    metrics.count_rejected("unknown_tool")  # not by name: a caller's made-up names are unbounded
    await run_db(
        _refuse_before_dispatch,
        principal,
        name,
        "unknown_tool",
        started,
        canonical_digest(arguments),
        claimed,
    )


def _invalid(spec: ToolSpec, problems: list[tuple[str, str]]) -> ValidationError:
    """Problems found at the door, as pydantic's own error (one shape for every invalid argument)."""
    return ValidationError.from_exception_data(
        spec.args.__name__,
        [
            {"type": "value_error", "loc": tuple(where.split(".")), "input": None, "ctx": {"error": why}}
            for where, why in problems
        ],
    )


def validate_arguments(spec: ToolSpec, arguments: dict[str, Any]) -> Any:
    """The tool's argument model from the call's arguments, checked at the door (face/door.py):
    storable and finite as sent, then typed by the model, then in range. Raises ValidationError."""
    parsed = spec.fn_metadata.pre_parse_json(arguments)
    problem = door.raw_problem(parsed)
    if problem:
        raise _invalid(spec, [problem])
    args = spec.args.model_validate(parsed)
    problems = door.range_problems(args)
    if problems:
        raise _invalid(spec, problems)
    return args


async def dispatch(
    spec: ToolSpec, caller: Principal | Presented, arguments: dict[str, Any]
) -> CallToolResult:
    """One tools/call (see the module docstring): its arguments validated here, then ONE unit of
    database work — the presented token admitted (face/admission.py), the allowlist, the tool and
    its audit row. Raises only `NotAdmitted` (a presented token refused: answered 401, 429 or 503,
    nothing done); whatever else fails is answered as an envelope, and the call's audit row is
    written (or its loss logged)."""
    started = time.perf_counter()
    args_digest = canonical_digest(arguments)
    claimed = arguments.get("actor", _MISSING)
    try:
        try:
            args, fields = validate_arguments(spec, arguments), None
        except ValidationError as exc:
            args, fields = None, _field_errors(exc)
        return await run_db(_serve_call, spec, caller, args, fields, started, args_digest, claimed)
    except NotAdmitted:
        raise
    except Exception:
        error_id = log_failure(logger, "tools/call %s", spec.name)
        try:
            await run_db(_audit_failure, spec, caller, started, args_digest, claimed)
        except NotAdmitted:
            raise
        except Exception:
            logger.exception("could not audit the failed call %s (error id %s)", spec.name, error_id)
        return envelope(internal_error(error_id), is_error=True)


def _principal_of(caller: Principal | Presented) -> Principal:
    """The principal served: a presented token is admitted first (raises NotAdmitted)."""
    return admit(caller.token) if isinstance(caller, Presented) else caller


def _audit_failure(
    spec: ToolSpec, caller: Principal | Presented, started: float, args_digest: str, claimed: Any
) -> None:
    call = ToolCall(principal=_principal_of(caller), tool=spec)
    _guarded_audit(call, spec, AuditEvent.Outcome.ERROR, "internal_error", started, args_digest, claimed)


def _serve_call(
    spec: ToolSpec,
    caller: Principal | Presented,
    args: Any,
    fields: list[dict[str, str]] | None,
    started: float,
    args_digest: str,
    claimed: Any,
) -> CallToolResult:
    """The call's one unit of database work: admit a presented token (its own statement and
    transaction, before anything else; raises NotAdmitted), then the call; whatever it raises is an
    audited internal_error."""
    principal = _principal_of(caller)
    try:
        return _call(spec, principal, args, fields, started, args_digest, claimed)
    except Exception:
        error_id = log_failure(logger, "tools/call %s", spec.name)
        call = ToolCall(principal=principal, tool=spec)
        _guarded_audit(call, spec, AuditEvent.Outcome.ERROR, "internal_error", started, args_digest, claimed)
        return envelope(internal_error(error_id), is_error=True)


def _call(
    spec: ToolSpec, principal: Principal, args: Any, fields: Any, started: float, digest: str, claimed: Any
) -> CallToolResult:
    if not principal.may_call(spec.name):
        _refuse_before_dispatch(principal, spec.name, "tool_not_allowed", started, digest, claimed)
        metrics.observe_call(spec.name, AuditEvent.Outcome.REFUSED, started)
        return envelope(
            {
                "ok": False,
                "error": "tool_not_allowed",
                "reason": f"{spec.name} is not in the tool allowlist of principal {principal.name!r}.",
                "tool": spec.name,
                "principal": principal.name,
            },
            is_error=True,
        )

    if fields is not None:
        _refuse_before_dispatch(principal, spec.name, "invalid_arguments", started, digest, claimed)
        metrics.observe_call(spec.name, AuditEvent.Outcome.REFUSED, started)
        reason = "; ".join(f"{f['field']}: {f['message']}" for f in fields)
        return envelope(
            {
                "ok": False,
                "error": "invalid_arguments",
                "reason": f"Invalid arguments — {reason}",
                "fields": fields,
            },
            is_error=True,
        )

    if spec.takes_actor:
        # Accepted, never trusted: the acting identity is the principal's, whatever was claimed.
        args.actor = principal.name

    call = ToolCall(principal=principal, tool=spec, claimed_actor=None if claimed is _MISSING else claimed)
    return _run_in_transaction(spec, call, args, started, digest, claimed)
