"""Dispatch of one `tools/call`: allowlist, argument validation, actor overwrite, the transaction,
the audit row, the envelope.

Order of events for a call to a registered tool:

1. The principal's allowlist is checked; a tool outside it is refused before anything runs.
2. The arguments are validated against the tool's pydantic model (the same model its published
   `inputSchema` was derived from); a bad argument is an `isError` result naming the field.
3. `actor`, where the tool takes one, is overwritten with the principal's identity. What the caller
   claimed goes to the audit row only (seed §4.1, Article III §3.7).
4. On a worker thread: one transaction runs the tool and appends the audit row. A `Refusal`
   (including a lost version race) rolls the whole transaction back, and the refusal and its audit
   row are written on their own. Nothing is ever half-written. (A read on PostgreSQL needs no
   transaction: see `_unit`.)
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, DataError, connection, transaction
from mcp_types import CallToolResult
from pydantic import ValidationError

from operator_site import metrics
from operator_site.face.db import run_db
from operator_site.face.envelope import Refusal, envelope
from operator_site.face.registry import ToolSpec
from operator_site.models import AuditEvent, Principal

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
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _claimed_for_audit(claimed: Any) -> Any:
    if claimed is _MISSING:
        return None
    text = json.dumps(claimed, ensure_ascii=False, default=str)
    if _TOKEN_LIKE.search(text):
        # A bearer token sent as the actor (a confused or injected agent) is not copied into the
        # audit trail: the claim is kept with every token-shaped part masked.
        return json.loads(_TOKEN_LIKE.sub("opk_[redacted]", text))
    if len(text) <= _MAX_CLAIMED_ACTOR_CHARS:
        return claimed
    return {"truncated": True, "chars": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def _write_audit(
    principal: Principal, tool: str, outcome: str, code: str, started: float, args_digest: str, claimed: Any
) -> None:
    AuditEvent.append(
        principal=principal.pk,
        tool=tool[:200],
        outcome=outcome,
        error_code=code,
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        args_sha256=args_digest,
        claimed_actor=_claimed_for_audit(claimed),
    )


def _nul_path(value: Any, path: str = "") -> str | None:
    """Where a NUL character hides in the arguments (PostgreSQL cannot store one in text)."""
    if isinstance(value, str):
        return path or "(arguments)" if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _nul_path(key, path) if isinstance(key, str) and "\x00" in key else None
            found = found or _nul_path(item, f"{path}.{key}" if path else str(key))
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _nul_path(item, f"{path}.{index}" if path else str(index))
            if found:
                return found
    return None


def _field_errors(exc: ValidationError) -> list[dict[str, str]]:
    """Field names and messages only: the rejected values are the caller's data, not ours to echo."""
    out = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(part) for part in err["loc"]) or "(arguments)"
        out.append({"field": loc, "message": err["msg"]})
    return out


def _unit(spec: ToolSpec) -> AbstractContextManager[Any]:
    """The transaction a call runs in.

    Every write, and every call on SQLite (where a transaction is also the reads' one snapshot),
    runs in one transaction with its audit row. A read on PostgreSQL runs without one: under READ
    COMMITTED each statement sees its own snapshot whether or not it is inside a transaction, so
    BEGIN and COMMIT would buy nothing but two round trips, and a read has no change for its audit
    row to be atomic with (a read that fails writes nothing but its audit row, as before).
    """
    if spec.read_only and connection.vendor == "postgresql":
        return nullcontext()
    return transaction.atomic()


def _run_in_transaction(
    spec: ToolSpec, call: ToolCall, args: Any, started: float, args_digest: str, claimed: Any
) -> CallToolResult:
    outcome = AuditEvent.Outcome.ERROR  # what the metrics count this call as (set by each branch)
    try:
        with _unit(spec):
            result = spec.fn(call, args)
            _write_audit(call.principal, spec.name, AuditEvent.Outcome.OK, "", started, args_digest, claimed)
        outcome = AuditEvent.Outcome.OK
        return envelope(result)
    except Refusal as refusal:
        outcome = AuditEvent.Outcome.REFUSED
        # The transaction above is rolled back: the refusal (a lost version race included: the
        # seed's {ok: false, retry: true}) leaves only its audit row behind.
        _write_audit(
            call.principal, spec.name, AuditEvent.Outcome.REFUSED, refusal.code, started, args_digest, claimed
        )
        return envelope(refusal.as_result())
    except DataError:
        outcome = AuditEvent.Outcome.REFUSED
        # A value the database itself refuses (out of range, malformed for its column): the
        # caller's input, not an outage — say so, and do not invite a retry of the same call.
        logger.info("tool %s: the database refused a value", spec.name)
        _write_audit(
            call.principal,
            spec.name,
            AuditEvent.Outcome.REFUSED,
            "invalid_value",
            started,
            args_digest,
            claimed,
        )
        return envelope(
            {
                "ok": False,
                "error": "invalid_value",
                "reason": "The database refused one of the values given (out of range or malformed); "
                "nothing was written.",
            },
            is_error=True,
        )
    except DatabaseError:
        logger.exception("database error in tool %s", spec.name)
        _best_effort_audit(call, spec, "database_unavailable", started, args_digest, claimed)
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
        logger.exception("tool %s crashed", spec.name)
        _write_audit(
            call.principal,
            spec.name,
            AuditEvent.Outcome.ERROR,
            "internal_error",
            started,
            args_digest,
            claimed,
        )
        return envelope(
            {
                "ok": False,
                "error": "internal_error",
                "reason": "The operator failed to complete this call; nothing was written.",
            },
            is_error=True,
        )
    finally:
        metrics.observe_call(spec.name, outcome, started)


def _best_effort_audit(
    call: ToolCall, spec: ToolSpec, code: str, started: float, args_digest: str, claimed: Any
) -> None:
    """The database just failed this call; record it if the database will take the row."""
    try:
        _write_audit(call.principal, spec.name, AuditEvent.Outcome.ERROR, code, started, args_digest, claimed)
    except DatabaseError:
        logger.warning("could not audit %s: the database is unavailable", spec.name)


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


async def dispatch(spec: ToolSpec, principal: Principal, arguments: dict[str, Any]) -> CallToolResult:
    started = time.perf_counter()
    args_digest = canonical_digest(arguments)
    claimed = arguments.get("actor", _MISSING)

    if not principal.may_call(spec.name):
        await run_db(
            _refuse_before_dispatch, principal, spec.name, "tool_not_allowed", started, args_digest, claimed
        )
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

    try:
        nul_at = _nul_path(arguments)
        if nul_at:
            raise ValidationError.from_exception_data(
                spec.args.__name__,
                [
                    {
                        "type": "value_error",
                        "loc": tuple(nul_at.split(".")),
                        "input": None,
                        "ctx": {"error": "text may not contain NUL (\\u0000) characters"},
                    }
                ],
            )
        args = spec.args.model_validate(spec.fn_metadata.pre_parse_json(arguments))
    except ValidationError as exc:
        fields = _field_errors(exc)
        await run_db(
            _refuse_before_dispatch, principal, spec.name, "invalid_arguments", started, args_digest, claimed
        )
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
    return await run_db(_run_in_transaction, spec, call, args, started, args_digest, claimed)
