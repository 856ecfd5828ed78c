"""Unexpected failures: logged in full under an id, told to people and agents by that id only.

An exception's text may quote the database (SQL, constraint names, values), a remote service or the
person's data; it belongs in the operator's log, not in an answer, a run summary or an intent's
record. Every place that isolates a failure — one tool call, one intent, one tick step, one probe,
one notice — logs it here and shows only the exception's type and the id, which is also in the log
record (`error_id`), so the two can be matched.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any


def new_error_id() -> str:
    return secrets.token_hex(4)


def log_failure(logger: logging.Logger, what: str, *args: Any) -> str:
    """Log the exception being handled (`what % args` failed) with a new error id; return the id."""
    error_id = new_error_id()
    logger.exception(f"{what} failed (error id %s)", *args, error_id, extra={"error_id": error_id})
    return error_id


def short_reason(exc: BaseException, error_id: str) -> str:
    """What may be shown of a failure: its type and the id of its log record."""
    return f"{type(exc).__name__}; error id {error_id} in the operator's log"


def failed_step(name: str, exc: BaseException, error_id: str) -> dict[str, Any]:
    """One isolated step that failed, as reports list it."""
    return {
        "step": name,
        "error": "internal_error",
        "reason": short_reason(exc, error_id),
        "error_id": error_id,
    }
