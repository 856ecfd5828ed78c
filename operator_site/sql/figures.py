"""Many capped counts in one statement, and the scalar subqueries of a batched read."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import QuerySet

from operator_site.sql.compiled import memo


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
    conn = connections[DEFAULT_DB_ALIAS]
    names, parts = figure_parts(counts, maxima, cap=cap, fixed=fixed, conn=conn)
    if not parts:
        return {}
    with conn.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(sql for sql, _ in parts), [p for _, ps in parts for p in ps])
        return dict(zip(names, cursor.fetchone(), strict=True))


# A scalar subquery and its parameters.
Part = tuple[str, tuple[Any, ...]]


def select_scalars(conn: Any, statements: list[list[Part]]) -> list[Any]:
    """The value of every scalar subquery, each inner list read as one `SELECT (a), (b), …`, all
    from one snapshot (one transaction; a caller's own when there is one). Returns the values in
    order, flattened."""
    values: list[Any] = []
    with transaction.atomic(using=conn.alias, savepoint=False), conn.cursor() as cursor:
        for parts in statements:
            if parts:
                params = [p for _, ps in parts for p in ps]
                cursor.execute("SELECT " + ", ".join(sql for sql, _ in parts), params)
                values += cursor.fetchone()
    return values


def figure_parts(
    counts: Mapping[str, QuerySet[Any]],
    maxima: Mapping[str, QuerySet[Any]],
    *,
    cap: int,
    fixed: Iterable[tuple[Callable[..., Any], tuple[Any, ...]]],
    conn: Any,
) -> tuple[list[str], list[Part]]:
    """The names and scalar subqueries (with their parameters) of `capped_figures` (also
    `read_many`'s): the fixed builders' parts compiled once per connection, then those of `counts`
    and `maxima`."""
    names: list[str] = []
    parts: list[Part] = []
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
    more = _figure_sql(counts, maxima, cap=cap, prefix="v", conn=conn)
    return names + more[0], parts + more[1]


def _figure_sql(
    counts: Mapping[str, QuerySet[Any]],
    maxima: Mapping[str, QuerySet[Any]],
    *,
    cap: int,
    prefix: str,
    conn: Any,
) -> tuple[list[str], list[Part]]:
    parts: list[Part] = []
    names: list[str] = []
    for i, (name, queryset) in enumerate(counts.items()):
        # An explicit order is kept (it can steer the database to a partial index); the model's
        # default order is dropped (it would only cost a sort).
        ordered = queryset if queryset.query.order_by else queryset.order_by()
        sql, sub_params = ordered.values("pk")[: cap + 1].query.get_compiler(connection=conn).as_sql()
        # `sql` is the ORM's own compilation of the queryset; every value stays a parameter.
        parts.append((f"(SELECT COUNT(*) FROM ({sql}) AS capped_{prefix}{i})", tuple(sub_params)))  # noqa: S608
        names.append(name)
    for name, queryset in maxima.items():
        sql, sub_params = queryset[:1].query.get_compiler(connection=conn).as_sql()
        parts.append((f"({sql})", tuple(sub_params)))
        names.append(name)
    return names, parts
