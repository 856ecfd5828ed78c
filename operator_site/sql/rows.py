"""One-row lookups and inserts, compiled once per model: the hot path of every write."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections, models

from operator_site.sql.compiled import memo

M = TypeVar("M", bound=models.Model)


def wrapped_cursor(conn: Any, cursor_class: type[psycopg.Cursor[Any]]) -> Any:
    """A psycopg cursor of `cursor_class` (`ClientCursor`: values bound on the client, several
    statements in one message; `RawCursor`: PostgreSQL's own `$1` placeholders, the text sent as
    it is) on Django's connection, inside Django's own cursor wrapper: its error translation,
    execute wrappers and query log. PostgreSQL only."""
    conn.ensure_connection()
    raw = cursor_class(conn.connection)
    return conn.make_debug_cursor(raw) if conn.queries_logged else conn.make_cursor(raw)


# --- one-row lookups -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Select:
    sql: str
    attnames: tuple[str, ...]
    # (column position, converters, the column expression they are given), as the ORM applies them
    converters: tuple[tuple[int, tuple[Callable[..., Any], ...], Any], ...]
    params: tuple[models.Field, ...]


def _columns(conn: Any, model: type[models.Model], alias: str) -> tuple[str, tuple[str, ...], tuple]:
    """The model's concrete columns as `alias.column`, their attnames, and their converters."""
    meta = model._meta
    quote = conn.ops.quote_name
    converters = []
    for position, field in enumerate(meta.concrete_fields):
        # What SQLCompiler.get_converters finds for a plain column: the backend's, then the field's.
        column = field.get_col(meta.db_table)
        found = tuple(conn.ops.get_db_converters(column) + column.get_db_converters(conn))
        if found:
            converters.append((position, found, column))
    select = ", ".join(f"{alias}.{quote(f.column)}" for f in meta.concrete_fields)
    return select, tuple(f.attname for f in meta.concrete_fields), tuple(converters)


def _select(conn: Any, model: type[models.Model], fields: tuple[str, ...]) -> _Select:
    meta = model._meta
    quote = conn.ops.quote_name
    where = " AND ".join(f"t.{quote(meta.get_field(name).column)} = %s" for name in fields)
    columns, attnames, converters = _columns(conn, model, "t")
    return _Select(
        # Identifiers from the model's metadata; every value is a parameter.
        sql=f"SELECT {columns} FROM {quote(meta.db_table)} t WHERE {where}",  # noqa: S608
        attnames=attnames,
        converters=converters,
        params=tuple(meta.get_field(name) for name in fields),
    )


def _converted(conn: Any, converters: Sequence[Any], row: Sequence[Any]) -> list[Any]:
    """A row's cells with the ORM's converters applied ((position, converters, column) each)."""
    values = list(row)
    for position, convert_all, column in converters:
        value = values[position]
        for convert in convert_all:
            value = convert(value, column, conn)
        values[position] = value
    return values


def _instance(conn: Any, model: type[M], select: Any, row: Sequence[Any]) -> M:
    return model.from_db(conn.alias, select.attnames, _converted(conn, select.converters, row))


def rows_where(model: type[M], **equals: Any) -> list[M]:
    """The rows whose fields equal the given values (in no particular order), as model instances
    with every value converted as the ORM converts it (`Model.from_db`, the ORM's converters)."""
    conn = connections[DEFAULT_DB_ALIAS]
    select = memo(("rows_where", model, tuple(equals)), lambda c: _select(c, model, tuple(equals)), conn)
    given = zip(select.params, equals.values(), strict=True)
    params = [field.get_db_prep_value(value, conn) for field, value in given]
    with conn.cursor() as cursor:
        cursor.execute(select.sql, params)
        rows = cursor.fetchall()
    return [_instance(conn, model, select, row) for row in rows]


def row_where(model: type[M], **equals: Any) -> M | None:
    """The row whose (unique) fields equal the given values, or None."""
    rows = rows_where(model, **equals)
    if len(rows) > 1:
        raise ValueError(f"{model.__name__} lookup on {sorted(equals)} is not unique")
    return rows[0] if rows else None


# --- inserts ---------------------------------------------------------------------------------------
def _cast(conn: Any, field: models.Field) -> str:
    """A placeholder typed as its column (a parameter selected rather than inserted has no type to
    take from its column): the column's type without its modifiers — an explicit cast to
    varchar(n) would cut a longer value silently, where assigning it to the column refuses it as
    the ORM's insert does."""
    db_type = field.db_type(conn)
    if not db_type:
        raise TypeError(f"{field} has no column type to cast to")
    return f"CAST(%s AS {db_type.split('(', 1)[0].strip()})"


def _typed(conn: Any, fields: Sequence[models.Field], given: Mapping[models.Field, str] | None = None) -> str:
    """The select list of an `INSERT … SELECT`: a typed placeholder per field (`_cast`), or the
    expression `given` for it (a key selected from a CTE)."""
    given = given or {}
    return ", ".join(given[f] if f in given else _cast(conn, f) for f in fields)


def _insert_select(
    conn: Any, model: type[models.Model], source: str, given: Mapping[models.Field, str] | None = None
) -> tuple[str, tuple[models.Field, ...]]:
    """`INSERT INTO <model's table> (<insert_row's columns>) SELECT … FROM <source>` (the select
    list: `_typed`), and the fields whose values are bound, in order (those not `given`)."""
    head, fields = _insert(model, conn.vendor, ())
    # Identifiers and column types from the model's metadata; every value is a parameter.
    sql = f"{head.partition(' VALUES ')[0]} SELECT {_typed(conn, fields, given)} FROM {source}"  # noqa: S608
    return sql, tuple(f for f in fields if f not in (given or {}))


def _saved(conn: Any, instance: models.Model, key: Any = None) -> None:
    """`instance` is a row now, as `save()` leaves it: its generated key (when given) and its state."""
    if key is not None:
        setattr(instance, type(instance)._meta.pk.attname, key)
    instance._state.adding = False
    instance._state.db = conn.alias


@functools.cache
def _insert(
    model: type[models.Model], vendor: str, unless_conflict_on: tuple[str, ...] = ()
) -> tuple[str, tuple[models.Field, ...]]:
    from operator_site.models import AppendOnlyModel  # the models module appends through this one

    # A new row of an append-only model is what its save() allows; any other save() override
    # holds logic this must not skip.
    if model.save not in (models.Model.save, AppendOnlyModel.save):
        raise TypeError(f"{model.__name__} overrides save(); insert it through the ORM")
    meta = model._meta
    pk = meta.pk
    # The primary key is left to the database when it generates it (an auto field).
    fields = tuple(f for f in meta.concrete_fields if not (f is pk and f.db_returning))
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({placeholders})"  # noqa: S608
    if unless_conflict_on:
        # Only the named unique key is the arbiter: any other constraint still raises.
        target = ", ".join(quote(meta.get_field(name).column) for name in unless_conflict_on)
        sql += f" ON CONFLICT ({target}) DO NOTHING"
    if pk.db_returning:
        sql += f" RETURNING {quote(pk.column)}"
    return sql, fields


def insert_row(instance: M) -> M:
    """INSERT `instance` (a new row) with one prepared statement; sets its primary key. What
    `instance.save(force_insert=True)` writes, without compiling the statement per call."""
    _execute_insert(instance, ())
    return instance


def insert_unless_conflict(
    instance: M, *unique_fields: str, child: tuple[models.Model, str] | None = None
) -> bool:
    """INSERT `instance` unless a row with the same values of `unique_fields` (exactly the fields
    of one unique constraint) exists; True if it was inserted. With `child` — a new row and the
    name of its foreign key to `instance` — that row too, pointing at it, only if `instance` was
    inserted: one statement on PostgreSQL (`_pair_sql`; an intent and its decision).

    `INSERT … ON CONFLICT (…) DO NOTHING`: the unique constraint decides, also between concurrent
    writers (on PostgreSQL the second waits for the first to commit or roll back), and a duplicate
    costs no error — so no savepoint is needed around it (two round trips on PostgreSQL) and the
    transaction stays usable for reading the row that won. (`bulk_create(ignore_conflicts=True)`
    names no arbiter — any constraint would be ignored — and sets no primary key on PostgreSQL.)"""
    if not unique_fields:
        raise ValueError("name the fields of the unique constraint that decides")
    if child is None:
        return _execute_insert(instance, unique_fields)
    row, relation = child
    _child_key(type(instance), type(row), relation)
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.vendor != "postgresql":
        if not _execute_insert(instance, unique_fields):
            return False
        setattr(row, relation, instance)
        insert_row(row)
        return True
    shape = (type(instance), unique_fields, type(row), relation)
    plan = memo(("insert_unless_conflict", *shape), lambda c: _pair_sql(c, *shape), conn)
    params = _values(instance, plan.fields, conn) + _values(row, plan.child_fields, conn)
    with conn.cursor() as cursor:
        cursor.execute(plan.sql, params)
        keys = cursor.fetchone()
    if keys is None:  # a row with that key exists: nothing was written
        return False
    for obj, key in zip((instance, row), keys, strict=True):
        _saved(conn, obj, key)
    setattr(row, relation, instance)
    return True


@functools.cache
def _child_key(model: type[models.Model], child: type[models.Model], relation: str) -> models.Field:
    """The child's foreign key `relation` to `model`, both primary keys generated by the database."""
    foreign = child._meta.get_field(relation)
    if foreign.related_model is not model or not (
        model._meta.pk.db_returning and child._meta.pk.db_returning
    ):
        raise TypeError(
            f"{child.__name__}.{relation}: not a foreign key to {model.__name__} (both keys generated)"
        )
    return foreign


@dataclass(frozen=True)
class _Pair:
    sql: str
    fields: tuple[models.Field, ...]
    child_fields: tuple[models.Field, ...]  # but its foreign key, which selects the new key


def _pair_sql(
    conn: Any,
    model: type[models.Model],
    unique_fields: tuple[str, ...],
    child: type[models.Model],
    relation: str,
) -> _Pair:
    """PostgreSQL: the claim (`INSERT … ON CONFLICT (…) DO NOTHING RETURNING key`) and the child's
    insert selecting the claimed key, as a data-modifying CTE: when the claim inserts nothing, the
    child selects no row and the answer is empty."""
    quote = conn.ops.quote_name
    claim_sql, fields = _insert(model, conn.vendor, unique_fields)
    key, child_key = quote(model._meta.pk.column), quote(child._meta.pk.column)
    foreign = _child_key(model, child, relation)
    insert_child, child_fields = _insert_select(conn, child, "claimed", {foreign: f"claimed.{key}"})
    # Identifiers and column types from the models' metadata; every value is a parameter.
    answer = f"SELECT claimed.{key}, c.{child_key} FROM claimed, c"  # noqa: S608
    return _Pair(
        sql=f"WITH claimed AS ({claim_sql}), c AS ({insert_child} RETURNING {child_key}) {answer}",
        fields=fields,
        child_fields=child_fields,
    )


def _values(instance: models.Model, fields: Sequence[models.Field], conn: Any) -> list[Any]:
    """The values of `instance` for `fields`, prepared as the ORM's insert prepares them."""
    return [f.get_db_prep_save(f.pre_save(instance, True), conn) for f in fields]


def _execute_insert(instance: M, unless_conflict_on: tuple[str, ...]) -> bool:
    # The connection itself, looked up once: every `connection.x` through Django's proxy is a
    # context-local lookup, and preparing the values of a wide row makes dozens of them.
    conn = connections[DEFAULT_DB_ALIAS]
    return _run_insert(conn, instance, *_insert(type(instance), conn.vendor, unless_conflict_on))


def _run_insert(conn: Any, instance: M, sql: str, fields: Sequence[models.Field]) -> bool:
    """Execute an insert of `instance` (`sql`, taking `fields`' values); set its primary key and
    state when a row was inserted. True if one was."""
    model = type(instance)
    with conn.cursor() as cursor:
        cursor.execute(sql, _values(instance, fields, conn))
        if model._meta.pk.db_returning:
            row = cursor.fetchone()
            inserted, key = row is not None, row[0] if row else None
        else:
            inserted, key = cursor.rowcount > 0, None
    if inserted:
        _saved(conn, instance, key)
    return inserted


def create_row(model: type[M], **values: Any) -> M:
    """`model.objects.create(**values)` through insert_row()."""
    return insert_row(model(**values))


@dataclass(frozen=True)
class _Under:
    sql: str
    fields: tuple[models.Field, ...]  # the child's inserted fields but the foreign key, in order
    parent: _Select  # the parent's columns, after the child's primary key in the answer
    wheres: tuple[models.Field, ...]


@functools.cache
def _unique(model: type[models.Model], names: tuple[str, ...]) -> bool:
    """Whether `names` are exactly the fields of a unique field or an unconditional unique
    constraint of `model`."""
    meta = model._meta
    if len(names) == 1 and meta.get_field(names[0]).unique:
        return True
    keys = [set(fields) for fields in meta.unique_together]
    keys += [
        set(c.fields)
        for c in meta.constraints
        if isinstance(c, models.UniqueConstraint) and c.fields and c.condition is None and not c.expressions
    ]
    return set(names) in keys


def _under_sql(conn: Any, model: type[models.Model], relation: str, lookup: tuple[str, ...]) -> _Under:
    """PostgreSQL: the parent row found by `lookup`, and the child inserted with its key, selected
    from it — nothing inserted when there is none; the answer is the child's key and the parent."""
    quote = conn.ops.quote_name
    foreign = model._meta.get_field(relation)
    parent_model = foreign.related_model
    if not model._meta.pk.db_returning:
        raise TypeError(f"{model.__name__}: insert_under answers the key the database generates")
    insert, fields = _insert_select(conn, model, "p", {foreign: f"p.{quote(parent_model._meta.pk.column)}"})
    parent = _select(conn, parent_model, lookup)
    columns = _columns(conn, parent_model, "p")[0]
    key = quote(model._meta.pk.column)
    # Identifiers and column types from the models' metadata; every value is a parameter.
    sql = f"WITH p AS ({parent.sql}), i AS ({insert} RETURNING {key}) SELECT i.{key}, {columns} FROM i, p"  # noqa: S608
    return _Under(sql=sql, fields=fields, parent=parent, wheres=parent.params)


def insert_under(instance: M, relation: str, **lookup: Any) -> M | None:
    """INSERT `instance` as a child of the row that the foreign key `relation` points to, found by
    `lookup` (fields of a unique constraint of that model), and attach that row to it (as
    `select_related` does); None, and nothing inserted, when there is no such row.

    On PostgreSQL ONE statement (the parent read and the insert that selects its key: a record of
    today and today's operator day), instead of a lookup and an insert; on SQLite the two in turn."""
    conn = connections[DEFAULT_DB_ALIAS]
    model = type(instance)
    foreign = model._meta.get_field(relation)
    if not _unique(foreign.related_model, tuple(lookup)):
        # One parent at most, so one child at most: never a child per matching row.
        raise ValueError(f"{foreign.related_model.__name__}: {tuple(lookup)} are not a unique key's fields")
    if conn.vendor != "postgresql":
        parent = row_where(foreign.related_model, **lookup)
        if parent is None:
            return None
        setattr(instance, relation, parent)
        return insert_row(instance)
    plan = memo(
        ("insert_under", model, relation, tuple(lookup)),
        lambda c: _under_sql(c, model, relation, tuple(lookup)),
        conn,
    )
    # The lookup's values first: the parent's SELECT comes first in the statement.
    given = zip(plan.wheres, lookup.values(), strict=True)
    params = [field.get_db_prep_value(value, conn) for field, value in given]
    params += _values(instance, plan.fields, conn)
    with conn.cursor() as cursor:
        cursor.execute(plan.sql, params)
        rows = cursor.fetchall()
    if not rows:
        return None
    key, *values = rows[0]  # one at most: the lookup is a unique key (_under_sql)
    _saved(conn, instance, key)
    setattr(instance, relation, _instance(conn, foreign.related_model, plan.parent, values))
    return instance


def insert_async_commit(instance: M) -> M:
    """INSERT `instance` on its own, committed without waiting for the WAL flush on PostgreSQL
    (`synchronous_commit = off` for this one transaction; SQLite and a caller's open transaction:
    a plain insert_row). For a row whose loss in a database crash loses nothing of the person's
    state: the audit row of a read (docs/performance.md has the trade-off). One statement, one
    round trip, prepared like every other (`_async_insert`): the connection is in autocommit, so
    the statement is its own transaction, and `set_config(…, true)` sets the setting for that
    transaction alone — its commit does not wait for the flush."""
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.vendor != "postgresql" or conn.in_atomic_block or not conn.get_autocommit():
        return insert_row(instance)
    _run_insert(conn, instance, *_async_insert(type(instance)))
    return instance


@functools.cache
def _async_insert(model: type[models.Model]) -> tuple[str, tuple[models.Field, ...]]:
    """PostgreSQL: `insert_row`'s statement for `model`, its values selected from the one row of
    `set_config('synchronous_commit', 'off', true)` (each cast to its column's type, as a
    selected parameter has none of its own)."""
    pk = model._meta.pk
    returning = f" RETURNING {connection.ops.quote_name(pk.column)}" if pk.db_returning else ""
    source = "(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit"
    sql, fields = _insert_select(connection, model, source)
    return sql + returning, fields


# A transaction that does not wait for the WAL flush when it commits (PostgreSQL).
ASYNC_COMMIT_BEGIN = "BEGIN; SET LOCAL synchronous_commit TO OFF"


def send_with_insert(
    instance: M,
    *,
    before: str,
    after: str,
    rows_before: Sequence[tuple[models.Model, tuple[str, ...]]] = (),
) -> M:
    """PostgreSQL: INSERT `instance` between the statements `before` and `after` (fixed SQL of the
    seam: transaction control), all in ONE simple-protocol message — one round trip — with the
    values bound by psycopg on the client; sets the primary key. `rows_before`: rows inserted in
    the same message just before it (each with the fields of the unique key that decides it, or ()
    for a plain insert; no primary key is read back). The server runs the statements in order and
    stops at the first error, which is raised as Django's (inside Django's atomic(), which rolls
    the transaction back)."""
    conn = connections[DEFAULT_DB_ALIAS]
    model = type(instance)
    sql, fields = _insert(model, conn.vendor, ())
    params = []
    inserts = []
    for row, unless_conflict_on in rows_before:
        row_sql, row_fields = _insert(type(row), conn.vendor, unless_conflict_on)
        inserts.append(row_sql.rsplit(" RETURNING ", 1)[0])
        params += _values(row, row_fields, conn)
    params += _values(instance, fields, conn)
    cursor = wrapped_cursor(conn, psycopg.ClientCursor)
    raw = cursor.cursor
    leading = [part for part in before.split(";") if part.strip()] + inserts
    with cursor:
        batch = "; ".join([*leading, sql, *([after] if after else [])])
        cursor.execute(batch, params)
        if model._meta.pk.db_returning:
            for _ in leading:
                raw.nextset()  # past each leading statement's result to the insert's
            setattr(instance, model._meta.pk.attname, raw.fetchone()[0])
    for row in [instance, *(row for row, _ in rows_before)]:
        row._state.adding = False
        row._state.db = conn.alias
    return instance
