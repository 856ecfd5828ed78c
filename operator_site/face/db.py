"""Where the face runs database work, and why there.

Django's ORM is synchronous; the MCP transport is async. Every tool call needs the database twice
(authenticate the bearer, then run the tool with its audit row in one transaction). There are three
ways to get from the event loop to the ORM, chosen per database by `OPERATOR_DB_INLINE`:

- **threads** (`OPERATOR_DB_INLINE=false`): the work runs on a bounded pool of database threads.
  The pool size (`OPERATOR_DB_THREADS`) bounds concurrent ORM work, hence the connections a process
  holds (Django keeps one persistent connection per thread). A slow database delays the calls that
  need it, never the event loop.
- **inline** (the default for SQLite): the work runs on the event-loop thread itself, synchronously,
  the way a single-process server uses an embedded SQLite. An SQLite "query" is a function
  call into the C library, not a network round trip, and handing it to a thread costs more than
  doing it: measured on this design, two thread hops per call (with the GIL changing hands four
  times) took longer than the SQL they carried. Each unit of work runs to completion without
  awaiting, so two transactions never interleave on the loop thread's one connection. The cost is
  that a write waiting on SQLite's lock (another *process* writing, up to the busy timeout) pauses
  this worker's loop — acceptable for the embedded single-host default; use PostgreSQL when several
  processes write.

  Django refuses ORM calls on a thread whose event loop runs (a guard against blocking a loop by
  accident). Here blocking is the decision, so inline mode sets Django's documented switch
  `DJANGO_ALLOW_ASYNC_UNSAFE` for the process (the guard is then off for the whole worker: nothing
  else in it calls the ORM from the loop). Django keeps connections per async context, so each
  request would open its own; the loop thread's one persistent connection is handed to each unit
  of work instead (`connections[alias] = …`, the handler's public setter).

- **inline when idle** (the default for PostgreSQL, `auto`): inline while this worker serves no
  other request, on the threads otherwise. A database thread costs CPU of its own — measured on
  this design with uvloop and psycopg (bench/side_by_side.py, docs/performance.md): ~50 µs per
  hand-off and about twice a round trip's client CPU (~60 against ~30 µs), 0.4 to 0.8 ms of server
  CPU per tool call, 10 to 28 % of the writes' throughput at concurrency 1 — and buys nothing when
  no other request is waiting for the loop: blocking the loop for the unit then delays nobody.
  When another request is in flight (`requests_in_flight`, counted by the ASGI dispatcher for
  every HTTP request), the unit goes to a thread, so concurrent requests overlap their waits on
  the database as before. The cost: a request that arrives while an inline unit runs waits for
  it to end (a few milliseconds; longer only if the unit waits on a lock another transaction
  holds). The count is a scheduling hint, never a guarantee of anything.

Health: with PostgreSQL's pool (settings.DATABASE_POOL) a unit borrows a connection and gives it
back; without it, Django's CONN_HEALTH_CHECKS checks a persistent connection before reuse.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections

T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None


def db_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=settings.OPERATOR_DB_THREADS, thread_name_prefix="operator-db")
    return _pool


def runs_inline() -> bool:
    """Whether every unit of work runs on the event loop (SQLite's default, or forced)."""
    mode = settings.OPERATOR_DB_INLINE
    if mode == "auto":
        # From the settings, not `connection.vendor`: on the loop that would make a connection
        # wrapper for every request's context.
        return connections.settings[DEFAULT_DB_ALIAS]["ENGINE"] == "django.db.backends.sqlite3"
    return mode == "true"


def inline_when_idle() -> bool:
    """Whether a unit runs on the event loop when no other request is in flight (`auto` on a
    database that is not SQLite: see the module docstring)."""
    return settings.OPERATOR_DB_INLINE == "auto"


# HTTP requests this worker process is serving now: counted by the ASGI dispatcher on the event
# loop's thread (operator_site/asgi.py), read only there. A scheduling hint (run_db), nothing more.
requests_in_flight = 0


class InFlight:
    """`with InFlight():` around serving one HTTP request (on the event loop's thread)."""

    def __enter__(self) -> None:
        global requests_in_flight
        requests_in_flight += 1

    def __exit__(self, *exc: object) -> None:
        global requests_in_flight
        requests_in_flight -= 1


_loop = threading.local()  # the event-loop thread's own connection (inline mode)


def _unit_of_work(fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    # Nothing here runs inside Django's request cycle, so nobody else recycles these connections:
    # drop one that errored or outlived CONN_MAX_AGE (or give a pooled one back) before and after.
    close_old_connections()
    try:
        return fn(*args)
    finally:
        close_old_connections()


def _inline(fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    wrapper = getattr(_loop, "connection", None)
    if wrapper is None:
        os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        wrapper = _loop.connection = connections.create_connection(DEFAULT_DB_ALIAS)
    connections[DEFAULT_DB_ALIAS] = wrapper
    return _unit_of_work(fn, args)


async def run_db(fn: Callable[..., T], *args: Any) -> T:
    """Run synchronous ORM code from the event loop (inline or on a database thread; see above)."""
    if runs_inline():
        return _inline(fn, args)
    if requests_in_flight <= 1 and inline_when_idle():
        # Requests that arrived meanwhile are counted once the loop has read them (one turn) and
        # started their tasks (a second): only then is "no other request" known.
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        if requests_in_flight <= 1:
            return _inline(fn, args)
    return await asyncio.get_running_loop().run_in_executor(db_pool(), _unit_of_work, fn, args)
