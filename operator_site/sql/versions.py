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
  the writes that belong to it (its change rows, the live rows it inserts or updates), ONE
  statement on PostgreSQL: a data-modifying CTE whose writes all select from what the claim
  returned, so a claim that inserts nothing (a lost race) writes nothing.
- `insert_rows`: many new rows of one model in one INSERT, compiled once per model and row count;
  `update_rows`: an `Update` (`filter(...).update(...)`), compiled once per model and field names.

On SQLite (no round trips, a library call per statement) each is the plain sequence of statements.
tests/test_sql.py compares each with the ORM on both databases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections, models

from operator_site.sql.compiled import memo
from operator_site.sql.locks import lock_key
from operator_site.sql.rows import (
    _cast,
    _columns,
    _insert,
    _instance,
    _saved,
    _Select,
    _typed,
    _values,
    insert_unless_conflict,
    wrapped_cursor,
)

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
    also_fields: tuple[str, ...] = (),
    also_count: int = 0,
) -> _Read:
    quote = conn.ops.quote_name
    column = quote(version_model._meta.get_field(field).column)
    # Identifiers from the models' metadata; every value is a parameter.
    top = f"SELECT MAX({column}) AS top FROM {quote(version_model._meta.db_table)}"  # noqa: S608
    if model is None or not count + also_count:
        return _Read(top, None, 0)
    meta = model._meta
    columns, attnames, converters = _columns(conn, model, "t")

    def equal(names: tuple[str, ...]) -> str:
        return "(" + " AND ".join(f"t.{quote(meta.get_field(name).column)} = %s" for name in names) + ")"

    match = " OR ".join([equal(fields)] * count + [equal(also_fields)] * also_count)
    # One row per live row found, each carrying the version; a single row of NULLs when none is.
    sql = f"SELECT m.top, {columns} FROM ({top}) m LEFT JOIN {quote(meta.db_table)} t ON {match}"  # noqa: S608
    params = tuple(meta.get_field(name) for name in [*fields * count, *also_fields * also_count])
    select = _Select(sql, attnames, converters, params)
    return _Read(sql, select, attnames.index(meta.pk.attname))


def read_after_lock(
    lock: str,
    version_model: type[models.Model],
    field: str,
    model: type[M] | None = None,
    fields: Sequence[str] = (),
    keys: Sequence[Sequence[Any]] = (),
    also_fields: Sequence[str] = (),
    also_keys: Sequence[Sequence[Any]] = (),
) -> tuple[Any, list[M]]:
    """Queue behind the other holders of the advisory lock `lock` (`advisory_xact_lock`: until this
    transaction ends; PostgreSQL only), then read `MAX(field)` of `version_model` and the rows of
    `model` whose `fields` equal one of `keys` (each a tuple of values, in the order of `fields`) or
    whose `also_fields` equal one of `also_keys` (another way to find rows, in the same read: the
    world model's look-alike keys), in ONE statement: (the maximum or None, the rows found, each
    once, as the ORM builds them, in no particular order). On PostgreSQL the lock and the read
    travel as one message (see the module docstring)."""
    conn = connections[DEFAULT_DB_ALIAS]
    names, also = tuple(fields), tuple(also_fields)
    read = memo(
        ("read_after_lock", version_model, field, model, names, len(keys), also, len(also_keys)),
        lambda c: _read_sql(c, version_model, field, model, names, len(keys), also, len(also_keys)),
        conn,
    )
    params: list[Any] = []
    if read.select is not None:
        values = [value for key in [*keys, *also_keys] for value in key]  # one per field, in order
        given = zip(read.select.params, values, strict=True)
        params = [f.get_db_prep_value(value, conn) for f, value in given]
    if conn.vendor == "postgresql":
        with wrapped_cursor(conn, psycopg.ClientCursor) as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s); " + read.sql, [lock_key(lock), *params])
            cursor.cursor.nextset()  # past the lock's (empty) result to the read's
            rows = cursor.cursor.fetchall()
    else:  # SQLite's write transactions already run one at a time: nothing to queue behind
        with conn.cursor() as cursor:
            cursor.execute(read.sql, params)
            rows = cursor.fetchall()
    top = rows[0][0]
    if read.select is None:
        return top, []
    # A row both ways of finding match is joined once: ON (a) OR (b) is one condition per row.
    found = [
        _instance(conn, model, read.select, row[1:])  # type: ignore[arg-type]
        for row in rows
        if row[1 + read.pk_at] is not None
    ]
    return top, found


# --- inserts ---------------------------------------------------------------------------------------
def _fields_of(model: type[models.Model], conn: Any) -> tuple[models.Field, ...]:
    return _insert(model, conn.vendor, ())[1]


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
            sql = memo(("insert_rows", model, count), lambda c, n=count: _rows_sql(c, model, n), conn)
            cursor.execute(sql, [value for row in batch for value in _values(row, fields, conn)])
    for row in rows:
        _saved(conn, row)


@dataclass(frozen=True)
class Update:
    """`UPDATE model SET values WHERE where`: each a mapping of field names (or attnames) to
    values, the `where` fields compared for equality. Prepared as the ORM's `update()` prepares
    them (`get_db_prep_save`), so an auto_now field is set only when `values` names it."""

    model: type[models.Model]
    values: Mapping[str, Any]
    where: Mapping[str, Any]

    @property
    def shape(self) -> tuple[type[models.Model], tuple[str, ...], tuple[str, ...]]:
        return self.model, tuple(self.values), tuple(self.where)


def _update_sql(conn: Any, shape: tuple[type[models.Model], tuple[str, ...], tuple[str, ...]]) -> str:
    model, values, where = shape
    quote, meta = conn.ops.quote_name, model._meta
    table = quote(meta.db_table)
    sets = ", ".join(f"{quote(meta.get_field(name).column)} = %s" for name in values)
    match = " AND ".join(f"{table}.{quote(meta.get_field(name).column)} = %s" for name in where)
    # Identifiers from the model's metadata; every value is a parameter.
    return f"UPDATE {table} SET {sets} WHERE {match}"  # noqa: S608


def _update_params(update: Update, conn: Any) -> list[Any]:
    meta = update.model._meta
    given = [*update.values.items(), *update.where.items()]
    return [meta.get_field(name).get_db_prep_save(value, conn) for name, value in given]


def update_rows(update: Update) -> int:
    """`model.objects.filter(**where).update(**values)`, the statement compiled once per model and
    field names: the number of rows it changed."""
    conn = connections[DEFAULT_DB_ALIAS]
    sql = memo(("update_rows", update.shape), lambda c: _update_sql(c, update.shape), conn)
    with conn.cursor() as cursor:
        cursor.execute(sql, _update_params(update, conn))
        return cursor.rowcount


def _groups(rows: Sequence[models.Model]) -> list[list[models.Model]]:
    """The rows by model, each model's rows in their order, the models in order of appearance."""
    groups: dict[type[models.Model], list[models.Model]] = {}
    for row in rows:
        groups.setdefault(type(row), []).append(row)
    return list(groups.values())


ClaimShape = tuple[
    type[models.Model],
    str,
    tuple[tuple[type[models.Model], int], ...],
    tuple[tuple[type[models.Model], tuple[str, ...], tuple[str, ...]], ...],
]


def _claiming_sql(conn: Any, shape: ClaimShape) -> str:
    claim_model, unique_field, inserts, updates = shape
    quote = conn.ops.quote_name
    claim_sql, _ = _insert(claim_model, conn.vendor, (unique_field,))
    if claim_model._meta.pk.db_returning:
        claim_sql = claim_sql.rsplit(" RETURNING ", 1)[0]  # it returns what the CTE needs instead
    # Identifiers and column types from the models' metadata; every value is a parameter. Each
    # write selects from `claimed`: when the claim inserts nothing, so does every write.
    writes = [f"claimed AS ({claim_sql} RETURNING 1)"]
    for i, (model, count) in enumerate(inserts):
        fields = _fields_of(model, conn)
        columns = ", ".join(quote(f.column) for f in fields)
        one = f"SELECT {_typed(conn, fields)} FROM claimed"  # noqa: S608
        rows = " UNION ALL ".join([one] * count)
        writes.append(f"i{i} AS (INSERT INTO {quote(model._meta.db_table)} ({columns}) {rows} RETURNING 1)")
    for j, (model, values, where) in enumerate(updates):
        meta = model._meta
        table = quote(meta.db_table)

        def column(name: str, meta: Any = meta) -> str:
            return quote(meta.get_field(name).column)

        def cast(name: str, meta: Any = meta) -> str:
            return _cast(conn, meta.get_field(name))

        sets = ", ".join(f"{column(n)} = {cast(n)}" for n in values)
        match = " AND ".join(f"{table}.{column(n)} = {cast(n)}" for n in where)
        writes.append(f"u{j} AS (UPDATE {table} SET {sets} FROM claimed WHERE {match} RETURNING 1)")  # noqa: S608
    names = ["claimed"] + [f"i{i}" for i in range(len(inserts))] + [f"u{j}" for j in range(len(updates))]
    counts = ", ".join(f"(SELECT count(*) FROM {name})" for name in names)  # noqa: S608
    return "WITH " + ", ".join(writes) + " SELECT " + counts


def insert_claiming(
    instance: models.Model,
    unique_field: str,
    rows: Sequence[models.Model] = (),
    updates: Sequence[Update] = (),
) -> list[int] | None:
    """Claim: INSERT `instance` unless a row with its `unique_field` exists (`insert_unless_conflict`:
    only that unique key decides; a concurrent writer of the same key makes this wait for its
    commit), and then — only if it was inserted — the new `rows` (of any models: `insert_rows`) and
    the `updates` (`update_rows`). None if the claim inserted nothing (and then nothing else was
    written); otherwise the number of rows each update changed.

    On PostgreSQL ONE statement, a data-modifying CTE: every write selects from what the claim
    returned, so a claim that inserted nothing wrote nothing, and the transaction goes on (no error,
    no savepoint). Its writes see the statement's one snapshot, so no two of them may touch the
    same row. SQLite: the statements in turn (its writers run one at a time)."""
    conn = connections[DEFAULT_DB_ALIAS]
    groups = _groups(rows)
    if conn.vendor != "postgresql" or (not rows and not updates) or len(rows) > MAX_CLAIMED_ROWS:
        if not insert_unless_conflict(instance, unique_field):
            return None
        for group in groups:
            insert_rows(group)
        return [update_rows(update) for update in updates]
    shape: ClaimShape = (
        type(instance),
        unique_field,
        tuple((type(group[0]), len(group)) for group in groups),
        tuple(update.shape for update in updates),
    )
    sql = memo(("insert_claiming", shape), lambda c: _claiming_sql(c, shape), conn)
    claim_fields = _insert(type(instance), conn.vendor, (unique_field,))[1]
    params = _values(instance, claim_fields, conn)
    for group in groups:
        fields = _fields_of(type(group[0]), conn)
        for row in group:
            params += _values(row, fields, conn)
    for update in updates:
        params += _update_params(update, conn)
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        claimed, *counts = cursor.fetchone()
    if not claimed:
        return None
    inserted, updated = counts[: len(groups)], counts[len(groups) :]
    if inserted != [len(group) for group in groups]:  # cannot be: each row selects the claimed row
        raise RuntimeError(f"claimed with {inserted} of {[len(g) for g in groups]} rows")
    for row in [instance, *rows]:
        _saved(conn, row)
    return updated
