"""The read and export snapshots, and the raw inserts an import needs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import psycopg
from django.core.management.color import no_style
from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction

from operator_site.sql.flights import LastRow
from operator_site.sql.rows import ASYNC_COMMIT_BEGIN


# --- snapshots ---------------------------------------------------------------------------------------
@contextmanager
def read_snapshot() -> Iterator[None]:
    """One snapshot for a read of several queries, so its counts and lists agree under concurrent
    writes. On PostgreSQL: one read-only REPEATABLE READ transaction, opened by psycopg's own
    `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY` (its public `isolation_level` and `read_only`
    attributes; a round trip before the first query), and ended by the COMMIT that carries the
    read's audit row (`LastRow`). On SQLite a transaction already is one snapshot. Inside a
    caller's transaction there is nothing to open (its isolation is the caller's)."""
    conn = connections[DEFAULT_DB_ALIAS]  # once: each use of the `connection` proxy looks it up
    if conn.vendor != "postgresql" or conn.in_atomic_block:
        with transaction.atomic():
            yield
        return
    conn.ensure_connection()
    raw = conn.connection
    saved = (raw.isolation_level, raw.read_only)
    raw.isolation_level, raw.read_only = psycopg.IsolationLevel.REPEATABLE_READ, True
    try:
        with ExitStack() as stack:
            last = LastRow(conn, stack, before=f"COMMIT; {ASYNC_COMMIT_BEGIN}", after="COMMIT", defer=True)
            stack.callback(last.after_block)
            stack.enter_context(transaction.atomic())
            yield last
    finally:
        if not raw.closed:
            raw.isolation_level, raw.read_only = saved


@contextmanager
def export_snapshot() -> Iterator[None]:
    """One consistent view of the whole database for an export, without blocking writers: a
    read-only REPEATABLE READ transaction on PostgreSQL, a DEFERRED read transaction on SQLite
    (Django's transactions here are IMMEDIATE and would take the write lock; a DEFERRED one holds a
    WAL snapshot and lets writers go on). Inside a caller's transaction: that is the snapshot."""
    if connection.in_atomic_block:
        yield
        return
    if connection.vendor == "postgresql":
        with read_snapshot():
            yield
        return
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("BEGIN DEFERRED")
        try:
            yield
        finally:
            cursor.execute("COMMIT")


def insert_raw(model: type[models.Model], objects: list[models.Model]) -> None:
    """INSERT the rows exactly as given (a restore: no auto_now, no save() override, no signal),
    in batches the backend can take. `bulk_create` would run each field's pre_save (auto_now_add
    would overwrite the exported times), so this compiles the ORM's own raw insert."""
    from django.db.models.sql import InsertQuery

    fields = list(model._meta.local_concrete_fields)
    size = connection.ops.bulk_batch_size(fields, objects) or len(objects) or 1
    for start in range(0, len(objects), size):
        query = InsertQuery(model)
        query.insert_values(fields, objects[start : start + size], raw=True)
        query.get_compiler(using=DEFAULT_DB_ALIAS).execute_sql(returning_fields=None)


def reset_sequences(model_list: Sequence[type[models.Model]]) -> None:
    """Move the id sequences of these tables past their rows (after rows were loaded with their
    ids), with the statements Django's backend writes for it; SQLite needs none."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for sql in connection.ops.sequence_reset_sql(no_style(), list(model_list)):
            cursor.execute(sql)
