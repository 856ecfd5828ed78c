"""Admission to `/mcp`: the bearer check and the rate count, and the HTTP answer (401, 429 or 503)
of a request that may not be served.

One function admits every request (`admit`), in a unit of database work, with the same answers
wherever it runs:

- a `tools/call` of a registered tool is admitted inside the call's own unit of work, just before
  the tool's transaction (face/dispatch.py): the bearer statement and the tool then share one
  hand-off to a database thread and one borrowed connection instead of two. The token travels to
  that unit as `Presented`; nothing the call does runs before the token is admitted, and a refused
  token touches nothing (the statement that finds no principal counts no request);
- every other request is admitted by the endpoint before anything is served (face/endpoint.py).

The bearer statement stays its own transaction, never part of the tool's: the rate counter's row
lock would otherwise be held until the write commits, serialising a principal's concurrent calls.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError
from starlette.types import Send

from operator_site import metrics
from operator_site.face import ratelimit
from operator_site.face.responses import send_json
from operator_site.models import Principal

logger = logging.getLogger("operator.face")


@dataclass(frozen=True)
class Presented:
    """A bearer token presented with a `tools/call`, admitted (`admit`) in the call's own unit of
    database work. `repr` never shows the token."""

    token: str

    def __repr__(self) -> str:
        return "Presented(token=…)"


class NotAdmitted(Exception):
    """The request is answered with this HTTP response and not served. Raised by `admit`, also on
    a database thread inside a call's unit of work; whoever serves the request sends it."""

    def __init__(self, status: int, payload: dict[str, Any], *headers: tuple[bytes, bytes]) -> None:
        super().__init__(payload["error"])
        self.status = status
        self.payload = payload
        self.headers = headers

    async def send(self, send: Send) -> None:
        await send_json(send, self.status, self.payload, *self.headers)


def unauthorized() -> NotAdmitted:
    metrics.count_rejected("unauthorized")
    return NotAdmitted(
        401,
        {"error": "unauthorized", "reason": "A valid bearer token is required (Authorization: Bearer ...)."},
        (b"www-authenticate", b'Bearer realm="operator"'),
    )


def rate_limited(rate: ratelimit.RateVerdict) -> NotAdmitted:
    metrics.count_rejected("rate_limited")
    return NotAdmitted(
        429,
        {
            "error": "rate_limited",
            "reason": f"More than {rate.limit} requests in {rate.window_s} s from this token; "
            f"retry in {rate.retry_after_s} s. Nothing was done.",
            "limit": rate.limit,
            "window_s": rate.window_s,
            "retry_after_s": rate.retry_after_s,
        },
        (b"retry-after", str(rate.retry_after_s).encode()),
    )


def database_unavailable() -> NotAdmitted:
    metrics.count_rejected("database_unavailable")
    return NotAdmitted(
        503,
        {
            "error": "database_unavailable",
            "reason": "The database is unavailable; nothing was done. Retry shortly.",
            "retry": True,
        },
        (b"retry-after", b"2"),
    )


def admit(token: str | None) -> Principal:
    """The active principal holding `token`, its request counted against the rate limit; raises
    `NotAdmitted` — 401 (no such active principal), 429 (over the limit: nothing else is written) or
    503 (the database cannot be reached to check: retryable, nothing done). Runs in a unit of
    database work (face/db.py), on its own transaction."""
    if not token:
        raise unauthorized()
    try:
        # Looked up on the module, so that one replacement (a test's outage) reaches both places
        # that admit.
        principal, rate = ratelimit.authenticate_and_admit(token)
    except DatabaseError:
        logger.warning("database unavailable while authenticating a request")
        raise database_unavailable() from None
    if principal is None:
        raise unauthorized()
    if rate is not None and not rate.allowed:
        raise rate_limited(rate)
    return principal
