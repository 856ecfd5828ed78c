"""Where the face runs database work, and why there.

Django's ORM is synchronous; the MCP transport is async. Every tool call needs the database twice
(authenticate the bearer, then run the tool with its audit row in one transaction). There are two
ways to get from the event loop to the ORM, chosen per database by `OPERATOR_DB_INLINE`:

- **threads** (the default for PostgreSQL): the work runs on a bounded pool of database threads.
  The pool size (`OPERATOR_DB_THREADS`) bounds concurrent ORM work, hence the connections a process
  holds (Django keeps one persistent connection per thread). A slow database delays the calls that
  need it, never the event loop.
- **inline** (the default for SQLite): the work runs on the event-loop thread itself, synchronously,
  the way the seed's own implementation uses its embedded SQLite. An SQLite "query" is a function
  call into the C library, not a network round trip, and handing it to a thread costs more than
  doing it: measured on this design, two thread hops per call (with the GIL changing hands four
  times) took longer than the SQL they carried. Each unit of work runs to completion without
  awaiting, so two transactions never interleave on the loop thread's one connection. The cost is
  that a write waiting on SQLite's lock (another *process* writing, up to the busy timeout) pauses
  this worker's loop — acceptable for the embedded single-host default; use PostgreSQL when several
  processes write.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.conf import settings
from django.db import close_old_connections, connection

T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None


def db_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=settings.OPERATOR_DB_THREADS, thread_name_prefix="operator-db")
    return _pool


def runs_inline() -> bool:
    mode = settings.OPERATOR_DB_INLINE
    if mode == "auto":
        return connection.vendor == "sqlite"
    return mode == "true"


# A connection that completed a unit of work this recently is not health-checked again before the
# next one (see `_unit_of_work`).
HEALTH_CHECK_IDLE_S = 1.0


def _unit_of_work(fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    # Nothing here runs inside Django's request cycle, so nobody else recycles these connections:
    # drop one that errored or outlived CONN_MAX_AGE before and after each unit of work.
    close_old_connections()
    # close_old_connections() also re-arms Django's health check (CONN_HEALTH_CHECKS), which costs a
    # `SELECT 1` round trip on PostgreSQL before every unit of work — two per tool call. A connection
    # that finished a unit of work cleanly within the last second does not need it: if the server
    # went away since, the statement fails, the unit answers a retryable error, and the errored
    # connection is closed by the close_old_connections() after it. A connection idle for longer
    # (which a restart of the server may have broken unnoticed) is checked as before.
    if connection.connection is not None and not connection.errors_occurred:
        idle = time.monotonic() - getattr(connection, "operator_last_unit", float("-inf"))
        if idle < HEALTH_CHECK_IDLE_S:
            connection.health_check_done = True
    try:
        return fn(*args)
    finally:
        connection.operator_last_unit = time.monotonic()
        close_old_connections()


def _inline(fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    # Django refuses ORM calls while an event loop runs in the calling thread (a guard against
    # blocking a loop by accident). Here blocking is the decision, and this call never awaits, so
    # the loop is detached from the thread for exactly the duration of the synchronous work. With no
    # running loop, Django also keeps this thread's connection in thread-local storage, so it
    # persists from call to call instead of being reopened per request.
    loop = asyncio._get_running_loop()
    asyncio._set_running_loop(None)
    try:
        return _unit_of_work(fn, args)
    finally:
        asyncio._set_running_loop(loop)


async def run_db(fn: Callable[..., T], *args: Any) -> T:
    """Run synchronous ORM code from the event loop (inline or on a database thread; see above)."""
    if runs_inline():
        return _inline(fn, args)
    return await asyncio.get_running_loop().run_in_executor(db_pool(), _unit_of_work, fn, args)
