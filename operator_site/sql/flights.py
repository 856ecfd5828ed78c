"""A unit of work's last row and its COMMIT in one round trip on PostgreSQL.

Every call ends its transaction with its audit row: an INSERT, then Django's COMMIT — two round
trips, the second waiting for the WAL flush. psycopg binds values on the client in a
`ClientCursor`, and a simple-protocol message may carry several statements, so the INSERT and the
COMMIT can travel as one message (`insert_async_commit` in rows.py already sends a read's audit row
this way):

- `write_transaction()`: `transaction.atomic()`, yielding `last(row)`, which inserts `row` and
  commits the transaction in one message. The commit is the same COMMIT with the same WAL flush:
  a write is as durable as before. If the INSERT fails the server skips the COMMIT and the
  transaction stays open in error; if the COMMIT fails the transaction is over; either way the
  error is raised as Django's own and Django's atomic() rolls back, as always.
- `read_snapshot()` (snapshots.py) yields `last(row)` likewise for a read's audit row: the
  read-only snapshot's COMMIT and the audit row's own transaction (not waiting for the WAL flush)
  in one message.

Django's atomic() still owns the transaction: it opened it, and on leaving the block it commits —
finding the work already committed (psycopg's `commit()` of an idle connection sends nothing) —
then runs its on-commit hooks, which so run after the data is committed, as they must. `last` is
the block's last statement: a statement after it would run outside the transaction it ended, so it
is refused (a bug, not a path: the write is already committed when it is refused). When Django
means to roll the block back (`needs_rollback`, after an error inside a nested atomic), `last`
does not commit: it inserts only, and Django rolls back. On SQLite (no round trips) and inside a
caller's transaction: `transaction.atomic()` and `insert_row`. tests/test_flights.py counts the
round trips on the wire and checks answers, errors, rollbacks and hooks against the plain path.

The BEGIN goes with the first statement (`DeferredBegin`). psycopg opens a transaction by sending
BEGIN on its own and waiting for the answer before the first statement: a round trip that carries
nothing. (In its pipeline mode it syncs right after its own BEGIN, which saves nothing.) So the
unit's transaction is opened by the seam instead: once Django's atomic() has begun the block,
the psycopg connection is put back in autocommit (its public `autocommit`) — psycopg then opens
nothing itself — and the block's first statement is sent in one pipeline (psycopg's public
`Connection.pipeline()`) behind the seam's own BEGIN: both in one flight, one Sync, one round trip.
From there on the connection is in that transaction exactly as if psycopg had opened it: psycopg's
`commit()` and `rollback()` act on the server's transaction status, not on the autocommit flag
(COMMIT or ROLLBACK when one is open, nothing when none is), so Django's atomic() commits, rolls
back and runs its savepoints and on-commit hooks as always, and sets autocommit back on leaving
the block, as it always does. When `last(row)` is the block's first statement, the BEGIN is
written into its message. An error in the first statement is raised, translated by Django,
from the pipeline's Sync; the transaction is then open and in error, and atomic() rolls it back.

Rows nothing in the call reads back go with the COMMIT (`insert_with_commit`): an intent's history
row, the notice a new intent asks for. Inside a write's unit they are queued and inserted in the
unit's last message, before its audit row (their values bound on the client like it): in the same
transaction, so committed or rolled back with everything else, and an error in one is the whole
write's error. A row queued under a savepoint is not queued (the savepoint could be rolled back
without it): it is inserted at once, as it is outside a unit and on SQLite. A block that ends
without `last(row)` inserts what it queued before its commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections, models, transaction

from operator_site.sql.rows import _execute_insert, insert_async_commit, insert_row, send_with_insert

Execute = Callable[[str, Any, bool, dict[str, Any]], Any]


class LastRow:
    """`last(row)`: send `before`, the INSERT of `row` and `after` as one message (see the module
    docstring), then refuse any further statement in the block. When Django means to roll the block
    back (`needs_rollback`), nothing is committed: a write's row is inserted in the transaction (and
    rolled back with it); a read's row (`defer=True`) is inserted after the block, on its own."""

    def __init__(
        self,
        conn: Any,
        stack: ExitStack,
        *,
        before: str,
        after: str,
        defer: bool = False,
        begin: DeferredBegin | None = None,
        before_unbegun: str = "",
    ) -> None:
        self.conn = conn
        self.stack = stack
        self.before = before
        self.after = after
        self.defer = defer
        # The block's BEGIN when it is still to be sent, and what goes before the row then (the
        # BEGIN itself for a write; for a read whose snapshot never opened, only the row's own
        # transaction).
        self.begin = begin
        self.before_unbegun = before_unbegun
        self.deferred: models.Model | None = None
        self.used = False
        # Rows to insert with the last message (`insert_with_commit`), each with the fields of the
        # unique key that decides it (or ()).
        self.later: list[tuple[models.Model, tuple[str, ...]]] = []

    def __call__(self, instance: models.Model) -> None:
        if self.used:
            raise RuntimeError("last() inserts the transaction's last row, once")
        self.used = True
        if self.conn.needs_rollback:
            if self.defer:
                self.deferred = instance
            else:
                insert_row(instance)
            return
        before = self.before
        if self.begin is not None and self.begin.take():
            before = self.before_unbegun
        later, self.later = self.later, []
        send_with_insert(instance, before=before, after=self.after, rows_before=later)
        # The transaction is over: any later statement would run outside it.
        self.stack.enter_context(self.conn.execute_wrapper(_nothing_after_last))

    def flush(self) -> None:
        """The block ended without `last(row)`: insert what it queued, before its commit."""
        later, self.later = self.later, []
        for row, unless_conflict_on in later:
            _execute_insert(row, unless_conflict_on)

    def after_block(self) -> None:
        """Runs once the block has ended (registered first on its exit stack)."""
        if self.deferred is not None:
            row, self.deferred = self.deferred, None
            insert_async_commit(row)


def _nothing_after_last(execute: Execute, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    raise RuntimeError("no statement may follow last(): its transaction is already committed")


@contextmanager
def write_transaction() -> Iterator[Callable[[models.Model], None]]:
    """`transaction.atomic()` for a unit of work's whole write; yields `last(row)`: insert `row` as
    the transaction's last statement and commit, one round trip on PostgreSQL (see the module
    docstring). Leaving the block without calling it commits as `atomic()` does."""
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.vendor != "postgresql" or conn.in_atomic_block:
        with transaction.atomic():
            yield insert_row
        return
    with ExitStack() as stack:
        stack.enter_context(transaction.atomic())
        begin = DeferredBegin.open(conn, stack, "BEGIN")
        last = LastRow(conn, stack, before="", after="COMMIT", begin=begin, before_unbegun="BEGIN")
        stack.callback(_unit.reset, _unit.set(last))
        yield last
        if not last.used:  # a normal end without last(): what was queued goes before the commit
            last.flush()


# The write unit whose last message carries the rows `insert_with_commit` queues (None: no unit).
_unit: ContextVar[LastRow | None] = ContextVar("operator_write_unit", default=None)


def insert_with_commit(instance: models.Model, *, unless_conflict_on: tuple[str, ...] = ()) -> None:
    """INSERT `instance`, a new row that nothing in the rest of the call reads back (neither the
    row nor its primary key), in the current transaction: on PostgreSQL inside a write's unit, with
    the unit's last message (see the module docstring); otherwise at once. `unless_conflict_on`:
    the fields of the one unique key that decides (`INSERT … ON CONFLICT (…) DO NOTHING`)."""
    conn = connections[DEFAULT_DB_ALIAS]
    unit = _unit.get()
    # Django lists a nested atomic(savepoint=False) as None among its savepoints: it has none to
    # roll back to (an error there rolls the whole transaction back), so a row may be queued in it.
    savepoint = any(sid is not None for sid in conn.savepoint_ids)
    if unit is None or unit.used or unit.conn is not conn or not conn.in_atomic_block or savepoint:
        _execute_insert(instance, unless_conflict_on)
        return
    unit.later.append((instance, unless_conflict_on))


class DeferredBegin:
    """The BEGIN of a block's transaction, sent with the block's first statement (see the module
    docstring). An execute wrapper of the connection for the length of the block."""

    def __init__(self, conn: Any, statement: str) -> None:
        self.conn = conn
        self.statement = statement
        self.pending = True

    @classmethod
    def open(cls, conn: Any, stack: ExitStack, statement: str) -> DeferredBegin:
        """Inside an outermost atomic() block that has sent nothing yet: hand the BEGIN to the seam
        (`statement`, e.g. "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")."""
        raw = conn.connection
        if raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            raise RuntimeError("a deferred BEGIN needs a block that has sent nothing yet")
        begin = cls(conn, statement)
        # psycopg opens no transaction of its own from here on; Django's atomic() sets autocommit
        # back (to on) when the block ends, as it always does.
        raw.autocommit = True
        stack.enter_context(conn.execute_wrapper(begin))
        return begin

    def take(self) -> bool:
        """Whether the BEGIN was still to be sent; it is the caller's to send from now on."""
        pending, self.pending = self.pending, False
        return pending

    def __call__(self, execute: Execute, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        if not self.take():
            return execute(sql, params, many, context)
        raw = self.conn.connection
        cursor = getattr(context.get("cursor"), "cursor", None)
        if many or isinstance(cursor, psycopg.ServerCursor):
            # executemany and a named cursor run pipelines or protocols of their own: the BEGIN
            # goes on its own first (the round trip psycopg would have spent).
            with self.conn.wrap_database_errors:
                raw.execute(self.statement)
            return execute(sql, params, many, context)
        if isinstance(cursor, psycopg.ClientCursor):
            # Bound on the client, sent as one simple-protocol message, which may hold several
            # statements (and then cannot go in a pipeline): the BEGIN is written in front of
            # them, and its (empty) result skipped, so the caller reads the results it expects.
            result = execute(f"{self.statement}; {sql}", params, many, context)
            cursor.nextset()
            return result
        # Server-side binding: one flight, the BEGIN, the statement, one Sync. An error of either
        # is raised at the Sync (the pipeline's end), translated into Django's as every
        # statement's error is.
        with self.conn.wrap_database_errors, raw.pipeline():
            raw.execute(self.statement)
            return execute(sql, params, many, context)
