"""Statements compiled once per connection from an ORM builder, keyed by the builder and its arguments."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet

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
