"""Statements compiled once: the one-row lookups and inserts every tool call makes, and the fixed
reads of the orientation packet (`frozen_rows`, at the end).

The ORM compiles its SQL afresh on every call. For the handful of statements on the hot path of
every write (read today's operator day, a belief's pre-image; insert the intent, its event, its
decision, its notice, the version and change rows) that compilation costs several times the
statement itself: profiled, 0.2 to 0.5 ms of ORM work around a ~30 µs SQLite statement, paid on every
call. Here each statement is built once per model, fields and database vendor; values are prepared
by the model's own fields exactly as the ORM prepares them (`pre_save` then `get_db_prep_save` for
an insert, `get_db_prep_value` for a lookup), and looked-up rows come back as model instances
through `raw()`, which applies the same converters. Identifiers come from the model's metadata;
every value is a parameter. No signals are involved anywhere in this project (none are connected),
and models that override `save()` (other than the append-only guard against updates) are refused
here rather than silently bypassed.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.models import QuerySet

M = TypeVar("M", bound=models.Model)
T = TypeVar("T")


@dataclass(frozen=True)
class _Select:
    sql: str
    attnames: tuple[str, ...]
    # (column position, converters, the column expression they are given), as the ORM applies them
    converters: tuple[tuple[int, tuple[Callable[..., Any], ...], Any], ...]
    params: tuple[models.Field, ...]


def _select(conn: Any, model: type[models.Model], fields: tuple[str, ...]) -> _Select:
    meta = model._meta
    quote = conn.ops.quote_name
    columns = meta.concrete_fields
    where = " AND ".join(f"{quote(meta.get_field(name).column)} = %s" for name in fields)
    converters = []
    for position, field in enumerate(columns):
        # What SQLCompiler.get_converters finds for a plain column: the backend's, then the field's.
        column = field.get_col(meta.db_table)
        found = tuple(conn.ops.get_db_converters(column) + column.get_db_converters(conn))
        if found:
            converters.append((position, found, column))
    return _Select(
        # Identifiers from the model's metadata; every value is a parameter.
        sql=f"SELECT {', '.join(quote(f.column) for f in columns)} FROM {quote(meta.db_table)} "  # noqa: S608
        f"WHERE {where}",
        attnames=tuple(f.attname for f in columns),
        converters=tuple(converters),
        params=tuple(meta.get_field(name) for name in fields),
    )


def rows_where(model: type[M], **equals: Any) -> list[M]:
    """The rows whose fields equal the given values (in no particular order), as model instances
    with every value converted as the ORM converts it (`Model.from_db`, the ORM's converters)."""
    conn = connections[DEFAULT_DB_ALIAS]
    select = memo(("rows_where", model, tuple(equals)), lambda c: _select(c, model, tuple(equals)))
    given = zip(select.params, equals.values(), strict=True)
    params = [field.get_db_prep_value(value, conn) for field, value in given]
    with conn.cursor() as cursor:
        cursor.execute(select.sql, params)
        rows = cursor.fetchall()
    found = []
    for row in rows:
        values = list(row)
        for position, converters, column in select.converters:
            value = values[position]
            for convert in converters:
                value = convert(value, column, conn)
            values[position] = value
        found.append(model.from_db(conn.alias, select.attnames, values))
    return found


def row_where(model: type[M], **equals: Any) -> M | None:
    """The row whose (unique) fields equal the given values, or None."""
    rows = rows_where(model, **equals)
    if len(rows) > 1:
        raise ValueError(f"{model.__name__} lookup on {sorted(equals)} is not unique")
    return rows[0] if rows else None


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


def insert_unless_conflict(instance: M, *unique_fields: str) -> bool:
    """INSERT `instance` unless a row with the same values of `unique_fields` (exactly the fields
    of one unique constraint) exists; True if it was inserted.

    `INSERT … ON CONFLICT (…) DO NOTHING`: the unique constraint decides, also between concurrent
    writers (on PostgreSQL the second waits for the first to commit or roll back), and a duplicate
    costs no error — so no savepoint is needed around it (two round trips on PostgreSQL) and the
    transaction stays usable for reading the row that won."""
    if not unique_fields:
        raise ValueError("name the fields of the unique constraint that decides")
    return _execute_insert(instance, unique_fields)


def _execute_insert(instance: M, unless_conflict_on: tuple[str, ...]) -> bool:
    model = type(instance)
    # The connection itself, looked up once: every `connection.x` through Django's proxy is a
    # context-local lookup, and preparing the values of a wide row makes dozens of them.
    conn = connections[DEFAULT_DB_ALIAS]
    sql, fields = _insert(model, conn.vendor, unless_conflict_on)
    params = [f.get_db_prep_save(f.pre_save(instance, True), conn) for f in fields]
    returning = model._meta.pk.db_returning
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        if returning:
            row = cursor.fetchone()
            inserted = row is not None
            if inserted:
                setattr(instance, model._meta.pk.attname, row[0])
        else:
            inserted = cursor.rowcount > 0
    if inserted:
        instance._state.adding = False
        instance._state.db = conn.alias
    return inserted


def create_row(model: type[M], **values: Any) -> M:
    """`model.objects.create(**values)` through insert_row()."""
    return insert_row(model(**values))


# --- read queries whose SQL and parameters never change --------------------------------------------
# Per connection (Django keeps one per thread), at most this many compiled queries are kept.
_MEMO_SIZE = 256


def memo(key: Hashable, make: Callable[[Any], T]) -> T:
    """`make(connection)`, computed once per connection and `key` (a bounded, per-connection cache:
    what is kept refers to that connection, and a thread never sees another thread's)."""
    conn = connections[DEFAULT_DB_ALIAS]
    cache: OrderedDict[Hashable, Any] = conn.__dict__.setdefault("operator_memo", OrderedDict())
    try:
        return cache[key]
    except KeyError:
        value = cache[key] = make(conn)
        while len(cache) > _MEMO_SIZE:
            cache.popitem(last=False)
        return value


def frozen_rows(key: Hashable, build: Callable[[], QuerySet[M]]) -> list[M]:
    """The rows of `build()`, a queryset whose SQL and parameters depend on nothing but `key` (a
    fixed filter on constants, a fixed limit): compiled once per connection, run as often as asked.

    The ORM compiles a queryset on every evaluation, and for the orientation packet's dozen small
    reads that compilation cost more than the SQL (profiled: over half of the packet's CPU). Here
    the queryset is built and compiled once; each call runs a fresh clone of it through the ORM's
    own iterable (model instances, select_related, prefetch_related, values_list — exactly what
    iterating the queryset gives), handing it the compiler whose SQL is already known. Django is
    pinned to 5.2, whose compilers are reusable once compiled (`execute_sql` reads only what
    `as_sql` set); tests/test_compiled_sql.py checks the rows against the plain ORM's.
    """

    def make(conn: Any) -> tuple[QuerySet[M], Any]:
        queryset = build()
        compiler = queryset.query.get_compiler(connection=conn)
        compiled = compiler.as_sql()
        # From now on this compiler answers its known SQL instead of compiling it again, and the
        # converters of its (fixed) columns once looked up (per row set, that lookup cost as much
        # as compiling).
        compiler.as_sql = lambda *args, **kwargs: compiled
        find_converters = compiler.get_converters
        converters: dict[tuple[int, ...], tuple[list[Any], Any]] = {}

        def get_converters(expressions: list[Any]) -> Any:
            # The expressions are the compiler's own columns (the same objects on every call).
            # They are kept with their converters, so an id here always names the same object.
            key = tuple(map(id, expressions))
            if key not in converters:
                converters[key] = (list(expressions), find_converters(expressions))
            return converters[key][1]

        compiler.get_converters = get_converters
        return queryset, compiler

    queryset, compiler = memo(("frozen_rows", key), make)
    clone = queryset.all()
    # The clone's query hands out the compiled compiler instead of making a new one.
    clone.query.get_compiler = lambda *args, **kwargs: compiler  # type: ignore[method-assign]
    return list(clone)
