"""The advisory lock, a column's maximum, the notice budget, a rule's rows, and the database's pulse."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.models import QuerySet

from operator_site.sql.compiled import as_params, bind, check_builder, memo, params_for
from operator_site.sql.loading import loader
from operator_site.sql.rows import _columns, _converted

M = TypeVar("M", bound=models.Model)


# --- locks, maxima, budgets, a rule's rows ---------------------------------------------------------
def lock_key(name: str) -> int:
    """The advisory-lock key of a name (a positive bigint): the one key scheme of every lock."""
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def advisory_xact_lock(name: str) -> None:
    """Queue behind any other transaction holding the lock `name`, until this transaction ends
    (PostgreSQL `pg_advisory_xact_lock` on `lock_key(name)`; released at commit or rollback, so a
    hung client cannot hold it past its transaction). SQLite needs none: its write transactions run
    one at a time."""
    if connection.vendor != "postgresql":
        return
    key = lock_key(name)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def max_value(model: type[models.Model], field: str) -> Any:
    """`model.objects.aggregate(Max(field))`, without compiling the aggregate on every call."""
    conn = connections[DEFAULT_DB_ALIAS]

    def make(c: Any) -> str:
        quote = c.ops.quote_name
        column = quote(model._meta.get_field(field).column)
        return f"SELECT MAX({column}) FROM {quote(model._meta.db_table)}"  # noqa: S608

    sql = memo(("max_value", model, field), make, conn)
    with conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def take_budget_slot(kind: str, hour: int, cap: int) -> int | None:
    """Take one slot of a notification budget (kind, clock hour) if fewer than `cap` are used:
    the number used now, or None when none was left. One statement, atomic on both databases."""
    from operator_site.models import NotificationBudget

    def make(c: Any) -> str:
        table = c.ops.quote_name(NotificationBudget._meta.db_table)
        return (
            f"INSERT INTO {table} (kind, hour, used) VALUES (%s, %s, 1) "  # noqa: S608
            f"ON CONFLICT (kind, hour) DO UPDATE SET used = {table}.used + 1 WHERE {table}.used < %s "
            f"RETURNING used"
        )

    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(memo("take_budget_slot", make), [kind, hour, cap])
        row = cursor.fetchone()
    return None if row is None else row[0]


def instances(build: Callable[..., QuerySet[M]], **values: Any) -> list[M]:
    """The model instances of `build(**values)` — a queryset of one model, as the ORM defines it —
    its SQL compiled once per connection: `build` receives a `Param` for each value (so the rule
    stays written once, in the ORM), and each call binds its own values. A plain function of its
    arguments, as in `compiled`. The rows are read by a plain cursor and built as the ORM builds
    them — its converters, then `Model.from_db`'s instance (`loading.loader`) — which costs a
    third of what `QuerySet.raw` spent resolving its columns and converters on every call.
    tests/test_sql.py compares it with the ORM."""
    check_builder(build)
    conn = connections[DEFAULT_DB_ALIAS]
    types = params_for(values)

    def make(c: Any) -> tuple[type[M], str, tuple[Any, ...], tuple[Any, ...]]:
        queryset = build(**as_params(types))
        query = queryset.query
        if query.select_related or query.annotations or query.extra or query.values_select:
            raise ValueError("instances() takes a queryset of one model's rows, nothing joined or added")
        model = queryset.model
        attnames = [f.attname for f in model._meta.concrete_fields]
        # Every concrete column, in the model's order, whatever the queryset deferred.
        sql, compiled_params = queryset.values_list(*attnames).query.get_compiler(connection=c).as_sql()
        return model, sql, tuple(compiled_params), _columns(c, model, "t")[2]

    model, sql, params, converters = memo(("instances", build, types), make, conn)
    return _built(conn, model, converters, sql, bind(params, values, conn))


def _built(conn: Any, model: type[M], converters: tuple[Any, ...], sql: str, params: list[Any]) -> list[M]:
    """The rows `sql` reads (every concrete column of `model`, in its order), as the ORM builds them."""
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    make_instance = loader(model)
    return [make_instance(conn.alias, _converted(conn, converters, row)) for row in rows]


def update_returning(build: Callable[..., QuerySet[M]], changes: dict[str, Any], **values: Any) -> list[M]:
    """`build(**values).update(**changes)`, and the rows it changed as they are after it (every
    column, `RETURNING`): a conditional update and the read of what it changed in ONE statement —
    one round trip, and no moment between them for another writer. The condition is written once,
    in the ORM (`build` receives a `Param` for each value, as in `instances`), on the updated
    table's own columns: no join and no subquery, so a row another transaction changed meanwhile is
    checked again against its new version (PostgreSQL re-evaluates the condition of an UPDATE on
    the row it waited for; a subquery's rows it would not). Compiled once per connection, builder,
    value types and changed fields; each change is prepared by its model field, as
    `QuerySet.update` prepares it. tests/test_sql.py compares it with the ORM."""
    check_builder(build)
    conn = connections[DEFAULT_DB_ALIAS]
    types = params_for(values)
    names = tuple(changes)

    def make(c: Any) -> tuple[type[M], str, tuple[Any, ...], tuple[Any, ...], tuple[models.Field, ...]]:
        queryset = build(**as_params(types))
        query = queryset.query
        model, meta = queryset.model, queryset.model._meta
        if (
            len(query.alias_map) != 1
            or query.select_related
            or query.annotations
            or query.extra
            or query.values_select
            or query.is_sliced
            or not query.where
        ):
            raise ValueError("update_returning() takes a condition on one model's own columns, nothing else")
        compiler = query.get_compiler(connection=c)
        where, where_params = compiler.compile(query.where)
        quote = c.ops.quote_name
        table = quote(meta.db_table)
        fields = tuple(meta.get_field(name) for name in names)
        sets = ", ".join(f"{quote(field.column)} = %s" for field in fields)
        columns, _attnames, converters = _columns(c, model, table)
        # Identifiers from the model's metadata, the condition compiled by the ORM; every value is a
        # parameter.
        sql = f"UPDATE {table} SET {sets} WHERE {where} RETURNING {columns}"  # noqa: S608
        return model, sql, tuple(where_params), converters, fields

    model, sql, params, converters, fields = memo(("update_returning", build, types, names), make, conn)
    given = [field.get_db_prep_save(changes[field.name], conn) for field in fields]
    return _built(conn, model, converters, sql, given + bind(params, values, conn))


def probe() -> None:
    """Connect once, to say at start-up whether the database can be reached. A pooled PostgreSQL
    connection is opened directly, outside the pool (the pool would retry in the background for
    its whole timeout, logging each try)."""
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.vendor == "postgresql" and conn.settings_dict["OPTIONS"].get("pool"):
        with conn.wrap_database_errors:
            conn.Database.connect(**conn.get_connection_params()).close()
        return
    conn.ensure_connection()


def ping() -> None:
    """One round trip to the database (raises when it cannot be reached)."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
