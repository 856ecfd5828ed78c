"""Statements compiled once: the one-row lookups and inserts every tool call makes.

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
from typing import Any, TypeVar

from django.db import connection, models

M = TypeVar("M", bound=models.Model)


@functools.cache
def _select(model: type[models.Model], fields: tuple[str, ...], vendor: str) -> str:
    quote = connection.ops.quote_name
    where = " AND ".join(f"{quote(model._meta.get_field(name).column)} = %s" for name in fields)
    return f"SELECT * FROM {quote(model._meta.db_table)} WHERE {where}"  # noqa: S608 - identifiers


def rows_where(model: type[M], **equals: Any) -> list[M]:
    """The rows whose fields equal the given values (in no particular order)."""
    sql = _select(model, tuple(equals), connection.vendor)
    params = [
        model._meta.get_field(name).get_db_prep_value(value, connection) for name, value in equals.items()
    ]
    return list(model.objects.raw(sql, params))


def row_where(model: type[M], **equals: Any) -> M | None:
    """The row whose (unique) fields equal the given values, or None."""
    rows = rows_where(model, **equals)
    if len(rows) > 1:
        raise ValueError(f"{model.__name__} lookup on {sorted(equals)} is not unique")
    return rows[0] if rows else None


@functools.cache
def _insert(model: type[models.Model], vendor: str) -> tuple[str, tuple[models.Field, ...]]:
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
    if pk.db_returning:
        sql += f" RETURNING {quote(pk.column)}"
    return sql, fields


def insert_row(instance: M) -> M:
    """INSERT `instance` (a new row) with one prepared statement; sets its primary key. What
    `instance.save(force_insert=True)` writes, without compiling the statement per call."""
    model = type(instance)
    sql, fields = _insert(model, connection.vendor)
    params = [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if model._meta.pk.db_returning:
            setattr(instance, model._meta.pk.attname, cursor.fetchone()[0])
    instance._state.adding = False
    instance._state.db = connection.alias
    return instance


def create_row(model: type[M], **values: Any) -> M:
    """`model.objects.create(**values)` through insert_row()."""
    return insert_row(model(**values))
