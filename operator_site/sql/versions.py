"""A versioned model's write in few round trips (operator_site/lineage.py): the queue and the read of
the base together, the claim of a version with its change rows, rows inserted many at once.

- `read_after_lock`: take the model's advisory lock, then read the newest version and the live
  rows of the write's entities. On PostgreSQL the lock and the read are two statements sent as ONE
  simple-protocol message (one round trip, values bound by psycopg on the client, as
  `rows.send_with_insert` does). The server runs them in turn, and under READ COMMITTED each
  statement takes its snapshot when it starts: the read starts once the lock is granted, so it sees
  every writer that held the lock before — exactly what two round trips saw. (A read folded INTO
  the lock's statement would not: its snapshot would predate the wait.) The version and the rows
  are one statement, so one snapshot: the rows are the state of that version.
- `insert_claiming`: the claim of a version number (`INSERT … ON CONFLICT (number) DO NOTHING`) and
  rows that belong to it, ONE statement on PostgreSQL: a data-modifying CTE whose rows are selected
  from what the claim returned, so a claim that inserts nothing (a lost race) inserts none of them.
- `insert_rows`: many new rows of one model in one INSERT, compiled once per model and row count.

On SQLite (no round trips, a library call per statement) each is the plain sequence of statements.
tests/test_sql.py compares each with the ORM on both databases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections, models

from operator_site.sql.compiled import memo
from operator_site.sql.locks import lock_key
from operator_site.sql.rows import _columns, _insert, _instance, _Select, insert_unless_conflict

M = TypeVar("M", bound=models.Model)

# Rows per INSERT of `insert_claiming` on PostgreSQL (more: the claim first, then `insert_rows`).
MAX_CLAIMED_ROWS = 100


# --- the queue and the base, one round trip ------------------------------------------------------
@dataclass(frozen=True)
class _Read:
    sql: str
    select: _Select | None  # the live rows' columns (None: the version alone)
    pk_at: int  # the position of the live model's primary key among its columns


def _read_sql(
    conn: Any,
    version_model: type[models.Model],
    field: str,
    model: type[models.Model] | None,
    fields: tuple[str, ...],
    count: int,
) -> _Read:
    quote = conn.ops.quote_name
    column = quote(version_model._meta.get_field(field).column)
    # Identifiers from the models' metadata; every value is a parameter.
    top = f"SELECT MAX({column}) AS top FROM {quote(version_model._meta.db_table)}"  # noqa: S608
    if model is None or not count:
        return _Read(top, None, 0)
    meta = model._meta
    columns, attnames, converters = _columns(conn, model, "t")
    one = " AND ".join(f"t.{quote(meta.get_field(name).column)} = %s" for name in fields)
    match = " OR ".join([f"({one})"] * count)
    # One row per live row found, each carrying the version; a single row of NULLs when none is.
    sql = f"SELECT m.top, {columns} FROM ({top}) m LEFT JOIN {quote(meta.db_table)} t ON {match}"  # noqa: S608
    select = _Select(sql, attnames, converters, tuple(meta.get_field(name) for name in fields))
    return _Read(sql, select, attnames.index(meta.pk.attname))


def read_after_lock(
    lock: str,
    version_model: type[models.Model],
    field: str,
    model: type[M] | None = None,
    fields: Sequence[str] = (),
    keys: Sequence[Sequence[Any]] = (),
) -> tuple[Any, list[M]]:
    """Queue behind the other holders of the advisory lock `lock` (`advisory_xact_lock`: until this
    transaction ends; PostgreSQL only), then read `MAX(field)` of `version_model` and the rows of
    `model` whose `fields` equal one of `keys` (each a tuple of values, in the order of `fields`),
    in ONE statement: (the maximum or None, the rows found, as the ORM builds them, in no particular
    order). On PostgreSQL the lock and the read travel as one message (see the module docstring)."""
    conn = connections[DEFAULT_DB_ALIAS]
    names = tuple(fields)
    read = memo(
        ("read_after_lock", version_model, field, model, names, len(keys)),
        lambda c: _read_sql(c, version_model, field, model, names, len(keys)),
    )
    params: list[Any] = []
    if read.select is not None:
        for key in keys:
            given = zip(read.select.params, key, strict=True)
            params += [f.get_db_prep_value(value, conn) for f, value in given]
    if conn.vendor == "postgresql":
        conn.ensure_connection()
        raw = psycopg.ClientCursor(conn.connection)
        # Django's own cursor wrapper around it: its error translation, execute wrappers and query log.
        with conn.make_debug_cursor(raw) if conn.queries_logged else conn.make_cursor(raw) as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s); " + read.sql, [lock_key(lock), *params])
            raw.nextset()  # past the lock's (empty) result to the read's
            rows = raw.fetchall()
    else:  # SQLite's write transactions already run one at a time: nothing to queue behind
        with conn.cursor() as cursor:
            cursor.execute(read.sql, params)
            rows = cursor.fetchall()
    top = rows[0][0]
    if read.select is None:
        return top, []
    found = [
        _instance(conn, model, read.select, row[1:])  # type: ignore[arg-type]
        for row in rows
        if row[1 + read.pk_at] is not None
    ]
    return top, found


# --- inserts ---------------------------------------------------------------------------------------
def _fields_of(model: type[models.Model], conn: Any) -> tuple[models.Field, ...]:
    return _insert(model, conn.vendor, ())[1]


def _values(instance: models.Model, fields: Sequence[models.Field], conn: Any) -> list[Any]:
    return [f.get_db_prep_save(f.pre_save(instance, True), conn) for f in fields]


def _saved(instances: Sequence[models.Model], conn: Any) -> None:
    for instance in instances:
        instance._state.adding = False
        instance._state.db = conn.alias


def _one_model(rows: Sequence[models.Model]) -> type[models.Model]:
    model = type(rows[0])
    if any(type(row) is not model for row in rows):
        raise TypeError("rows of one model only")
    return model


def _rows_sql(conn: Any, model: type[models.Model], count: int) -> str:
    quote = conn.ops.quote_name
    fields = _fields_of(model, conn)
    columns = ", ".join(quote(f.column) for f in fields)
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    # Identifiers from the model's metadata; every value is a parameter.
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES " + ", ".join([one] * count)  # noqa: S608


def insert_rows(rows: Sequence[models.Model]) -> None:
    """INSERT new rows of one model, many per statement (as many as the backend takes in one), each
    what `objects.create()` would write, the statement compiled once per model and row count. An
    auto primary key is left to the database and not read back (the rows of a version's changes
    are never looked up by it)."""
    if not rows:
        return
    conn = connections[DEFAULT_DB_ALIAS]
    model = _one_model(rows)
    fields = _fields_of(model, conn)
    size = conn.ops.bulk_batch_size(list(fields), list(rows)) or len(rows)
    with conn.cursor() as cursor:
        for start in range(0, len(rows), size):
            batch = rows[start : start + size]
            count = len(batch)
            sql = memo(("insert_rows", model, count), lambda c, n=count: _rows_sql(c, model, n))
            cursor.execute(sql, [value for row in batch for value in _values(row, fields, conn)])
    _saved(rows, conn)


def _claiming_sql(
    conn: Any, claim_model: type[models.Model], unique_field: str, model: type[models.Model], count: int
) -> str:
    quote = conn.ops.quote_name
    claim_sql, _ = _insert(claim_model, conn.vendor, (unique_field,))
    if claim_model._meta.pk.db_returning:
        claim_sql = claim_sql.rsplit(" RETURNING ", 1)[0]  # it returns what the CTE needs instead
    fields = _fields_of(model, conn)
    cast = []
    for f in fields:
        db_type = f.db_type(conn)
        if not db_type:
            raise TypeError(f"{model.__name__}.{f.name} has no column type to cast to")
        cast.append(f"CAST(%s AS {db_type})")
    # Identifiers and column types from the models' metadata; every value is a parameter.
    one = "SELECT " + ", ".join(cast) + " FROM claimed"  # noqa: S608
    columns = ", ".join(quote(f.column) for f in fields)
    return (
        f"WITH claimed AS ({claim_sql} RETURNING 1) "
        f"INSERT INTO {quote(model._meta.db_table)} ({columns}) " + " UNION ALL ".join([one] * count)
    )


def insert_claiming(instance: models.Model, unique_field: str, rows: Sequence[models.Model]) -> bool:
    """Claim: INSERT `instance` unless a row with its `unique_field` exists (`insert_unless_conflict`:
    only that unique key decides; a concurrent writer of the same key makes this wait for its
    commit), and then — only if it was inserted — `rows` (`insert_rows`): True if claimed. On
    PostgreSQL ONE statement, a data-modifying CTE: the rows are selected from what the claim
    returned, so a claim that inserted nothing inserted none of them, and the transaction goes on
    (no error, no savepoint). SQLite: the two inserts in turn (its writers run one at a time)."""
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.vendor != "postgresql" or not rows or len(rows) > MAX_CLAIMED_ROWS:
        if not insert_unless_conflict(instance, unique_field):
            return False
        insert_rows(rows)
        return True
    model = _one_model(rows)
    claim_model = type(instance)
    claim_fields = _insert(claim_model, conn.vendor, (unique_field,))[1]
    fields = _fields_of(model, conn)
    sql = memo(
        ("insert_claiming", claim_model, unique_field, model, len(rows)),
        lambda c: _claiming_sql(c, claim_model, unique_field, model, len(rows)),
    )
    params = _values(instance, claim_fields, conn)
    for row in rows:
        params += _values(row, fields, conn)
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        inserted = cursor.rowcount
    if inserted == 0:
        return False
    if inserted != len(rows):  # cannot happen: every row is selected from the one claimed row
        raise RuntimeError(f"claimed with {inserted} of {len(rows)} rows")
    _saved([instance, *rows], conn)
    return True
