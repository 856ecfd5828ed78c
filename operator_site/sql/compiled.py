"""Statements compiled once per connection from an ORM builder, keyed by the builder and its arguments."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from datetime import date, datetime
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.models import QuerySet

T = TypeVar("T")


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


# --- compiled once per connection ------------------------------------------------------------------
# Per connection (a thread never shares another's), at most this many compiled statements are kept.
_MEMO_SIZE = 256


def memo(key: Hashable, make: Callable[[Any], T], conn: Any = None) -> T:
    """`make(connection)`, computed once per connection and `key` (a bounded, per-connection cache:
    what is kept refers to that connection's vendor). A caller that holds the connection passes it
    (`conn`): looking it up (`connections[alias]`, an asgiref `Local` read) costs ~1.3 µs on the
    event loop, and the packet asks the memo for some twenty statements and plans per call."""
    if conn is None:
        conn = connections[DEFAULT_DB_ALIAS]
    cache: OrderedDict[Hashable, Any] = conn.__dict__.setdefault("operator_memo", OrderedDict())
    try:
        return cache[key]
    except KeyError:
        value = cache[key] = make(conn)
        while len(cache) > _MEMO_SIZE:
            cache.popitem(last=False)
        return value


def compiled(
    build: Callable[..., QuerySet[Any]], *args: Hashable, **values: Any
) -> tuple[str, tuple[Any, ...]]:
    """The SQL and parameters of `build(*args, **values)`, compiled by the ORM once per connection.

    The key is the builder, its arguments and the types of `values`, nothing written by hand: `build`
    must be a plain function of its arguments (no closure, no partial), so the SQL cannot depend on
    anything the key does not hold. Only constants of the code and `args` may shape the queryset;
    each of `values` reaches the builder as a `Param` (left in the parameters for `bind`)."""
    check_builder(build)
    types = params_for(values)

    def make(conn: Any) -> tuple[str, tuple[Any, ...]]:
        queryset = build(*args, **as_params(types))
        sql, params = queryset.query.get_compiler(connection=conn).as_sql()
        return sql, tuple(params)

    return memo(("compiled", build, args, types), make)


def check_builder(build: Callable[..., Any]) -> None:
    """A builder is a plain function of its arguments (no closure, no partial): the statement
    compiled from it may then be kept under the builder and its arguments' key."""
    if getattr(build, "__closure__", None) or not hasattr(build, "__code__"):
        raise TypeError(f"{build!r}: a builder is a plain function of its arguments (no closure)")


def params_for(values: dict[str, Any]) -> tuple[tuple[str, type], ...]:
    """The (name, type) of each value a statement binds on every call: with the builder, the key of
    its compiled text (a `Param` prepares its value as the field of that type does)."""
    types = tuple((name, type(value)) for name, value in values.items())
    for name, kind in types:
        if kind not in _PARAM_FIELDS:
            raise TypeError(f"{name}: a bound value is one of {sorted(t.__name__ for t in _PARAM_FIELDS)}")
    return types


def param(name: str, kind: type) -> Param:
    """The placeholder of a value of type `kind` (one of `params_for`'s types)."""
    return Param(name, _PARAM_FIELDS[kind]())


def as_params(types: tuple[tuple[str, type], ...]) -> dict[str, Param]:
    """A builder's keyword arguments: a `Param` for each (name, type) of `params_for`."""
    return {name: param(name, kind) for name, kind in types}


def bind(params: tuple[Any, ...], values: dict[str, Any], conn: Any) -> list[Any]:
    """The compiled parameters with each `Param` replaced by this call's value, prepared by its field."""
    return [
        p.output_field.get_db_prep_value(values[p.name], conn) if isinstance(p, Param) else p for p in params
    ]


def tuples(build: Callable[..., QuerySet[Any]], *args: Hashable, **values: Any) -> list[tuple[Any, ...]]:
    """The rows of `build(*args, **values)` — a `values_list` of plain integer and text columns,
    which need no converter — as tuples, compiled once per connection: `args` shape the statement
    (they are part of its key, as in `compiled`); each of `values` reaches the builder as a `Param`
    and is bound on every call (a time, an id: a new value compiles nothing)."""
    conn = connections[DEFAULT_DB_ALIAS]
    sql, params = compiled(build, *args, **values)
    with conn.cursor() as cursor:
        cursor.execute(sql, bind(params, values, conn))
        return [tuple(row) for row in cursor.fetchall()]
