"""The database seam: every statement written by hand, behind a name.

Outside this module the code speaks the ORM; whatever SQL text the project executes itself lives
here, one named function per statement, each compared with the ORM's answer on both databases by
tests/test_sql.py. Why by hand at all: the statements on the hot path of every call (the bearer
check with its rate count, the audit row, a write's one-row lookups and inserts) cost several times
their SQL in ORM compilation, and some things the ORM cannot say (`INSERT … ON CONFLICT (key) DO
NOTHING` with a named arbiter, an upsert that answers its count, an advisory lock, a read-only
snapshot). docs/performance.md has the figures.

Rules kept here: identifiers come from the models' metadata and every value is a parameter; the
models' own fields prepare values (`get_db_prep_save`, `get_db_prep_value`) and convert results
(the ORM's converters), so a row read here is the row the ORM reads. Only public APIs of Django and
psycopg are used.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
import psycopg
from django.core.management.color import no_style
from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction
from django.db.models import QuerySet

if TYPE_CHECKING:
    from operator_site.models import Principal

M = TypeVar("M", bound=models.Model)
T = TypeVar("T")


# --- compiled once per connection ------------------------------------------------------------------
# Per connection (a thread never shares another's), at most this many compiled statements are kept.
_MEMO_SIZE = 256


def memo(key: Hashable, make: Callable[[Any], T]) -> T:
    """`make(connection)`, computed once per connection and `key` (a bounded, per-connection cache:
    what is kept refers to that connection's vendor)."""
    conn = connections[DEFAULT_DB_ALIAS]
    cache: OrderedDict[Hashable, Any] = conn.__dict__.setdefault("operator_memo", OrderedDict())
    try:
        return cache[key]
    except KeyError:
        value = cache[key] = make(conn)
        while len(cache) > _MEMO_SIZE:
            cache.popitem(last=False)
        return value


def compiled(build: Callable[..., QuerySet[Any]], *args: Hashable) -> tuple[str, tuple[Any, ...]]:
    """The SQL and parameters of `build(*args)`, compiled by the ORM once per connection.

    The key is the builder and its arguments, nothing written by hand: `build` must be a plain
    function of its arguments (no closure, no partial), so the SQL cannot depend on anything the key
    does not hold. Only constants of the code and `args` may shape the queryset."""
    if getattr(build, "__closure__", None) or not hasattr(build, "__code__"):
        raise TypeError(f"{build!r}: a builder is a plain function of its arguments (no closure)")

    def make(conn: Any) -> tuple[str, tuple[Any, ...]]:
        queryset = build(*args)
        sql, params = queryset.query.get_compiler(connection=conn).as_sql()
        return sql, tuple(params)

    return memo(("compiled", build, args), make)


def tuples(build: Callable[..., QuerySet[Any]], *args: Hashable) -> list[tuple[Any, ...]]:
    """The rows of `build(*args)` — a `values_list` of plain integer and text columns, which need no
    converter — as tuples, compiled once per connection (`compiled`)."""
    sql, params = compiled(build, *args)
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(sql, params)
        return [tuple(row) for row in cursor.fetchall()]


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


def _instance(conn: Any, model: type[M], select: Any, row: Sequence[Any]) -> M:
    values = list(row)
    for position, converters, column in select.converters:
        value = values[position]
        for convert in converters:
            value = convert(value, column, conn)
        values[position] = value
    return model.from_db(conn.alias, select.attnames, values)


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
    return [_instance(conn, model, select, row) for row in rows]


def row_where(model: type[M], **equals: Any) -> M | None:
    """The row whose (unique) fields equal the given values, or None."""
    rows = rows_where(model, **equals)
    if len(rows) > 1:
        raise ValueError(f"{model.__name__} lookup on {sorted(equals)} is not unique")
    return rows[0] if rows else None


# --- inserts ---------------------------------------------------------------------------------------
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
    transaction stays usable for reading the row that won. (`bulk_create(ignore_conflicts=True)`
    names no arbiter — any constraint would be ignored — and sets no primary key on PostgreSQL.)"""
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


def insert_async_commit(instance: M) -> M:
    """INSERT `instance` on its own, committed without waiting for the WAL flush on PostgreSQL
    (`synchronous_commit = off` for this one transaction; SQLite and a caller's open transaction:
    a plain insert_row). For a row whose loss in a database crash loses nothing of the person's
    state: the audit row of a read (docs/performance.md has the trade-off). One round trip: the
    transaction, its setting, the insert and the commit go as one simple-protocol message, the
    values bound by psycopg on the client."""
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.vendor != "postgresql" or conn.in_atomic_block:
        return insert_row(instance)
    model = type(instance)
    sql, fields = _insert(model, conn.vendor, ())
    params = [f.get_db_prep_save(f.pre_save(instance, True), conn) for f in fields]
    conn.ensure_connection()
    raw = psycopg.ClientCursor(conn.connection)
    # Django's own cursor wrapper around it: its error translation, execute wrappers and query log.
    cursor = conn.make_debug_cursor(raw) if conn.queries_logged else conn.make_cursor(raw)
    with cursor:
        batch = f"BEGIN; SET LOCAL synchronous_commit TO OFF; {sql}; COMMIT"
        try:
            cursor.execute(batch, params)
        except BaseException:
            if not conn.connection.closed and conn.connection.info.transaction_status:
                conn.connection.rollback()
            raise
        if model._meta.pk.db_returning:
            raw.nextset()  # past SET LOCAL's empty result to the insert's
            raw.nextset()
            setattr(instance, model._meta.pk.attname, raw.fetchone()[0])
    instance._state.adding = False
    instance._state.db = conn.alias
    return instance


# --- the bearer check and the rate count -----------------------------------------------------------
def _rate_upsert(conn: Any, source: str) -> str:
    from operator_site.models import RateCounter

    quote = conn.ops.quote_name
    table = quote(RateCounter._meta.db_table)
    count, window = quote("count"), quote("window_no")
    return (
        f"INSERT INTO {table} (principal_id, {window}, {count}) {source} "
        f"ON CONFLICT (principal_id) DO UPDATE SET "
        f"{count} = CASE WHEN {table}.{window} >= excluded.{window} THEN {table}.{count} + 1 ELSE 1 END, "
        f"{window} = CASE WHEN {table}.{window} < excluded.{window} "
        f"THEN excluded.{window} ELSE {table}.{window} END "
        f"RETURNING {count}, {window}"
    )


def count_request(principal_id: int, window: int) -> tuple[int, int]:
    """Count one request of the principal in rate window `window`: one atomic upsert that answers
    (the count in the stored window, that window). PostgreSQL serialises upserts of one row, SQLite
    its writers, so the count holds across workers and hosts."""
    conn = connections[DEFAULT_DB_ALIAS]
    sql = memo("count_request", lambda c: _rate_upsert(c, "VALUES (%s, %s, 1)"))
    with conn.cursor() as cursor:
        cursor.execute(sql, [principal_id, window])
        count, window_no = cursor.fetchone()
    return count, window_no


def _principal_and_count_sql(conn: Any) -> tuple[str, Any]:
    from operator_site.models import Principal

    quote = conn.ops.quote_name
    meta = Principal._meta
    columns, attnames, converters = _columns(conn, Principal, "p")
    upsert = _rate_upsert(conn, "SELECT p.id, %s, 1 FROM p WHERE p.active")
    count, window = quote("count"), quote("window_no")
    sql = (
        f"WITH p AS (SELECT * FROM {quote(meta.db_table)} WHERE token_digest = %s), "  # noqa: S608
        f"r AS ({upsert}) "
        f"SELECT {columns}, r.{count}, r.{window} FROM p LEFT JOIN r ON TRUE"
    )
    return sql, _Select(sql, attnames, converters, ())


def principal_and_count(
    token_digest: str, window: int | None
) -> tuple[Principal | None, tuple[int, int] | None]:
    """The principal holding this token digest and, when it is active and `window` is given, its
    request counted in that rate window (`count_request`): (principal or None, (count, window) or
    None). On PostgreSQL ONE statement (a data-modifying CTE); on SQLite, which has none, the lookup
    and the upsert are two calls into the library in the caller's unit of work (no round trip)."""
    from operator_site.models import Principal

    conn = connections[DEFAULT_DB_ALIAS]
    if window is None or conn.vendor != "postgresql":
        principal = row_where(Principal, token_digest=token_digest)
        if principal is None or not principal.active or window is None:
            return principal, None
        return principal, count_request(principal.pk, window)
    sql, select = memo("principal_and_count", _principal_and_count_sql)
    with conn.cursor() as cursor:
        cursor.execute(sql, [token_digest, window])
        row = cursor.fetchone()
    if row is None:
        return None, None
    width = len(select.attnames)
    principal = _instance(conn, Principal, select, row[:width])
    counted = (row[width], row[width + 1]) if row[width] is not None else None
    return principal, counted


# --- locks, maxima, budgets, a rule's rows ---------------------------------------------------------
def lock_key(name: str) -> int:
    """The advisory-lock key of a name (a positive bigint): the one key scheme of every lock."""
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def advisory_xact_lock(name: str | int) -> None:
    """Queue behind any other transaction holding the lock `name`, until this transaction ends
    (PostgreSQL `pg_advisory_xact_lock` on `lock_key(name)`; released at commit or rollback, so a
    hung client cannot hold it past its transaction). SQLite needs none: its write transactions run
    one at a time. Pass the lock's name; an int is taken as a key already made (callers that still
    pass one: goals/services.py, operator_site/lineage.py — to go once they pass their names)."""
    if connection.vendor != "postgresql":
        return
    key = lock_key(name) if isinstance(name, str) else name
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def max_value(model: type[models.Model], field: str) -> Any:
    """`model.objects.aggregate(Max(field))`, without compiling the aggregate on every call."""
    conn = connections[DEFAULT_DB_ALIAS]

    def make(c: Any) -> str:
        quote = c.ops.quote_name
        column = quote(model._meta.get_field(field).column)
        return f"SELECT MAX({column}) FROM {quote(model._meta.db_table)}"  # noqa: S608

    sql = memo(("max_value", model, field), make)
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


class Param(models.Expression):
    """A named parameter of a statement compiled once (`instances`): compiled as a placeholder, bound
    on every call to that call's value, prepared by `output_field` as the ORM prepares it."""

    def __init__(self, name: str, output_field: models.Field) -> None:
        super().__init__(output_field=output_field)
        self.name = name

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        return "%s", [self]


_PARAM_FIELDS: dict[type, Callable[[], models.Field]] = {
    datetime: models.DateTimeField,
    date: models.DateField,
    bool: models.BooleanField,
    int: models.BigIntegerField,
    str: models.TextField,
}


def instances(build: Callable[..., QuerySet[M]], **values: Any) -> list[M]:
    """The model instances of `build(**values)` — a queryset of one model, as the ORM defines it —
    through `QuerySet.raw`, its SQL compiled once per connection: `build` receives a `Param` for each
    value (so the rule stays written once, in the ORM), and each call binds its own values. A plain
    function of its arguments, as in `compiled`. tests/test_sql.py compares it with the ORM."""
    if getattr(build, "__closure__", None) or not hasattr(build, "__code__"):
        raise TypeError(f"{build!r}: a builder is a plain function of its arguments (no closure)")
    conn = connections[DEFAULT_DB_ALIAS]
    types = tuple((name, type(value)) for name, value in values.items())

    def make(c: Any) -> tuple[type[M], str, tuple[Any, ...]]:
        params = {name: Param(name, _PARAM_FIELDS[kind]()) for name, kind in types}
        queryset = build(**params)
        sql, compiled_params = queryset.query.get_compiler(connection=c).as_sql()
        return queryset.model, sql, tuple(compiled_params)

    model, sql, params = memo(("instances", build, types), make)
    bound = [
        p.output_field.get_db_prep_value(values[p.name], conn) if isinstance(p, Param) else p for p in params
    ]
    return list(model.objects.raw(sql, bound))


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


# --- figures in one statement ----------------------------------------------------------------------
def capped_figures(
    counts: Mapping[str, QuerySet[Any]],
    maxima: Mapping[str, QuerySet[Any]],
    *,
    cap: int,
    fixed: Iterable[
        tuple[Callable[..., tuple[Mapping[str, QuerySet[Any]], Mapping[str, QuerySet[Any]]]], tuple]
    ] = (),
) -> dict[str, Any]:
    """Many figures in ONE statement: for each of `counts`, the number of its rows up to `cap + 1`
    (the cost is bounded by the cap, not by the table); for each of `maxima`, the single selected
    value of its first row. Each of `fixed`, (build, args), adds the (counts, maxima) of
    `build(*args)`, compiled once per connection (a plain function of its arguments, as in
    `compiled`)."""
    names: list[str] = []
    parts: list[str] = []
    params: list[Any] = []
    conn = connections[DEFAULT_DB_ALIAS]
    for n, (build, args) in enumerate(fixed):
        if getattr(build, "__closure__", None) or not hasattr(build, "__code__"):
            raise TypeError(f"{build!r}: a builder is a plain function of its arguments (no closure)")
        got = memo(
            ("capped_figures", build, args, cap, n),
            lambda c, build=build, args=args, n=n: _figure_sql(
                *build(*args), cap=cap, prefix=f"f{n}_", conn=c
            ),
        )
        names += got[0]
        parts += got[1]
        params += got[2]
    more = _figure_sql(counts, maxima, cap=cap, prefix="v", conn=conn)
    names += more[0]
    parts += more[1]
    params += more[2]
    if not parts:
        return {}
    with conn.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(parts), params)
        row = cursor.fetchone()
    return dict(zip(names, row, strict=True))


def _figure_sql(
    counts: Mapping[str, QuerySet[Any]],
    maxima: Mapping[str, QuerySet[Any]],
    *,
    cap: int,
    prefix: str,
    conn: Any,
) -> tuple[list[str], list[str], list[Any]]:
    parts: list[str] = []
    params: list[Any] = []
    names: list[str] = []
    for i, (name, queryset) in enumerate(counts.items()):
        # An explicit order is kept (it can steer the database to a partial index); the model's
        # default order is dropped (it would only cost a sort).
        ordered = queryset if queryset.query.order_by else queryset.order_by()
        sql, sub_params = ordered.values("pk")[: cap + 1].query.get_compiler(connection=conn).as_sql()
        # `sql` is the ORM's own compilation of the queryset; every value stays a parameter.
        parts.append(f"(SELECT COUNT(*) FROM ({sql}) AS capped_{prefix}{i})")  # noqa: S608
        params.extend(sub_params)
        names.append(name)
    for name, queryset in maxima.items():
        sql, sub_params = queryset[:1].query.get_compiler(connection=conn).as_sql()
        parts.append(f"({sql})")
        params.extend(sub_params)
        names.append(name)
    return names, parts, params


# --- snapshots ---------------------------------------------------------------------------------------
@contextmanager
def read_snapshot() -> Iterator[None]:
    """One snapshot for a read of several queries, so its counts and lists agree under concurrent
    writes. On PostgreSQL: one read-only REPEATABLE READ transaction — psycopg opens it with a single
    `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY` (its public `isolation_level` and `read_only`
    attributes), so the price is that statement and the COMMIT. On SQLite a transaction already is
    one snapshot. Inside a caller's transaction there is nothing to open (its isolation is the
    caller's)."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        with transaction.atomic():
            yield
        return
    connection.ensure_connection()
    raw = connection.connection
    saved = (raw.isolation_level, raw.read_only)
    raw.isolation_level, raw.read_only = psycopg.IsolationLevel.REPEATABLE_READ, True
    try:
        with transaction.atomic():
            yield
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


# --- many lists in one statement -------------------------------------------------------------------
@dataclass(frozen=True)
class Rows:
    """One list of a batched read (`read_many`): the model instances of `build(*args)`, a queryset
    of one model with, optionally, one level of `select_related` and annotations. `fixed`: the SQL
    depends on nothing but `build` and `args`, so it is compiled once per connection (a builder is
    a plain function of its arguments, as in `compiled`); otherwise it is compiled on every call."""

    build: Callable[..., QuerySet[Any]]
    args: tuple[Any, ...] = ()
    fixed: bool = True


@dataclass(frozen=True)
class _ListPlan:
    model: type[models.Model]
    sql: str  # a scalar subquery answering the rows as one JSON array (of arrays)
    params: tuple[Any, ...]
    attnames: tuple[str, ...]
    # (relation name, related model, its attnames) for each select_related relation
    related: tuple[tuple[str, type[models.Model], tuple[str, ...]], ...]
    annotations: tuple[str, ...]
    convert: tuple[Callable[[Any], Any] | None, ...]
    # Whether the list's parameters are exactly those of the plain queryset (true when every added
    # column is a plain reference): then a later call whose plain SQL is the same reuses this plan
    # with that call's parameters, and only the plain queryset is compiled.
    same_params: bool = False


def _to_datetime_pg(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _to_datetime_sqlite(value: str) -> datetime:
    # SQLite keeps UTC datetimes as text without an offset (Django's own converter makes them aware).
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def _json_converter(field: models.Field, vendor: str) -> Callable[[Any], Any] | None:
    """How a value of `field` that came through the database's JSON is made what the ORM gives."""
    kind = field.get_internal_type()
    if kind == "DateTimeField":
        return _to_datetime_pg if vendor == "postgresql" else _to_datetime_sqlite
    if kind == "DateField":
        return date.fromisoformat
    if kind == "BooleanField":
        return bool
    if kind == "FloatField":
        return float  # 1.0 comes through JSON as 1
    if kind in {"DecimalField", "DurationField", "UUIDField", "TimeField", "BinaryField"}:
        raise TypeError(f"read_many does not carry {kind} through JSON yet ({field})")
    return None


def _list_plan(conn: Any, queryset: QuerySet[Any]) -> _ListPlan:
    model = queryset.model
    query = queryset.query
    paths = [f.attname for f in model._meta.concrete_fields]
    related = []
    chosen = query.select_related
    for name, deeper in chosen.items() if isinstance(chosen, dict) else ():
        if deeper:
            raise ValueError(f"read_many follows one level of select_related, not {name}__{list(deeper)}")
        target = model._meta.get_field(name).related_model
        names = tuple(f.attname for f in target._meta.concrete_fields)
        related.append((name, target, names))
        paths += [f"{name}__{attname}" for attname in names]
    annotations = tuple(query.annotations)
    paths += list(annotations)
    aliases = [f"c{i}" for i in range(len(paths))]
    values = queryset.values(**{alias: models.F(path) for alias, path in zip(aliases, paths, strict=True)})
    fields = [values.query.annotations[alias].output_field for alias in aliases]
    sql, params = values.query.get_compiler(connection=conn).as_sql()
    _, plain_params = queryset.query.get_compiler(connection=conn).as_sql()
    if conn.vendor == "postgresql":
        cells = ", ".join(f"s.{alias}" for alias in aliases)
        if len(aliases) > 100:  # json_build_array takes at most 100 arguments
            raise ValueError(f"{model.__name__}: too many columns for one JSON array")
        wrapped = f"(SELECT COALESCE(json_agg(json_build_array({cells})), '[]')::text FROM ({sql}) s)"  # noqa: S608
    else:
        # SQLite keeps JSON as text: json() embeds it as JSON instead of as a string.
        cells = ", ".join(
            f"json(s.{alias})" if field.get_internal_type() == "JSONField" else f"s.{alias}"
            for alias, field in zip(aliases, fields, strict=True)
        )
        wrapped = f"(SELECT json_group_array(json_array({cells})) FROM ({sql}) s)"  # noqa: S608
    return _ListPlan(
        model=model,
        sql=wrapped,
        params=tuple(params),
        attnames=tuple(f.attname for f in model._meta.concrete_fields),
        related=tuple(related),
        annotations=annotations,
        convert=tuple(_json_converter(field, conn.vendor) for field in fields),
        same_params=tuple(plain_params) == tuple(params),
    )


def _list_plan_of(conn: Any, rows: Rows) -> _ListPlan:
    if not rows.fixed:
        # Only the plain queryset is compiled per call (selecting every column by name costs several
        # times more); its SQL text picks the plan, so a different shape (another number of ids)
        # gets its own.
        queryset = rows.build(*rows.args)
        plain_sql, plain_params = queryset.query.get_compiler(connection=conn).as_sql()
        plan = memo(("read_many", "shape", plain_sql), lambda c: _list_plan(c, queryset))
        if not plan.same_params:
            return _list_plan(conn, queryset)
        return dataclasses.replace(plan, params=tuple(plain_params))
    if getattr(rows.build, "__closure__", None) or not hasattr(rows.build, "__code__"):
        raise TypeError(f"{rows.build!r}: a builder is a plain function of its arguments (no closure)")
    return memo(("read_many", rows.build, rows.args), lambda c: _list_plan(c, rows.build(*rows.args)))


def _instances(conn: Any, plan: _ListPlan, text: str) -> list[Any]:
    out = []
    width = len(plan.attnames)
    for raw in orjson.loads(text):
        row = [
            value if convert is None or value is None else convert(value)
            for value, convert in zip(raw, plan.convert, strict=True)
        ]
        obj = plan.model.from_db(conn.alias, plan.attnames, row[:width])
        at = width
        for name, target, names in plan.related:
            part = row[at : at + len(names)]
            at += len(names)
            # A relation that is null comes back as a row of nulls.
            if part[0] is not None:
                setattr(obj, name, target.from_db(conn.alias, names, part))
        for name in plan.annotations:
            setattr(obj, name, row[at])
            at += 1
        out.append(obj)
    return out


def read_many(
    lists: Mapping[str, Rows],
    *,
    counts: Mapping[str, QuerySet[Any]] | None = None,
    maxima: Mapping[str, QuerySet[Any]] | None = None,
    fixed_figures: Iterable[tuple[Callable[..., Any], tuple[Any, ...]]] = (),
    cap: int = 1000,
) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """Several lists of model instances and several capped figures (`capped_figures`) in ONE
    statement: each list is a scalar subquery that the database turns into one JSON array
    (PostgreSQL `json_agg(json_build_array(…))`, SQLite `json_group_array(json_array(…))`), read
    back into the instances the ORM would have built (`Model.from_db`, the related rows of
    `select_related` attached through their descriptors, annotations as attributes).
    tests/test_sql.py compares every list with the ORM's on both databases."""
    conn = connections[DEFAULT_DB_ALIAS]
    plans = {name: _list_plan_of(conn, rows) for name, rows in lists.items()}
    names: list[str] = []
    parts: list[str] = []
    params: list[Any] = []
    for plan in plans.values():
        parts.append(plan.sql)
        params.extend(plan.params)
    for n, (build, args) in enumerate(fixed_figures):
        if getattr(build, "__closure__", None) or not hasattr(build, "__code__"):
            raise TypeError(f"{build!r}: a builder is a plain function of its arguments (no closure)")
        got = memo(
            ("capped_figures", build, args, cap, n),
            lambda c, build=build, args=args, n=n: _figure_sql(
                *build(*args), cap=cap, prefix=f"f{n}_", conn=c
            ),
        )
        names += got[0]
        parts += got[1]
        params += got[2]
    more = _figure_sql(counts or {}, maxima or {}, cap=cap, prefix="v", conn=conn)
    names += more[0]
    parts += more[1]
    params += more[2]
    with conn.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(parts), params)
        row = cursor.fetchone()
    found = {
        name: _instances(conn, plan, text) for (name, plan), text in zip(plans.items(), row, strict=False)
    }
    figures = dict(zip(names, row[len(plans) :], strict=True))
    return found, figures
