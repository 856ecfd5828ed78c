"""The per-token request rate limit of `/mcp`, enforced in the database.

A fixed window per principal: at most `OPERATOR_RATE_LIMIT` requests in each window of
`OPERATOR_RATE_WINDOW_S` seconds (window number = Unix time // window length). The counter is one
row per principal (`RateCounter`), moved by ONE atomic upsert per request that also answers the new
count (`operator_site/sql/` `count_request`; on PostgreSQL the bearer lookup and this upsert are
one statement, `principal_and_count`):

    INSERT … VALUES (principal, window, 1)
    ON CONFLICT (principal) DO UPDATE SET
        count     = CASE WHEN stored window >= this window THEN count + 1 ELSE 1 END,
        window_no = CASE WHEN stored window <  this window THEN this window ELSE stored window END
    RETURNING count, window_no

PostgreSQL serialises concurrent upserts of one row on its row lock (each sees the last committed
count), SQLite serialises writers, so the limit holds across uvicorn workers and hosts: nothing is
counted in process memory. A request from a host whose clock is behind counts against the current
window (never resets it). On PostgreSQL the table is UNLOGGED: no WAL flush per request.

Over the limit the request is answered HTTP 429 with `Retry-After` (the seconds until the window
ends) and nothing else is done (face/admission.py) — in particular no audit row is written, so a
flood cannot grow the audit trail. Every request counts, refused ones included (a client that keeps
hammering stays refused until the window ends). The first refusal of a window is logged.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings

from operator_site.face.auth import authenticate_counted
from operator_site.models import Principal
from operator_site.sql import count_request

logger = logging.getLogger("operator.face")


@dataclass(frozen=True)
class RateVerdict:
    allowed: bool
    count: int
    limit: int
    window_s: int
    retry_after_s: int


def current_window(now: float | None = None) -> int | None:
    """The rate window a request made now counts in; None when the limit is off."""
    if not settings.OPERATOR_RATE_LIMIT:
        return None
    return int((time.time() if now is None else now) // settings.OPERATOR_RATE_WINDOW_S)


def verdict(principal_id: int, count: int, window_no: int, now: float | None = None) -> RateVerdict:
    """What a counted request is told: allowed or not, and when the window ends."""
    limit, window_s = settings.OPERATOR_RATE_LIMIT, settings.OPERATOR_RATE_WINDOW_S
    now = time.time() if now is None else now
    retry_after = max(1, int((window_no + 1) * window_s - now + 0.999))
    if count == limit + 1:
        logger.warning(
            "rate limit: principal %s went over %s requests in %s s; refusing until the window ends",
            principal_id,
            limit,
            window_s,
        )
    return RateVerdict(count <= limit, count, limit, window_s, retry_after)


def admit(principal_id: int, now: float | None = None) -> RateVerdict | None:
    """Count one request of this principal; None when the limit is off (`OPERATOR_RATE_LIMIT=0`)."""
    now = time.time() if now is None else now
    window = current_window(now)
    if window is None:
        return None
    count, window_no = count_request(principal_id, window)
    return verdict(principal_id, count, window_no, now)


def authenticate_and_admit(token: str) -> tuple[Principal | None, RateVerdict | None]:
    """The bearer check and the rate count: on PostgreSQL one statement (`sql.principal_and_count`),
    in whatever unit of database work admits the request (face/admission.py)."""
    now = time.time()
    principal, counted = authenticate_counted(token, current_window(now))
    if principal is None or counted is None:
        return principal, None
    return principal, verdict(principal.pk, *counted, now)
