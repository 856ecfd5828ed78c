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

Rows nothing in the call reads back go with the COMMIT (`insert_with_commit`): an intent's history
row, the notice a new intent asks for. Inside a write's unit they are queued and inserted in the
unit's last message, before its audit row (their values bound on the client like it): in the same
transaction, so committed or rolled back with everything else, and an error in one is the whole
write's error. A row queued under a savepoint is not queued (the savepoint could be rolled back
without it): it is inserted at once, as it is outside a unit and on SQLite. A block that ends
without `last(row)` inserts what it queued before its commit.

Tried and dropped (docs/performance.md): sending the BEGIN in one flight with the first statement
(psycopg's pipeline mode around both, with the connection in autocommit so that psycopg sends no
BEGIN of its own). One round trip fewer, but psycopg's pipeline costs more client CPU than the
round trip it saves on this machine (a loopback round trip is ~35-60 µs here): side by side, no
tool got faster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models, transaction

from operator_site.sql.rows import _execute_insert, insert_async_commit, insert_row, send_with_insert

Execute = Callable[[str, Any, bool, dict[str, Any]], Any]


class LastRow:
    """`last(row)`: send `before`, the INSERT of `row` and `after` as one message (see the module
    docstring), then refuse any further statement in the block. When Django means to roll the block
    back (`needs_rollback`), nothing is committed: a write's row is inserted in the transaction (and
    rolled back with it); a read's row (`defer=True`) is inserted after the block, on its own."""

    def __init__(self, conn: Any, stack: ExitStack, *, before: str, after: str, defer: bool = False) -> None:
        self.conn = conn
        self.stack = stack
        self.before = before
        self.after = after
        self.defer = defer
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
        later, self.later = self.later, []
        send_with_insert(instance, before=self.before, after=self.after, rows_before=later)
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
        last = LastRow(conn, stack, before="", after="COMMIT")
        stack.enter_context(transaction.atomic())
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
