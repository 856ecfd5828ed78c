"""Many lists (and their counts) from one snapshot, in one statement on PostgreSQL: the orientation
packet's reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import orjson
from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.models import QuerySet

from operator_site.sql.compiled import memo
from operator_site.sql.figures import figure_parts, select_scalars


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
    """Several lists of model instances and several capped figures (`capped_figures`) from one
    snapshot (ONE statement on PostgreSQL, one per list on SQLite): each list is a scalar subquery
    that the database turns into one JSON array (PostgreSQL `json_agg(json_build_array(…))`,
    SQLite `json_group_array(json_array(…))`), read
    back into the instances the ORM would have built (`Model.from_db`, the related rows of
    `select_related` attached through their descriptors, annotations as attributes).
    tests/test_sql.py compares every list with the ORM's on both databases."""
    conn = connections[DEFAULT_DB_ALIAS]
    plans = {name: _list_plan_of(conn, rows) for name, rows in lists.items()}
    names, figure_sql = figure_parts(counts or {}, maxima or {}, cap=cap, fixed=fixed_figures, conn=conn)
    list_sql = [(plan.sql, plan.params) for plan in plans.values()]
    if conn.vendor == "postgresql":
        statements = [list_sql + figure_sql]  # one round trip
    else:
        # SQLite has no round trips to save, and its time for one SELECT grows faster than the
        # number of JSON-building subqueries in it: the packet's 14 lists take ~1.5 ms together
        # and ~0.3 ms one by one on an empty operator (docs/performance.md). A list each, then the
        # figures (plain counts) together.
        statements = [[part] for part in list_sql] + [figure_sql]
    row = select_scalars(conn, statements)
    found = {
        name: _instances(conn, plan, text) for (name, plan), text in zip(plans.items(), row, strict=False)
    }
    figures = dict(zip(names, row[len(plans) :], strict=True))
    return found, figures
