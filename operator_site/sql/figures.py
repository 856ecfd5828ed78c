"""Many capped counts in one statement, and the scalar subqueries of a batched read."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Case, IntegerField, Q, QuerySet, Value, When

from operator_site.sql.compiled import memo


@dataclass(frozen=True)
class Breakdown:
    """A count of `rows` and of the rows among them that match each of `parts` (name: condition),
    read in one scan of at most cap + 1 of `rows` instead of a capped count each.

    When the scan finds no more than `cap` rows it saw every row, so each part's count is exact.
    When it finds more, a part's count in it would only be a lower bound, so each part is then
    counted on its own, capped as any count is (the database evaluates those subqueries only in
    that case). Either way every figure is what a capped count of its own rows gives. The open
    board's total, its counts by status and by lane: one scan of ~0.14 ms instead of twelve
    subqueries (~0.5 ms) over a 1,000-row history (docs/performance.md)."""

    rows: QuerySet[Any]
    parts: Mapping[str, Q]


# A figure's name, or the names a breakdown answers (its total's first), read from one JSON array.
FigureName = str | tuple[str, ...]


# --- figures in one statement ----------------------------------------------------------------------
def capped_figures(
    counts: Mapping[str, QuerySet[Any] | Breakdown],
    maxima: Mapping[str, QuerySet[Any]],
    *,
    cap: int,
    fixed: Iterable[
        tuple[Callable[..., tuple[Mapping[str, QuerySet[Any]], Mapping[str, QuerySet[Any]]]], tuple]
    ] = (),
) -> dict[str, Any]:
    """Many figures in ONE statement: for each of `counts`, the number of its rows up to `cap + 1`
    (the cost is bounded by the cap, not by the table), or a `Breakdown`'s figures; for each of
    `maxima`, the single selected value of its first row. Each of `fixed`, (build, args), adds
    the (counts, maxima) of `build(*args)`, compiled once per connection (a plain function of its
    arguments, as in `compiled`)."""
    conn = connections[DEFAULT_DB_ALIAS]
    names, parts = figure_parts(counts, maxima, cap=cap, fixed=fixed, conn=conn)
    if not parts:
        return {}
    with conn.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(sql for sql, _ in parts), [p for _, ps in parts for p in ps])
        return named_figures(names, cursor.fetchone())


def named_figures(names: Sequence[FigureName], values: Sequence[Any]) -> dict[str, Any]:
    """The figures by name, from `figure_parts`' names and the values of its subqueries."""
    out: dict[str, Any] = {}
    for name, value in zip(names, values, strict=True):
        if isinstance(name, tuple):
            out.update(zip(name, orjson.loads(value), strict=True))
        else:
            out[name] = value
    return out


# A scalar subquery and its parameters.
Part = tuple[str, tuple[Any, ...]]


def figure_parts(
    counts: Mapping[str, QuerySet[Any] | Breakdown],
    maxima: Mapping[str, QuerySet[Any]],
    *,
    cap: int,
    fixed: Iterable[tuple[Callable[..., Any], tuple[Any, ...]]],
    conn: Any,
) -> tuple[list[FigureName], list[Part]]:
    """The names and scalar subqueries (with their parameters) of `capped_figures` (also
    `read_many`'s): the fixed builders' parts compiled once per connection, then those of `counts`
    and `maxima`. `named_figures` reads their values."""
    names: list[FigureName] = []
    parts: list[Part] = []
    for n, (build, args) in enumerate(fixed):
        if getattr(build, "__closure__", None) or not hasattr(build, "__code__"):
            raise TypeError(f"{build!r}: a builder is a plain function of its arguments (no closure)")
        got = memo(
            ("capped_figures", build, args, cap, n),
            lambda c, build=build, args=args, n=n: _figure_sql(
                *build(*args), cap=cap, prefix=f"f{n}_", conn=c
            ),
            conn,
        )
        names += got[0]
        parts += got[1]
    more = _figure_sql(counts, maxima, cap=cap, prefix="v", conn=conn)
    return names + more[0], parts + more[1]


def _figure_sql(
    counts: Mapping[str, QuerySet[Any] | Breakdown],
    maxima: Mapping[str, QuerySet[Any]],
    *,
    cap: int,
    prefix: str,
    conn: Any,
) -> tuple[list[FigureName], list[Part]]:
    parts: list[Part] = []
    names: list[FigureName] = []
    for i, (name, queryset) in enumerate(counts.items()):
        if isinstance(queryset, Breakdown):
            parts.append(_breakdown_sql(queryset, cap=cap, alias=f"{prefix}{i}", conn=conn))
            names.append((name, *queryset.parts))
            continue
        parts.append(_capped_count(queryset, cap=cap, alias=f"capped_{prefix}{i}", conn=conn))
        names.append(name)
    for name, queryset in maxima.items():
        sql, sub_params = queryset[:1].query.get_compiler(connection=conn).as_sql()
        parts.append((f"({sql})", tuple(sub_params)))
        names.append(name)
    return names, parts


def _ordered(queryset: QuerySet[Any]) -> QuerySet[Any]:
    # An explicit order is kept (it can steer the database to a partial index); the model's
    # default order is dropped (it would only cost a sort).
    return queryset if queryset.query.order_by else queryset.order_by()


def _capped_count(queryset: QuerySet[Any], *, cap: int, alias: str, conn: Any) -> Part:
    sql, sub_params = _ordered(queryset).values("pk")[: cap + 1].query.get_compiler(connection=conn).as_sql()
    # `sql` is the ORM's own compilation of the queryset; every value stays a parameter.
    return f"(SELECT COUNT(*) FROM ({sql}) AS {alias})", tuple(sub_params)  # noqa: S608


def _breakdown_sql(breakdown: Breakdown, *, cap: int, alias: str, conn: Any) -> Part:
    """One scalar subquery answering a `Breakdown` as a JSON array: the total, then each part's
    count. The scan marks each row 1 for each part it matches (NULL otherwise; COUNT counts the
    marks); past the cap, each part's own capped count."""
    quote = conn.ops.quote_name
    marks = {
        f"operator_part_{j}": Case(When(condition, then=Value(1)), output_field=IntegerField())
        for j, condition in enumerate(breakdown.parts.values())
    }
    scan = _ordered(breakdown.rows).annotate(**marks).values(*marks)[: cap + 1]
    scan_sql, scan_params = scan.query.get_compiler(connection=conn).as_sql()
    own = [
        # Unordered: the database picks its index for the part's own condition (a lane's, say).
        _capped_count(
            breakdown.rows.filter(condition).order_by(), cap=cap, alias=f"capped_{alias}_{j}", conn=conn
        )
        for j, condition in enumerate(breakdown.parts.values())
    ]
    array = "json_build_array" if conn.vendor == "postgresql" else "json_array"
    text = "::text" if conn.vendor == "postgresql" else ""
    seen = ", ".join(["COUNT(*)", *(f"COUNT(s.{quote(mark)})" for mark in marks)])
    counted_alone = ", ".join(["COUNT(*)", *(sql for sql, _ in own)])
    # Every identifier comes from the ORM or is written here; every value stays a parameter, in the
    # order of its placeholder in the text: the parts' own counts, then the scan's.
    sql = (
        f"(SELECT CASE WHEN COUNT(*) <= {int(cap)} THEN {array}({seen}){text} "  # noqa: S608
        f"ELSE {array}({counted_alone}){text} END FROM ({scan_sql}) AS s)"
    )
    return sql, (*(p for _, ps in own for p in ps), *scan_params)
