"""Many lists (and their counts) from one snapshot, in one statement on PostgreSQL: the orientation
packet's reads."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import orjson
import psycopg
from django.db import DEFAULT_DB_ALIAS, connections, models, transaction
from django.db.models import QuerySet

from operator_site.sql.compiled import Param, check_builder, memo, param
from operator_site.sql.figures import Part, figure_parts, named_figures
from operator_site.sql.literals import word_literal
from operator_site.sql.loading import attacher, loader
from operator_site.sql.rows import wrapped_cursor


# --- many lists in one statement -------------------------------------------------------------------
@dataclass(frozen=True)
class Rows:
    """One list of a batched read (`read_many`): the model instances of `build(*args, **values)`, a
    queryset of one model with, optionally, one level of `select_related` and annotations.

    Its SQL is compiled once per connection (a builder is a plain function of its arguments, as in
    `compiled`): `args` are part of the key (they may shape the SQL: limits, code constants, a date
    that changes once a day); each of `values` reaches the builder as a placeholder (`Param`; a
    tuple as a tuple of them, its length part of the key) that every call binds to its own value,
    as `instances` does — for what changes on every call (now, the ids of the tasks shown)."""

    build: Callable[..., QuerySet[Any]]
    args: tuple[Any, ...] = ()
    values: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class _ListPlan:
    model: type[models.Model]
    sql: str  # a scalar subquery answering the rows as one JSON array (of arrays)
    # The compiled parameters: constants, and a `Param` where a call binds one of its values.
    params: tuple[Any, ...]
    # The positions of the `Param`s in `params`, with the name of the value each binds.
    bound: tuple[tuple[int, str, models.Field], ...]
    # The attnames of the model's fields read (every concrete field, or those `.only()` names),
    # in the model's order: the first cells of a row.
    attnames: tuple[str, ...]
    # (relation name, related model, the attnames of its fields read, the position of its primary
    # key among them) for each select_related relation
    related: tuple[tuple[str, type[models.Model], tuple[str, ...], int], ...]
    annotations: tuple[str, ...]
    # (cell, converter) for each cell that the database's JSON does not carry as the ORM gives it
    convert: tuple[tuple[int, Callable[[Any], Any]], ...]


def _to_datetime_pg(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _to_datetime_sqlite(value: str) -> datetime:
    # SQLite keeps UTC datetimes as text without an offset (Django's own converter makes them aware
    # in UTC). Read with the offset appended: six times cheaper than `.replace(tzinfo=UTC)`.
    try:
        return datetime.fromisoformat(value + "+00:00")
    except ValueError:  # a text that holds an offset of its own keeps it, as Django's converter does
        parsed = datetime.fromisoformat(value)
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


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


def _read_fields(model: type[models.Model], mask: Mapping[Any, Any]) -> tuple[str, ...]:
    """The attnames of `model`'s fields a query reads under a select mask (empty: every field), in
    the model's order — the columns the ORM's compiler selects (`get_default_columns`)."""
    return tuple(f.attname for f in model._meta.concrete_fields if not mask or f in mask)


def _list_plan(conn: Any, queryset: QuerySet[Any]) -> _ListPlan:
    model = queryset.model
    query = queryset.query
    # What `.only()` / `.defer()` leave to read, as the ORM's compiler reads it: {field: the mask
    # of its related model's fields}, empty for every field. `Query.get_select_mask` is not
    # documented; tests/test_sql.py compares lists read with `.only()` with the ORM's instances
    # (which fields are loaded, which deferred), so a Django that changes it fails there.
    mask = query.get_select_mask()
    attnames = _read_fields(model, mask)
    paths = list(attnames)
    related = []
    chosen = query.select_related
    for name, deeper in chosen.items() if isinstance(chosen, dict) else ():
        if deeper:
            raise ValueError(f"read_many follows one level of select_related, not {name}__{list(deeper)}")
        field = model._meta.get_field(name)
        if mask and field not in mask:
            raise ValueError(f"{model.__name__}.{name} cannot be both deferred and followed (select_related)")
        target = field.related_model
        names = _read_fields(target, mask.get(field, {}) if mask else {})
        pk_at = names.index(target._meta.pk.attname)
        related.append((name, target, names, pk_at))
        paths += [f"{name}__{attname}" for attname in names]
    annotations = tuple(query.annotations)
    paths += list(annotations)
    aliases = [f"c{i}" for i in range(len(paths))]
    values = queryset.values(**{alias: models.F(path) for alias, path in zip(aliases, paths, strict=True)})
    fields = [values.query.annotations[alias].output_field for alias in aliases]
    sql, params = values.query.get_compiler(connection=conn).as_sql()
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
    converters = [_json_converter(field, conn.vendor) for field in fields]
    return _ListPlan(
        model=model,
        sql=wrapped,
        params=tuple(params),
        bound=tuple((i, p.name, p.output_field) for i, p in enumerate(params) if isinstance(p, Param)),
        attnames=attnames,
        related=tuple(related),
        annotations=annotations,
        convert=tuple((i, c) for i, c in enumerate(converters) if c is not None),
    )


def _shape(name: str, value: Any) -> tuple[Any, ...]:
    """What of a value shapes the SQL: its type (a tuple: its length and its items' type)."""
    if type(value) is tuple:
        kinds = {type(v) for v in value} - {type(None)}
        if len(kinds) != 1:
            raise TypeError(f"{name}: a tuple of values of one type (and None), not {kinds or 'nothing'}")
        return (name, tuple, len(value), kinds.pop())
    if value is None:
        raise TypeError(f"{name}: None has no type to bind it as")
    return (name, type(value))


def _placeholders(shape: tuple[tuple[Any, ...], ...]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, kind, *more in shape:
        if kind is tuple:
            length, item = more
            params[name] = tuple(param(f"{name}[{i}]", item) for i in range(length))
        else:
            params[name] = param(name, kind)
    return params


def _list_plan_of(conn: Any, rows: Rows) -> tuple[_ListPlan, tuple[Any, ...] | list[Any]]:
    """The list's plan (compiled once per connection and shape) and this call's parameters."""
    check_builder(rows.build)
    if not rows.values:
        plan = memo(
            ("read_many", rows.build, rows.args), lambda c: _list_plan(c, rows.build(*rows.args)), conn
        )
        return plan, plan.params
    shape = tuple(_shape(name, value) for name, value in rows.values.items())
    plan = memo(
        ("read_many", rows.build, rows.args, shape),
        lambda c: _list_plan(c, rows.build(*rows.args, **_placeholders(shape))),
        conn,
    )
    values: dict[str, Any] = {}
    for name, value in rows.values.items():
        if type(value) is tuple:
            values.update((f"{name}[{i}]", v) for i, v in enumerate(value))
        else:
            values[name] = value
    params = list(plan.params)
    for i, name, field in plan.bound:
        # As the ORM prepares a value it compares with a field of this type.
        params[i] = field.get_db_prep_value(values[name], conn)
    return plan, params


def _instances(conn: Any, plan: _ListPlan, text: str) -> list[Any]:
    try:
        rows = orjson.loads(text)
    except orjson.JSONDecodeError:
        # A number past a double's range (1e999: SQLite's JSON_VALID takes it; the door never does,
        # so only a damaged database holds one). Python's reader makes it infinity, which every
        # answer's JSON writes as null: one bad value, not a packet that cannot be read.
        rows = json.loads(text)
    if not rows:
        return rows
    alias = conn.alias
    convert, width = plan.convert, len(plan.attnames)
    build = loader(plan.model, plan.attnames)
    related = [
        (attacher(plan.model, name), loader(target, names), len(names), pk_at)
        for name, target, names, pk_at in plan.related
    ]
    annotations = plan.annotations
    out = []
    for row in rows:
        for i, to_python in convert:
            value = row[i]
            if value is not None:
                row[i] = to_python(value)
        obj = build(alias, row[:width])
        at = width
        for attach, make, count, pk_at in related:
            # A relation that is null comes back as a row of nulls (the ORM caches None for it).
            attach(obj, None if row[at + pk_at] is None else make(alias, row[at : at + count]))
            at += count
        for name in annotations:
            setattr(obj, name, row[at])
            at += 1
        out.append(obj)
    return out


_PLACEHOLDER = re.compile(r"%s")
_NAMED = re.compile(r"%\(p\d+\)s")


def _literal(value: Any) -> str | None:
    """The SQL literal of a parameter that is a constant of the code — a member of a
    `models.Choices` enumeration whose value is a plain word or an integer — or None."""
    if isinstance(value, models.Choices):
        plain = value.value
        if type(plain) is str:
            return word_literal(plain)
        if type(plain) is int:
            return str(plain)
    return None


def _statement(
    sql: str, constants: tuple[tuple[int, Any], ...], *, style: str
) -> tuple[str, tuple[int, ...], tuple[str, ...], int] | None:
    """`sql` with the parameters at the positions of `constants` written in as literals and the
    others kept as placeholders in `style`: "named" (`%(p0)s`, `%(p1)s`, …), "native" (PostgreSQL's
    own `$1`, `$2`, …, for `psycopg.RawCursor`) or "format" (`%s`); with the positions of those
    others, their names and the number of placeholders read. None when the text holds any "%"
    but its placeholders (an escaped "%%": it is then sent as it is)."""
    if "%%" in sql:
        return None
    literals = {i: _literal(value) for i, value in constants}
    kept: list[int] = []
    names: list[str] = []
    at = 0

    def placeholder(_: re.Match[str]) -> str:
        nonlocal at
        i, at = at, at + 1
        if literals.get(i) is not None:
            return literals[i]
        kept.append(i)
        names.append(f"p{len(names)}")
        if style == "named":
            return f"%({names[-1]})s"
        return f"${len(names)}" if style == "native" else "%s"

    text = _PLACEHOLDER.sub(placeholder, sql)
    if "%" in (_NAMED.sub("", text) if style == "named" else text.replace("%s", "")):
        return None
    return text, tuple(kept), tuple(names), at


class _PreparedAtOnce(psycopg.RawCursor):
    """psycopg's `RawCursor` whose statements are prepared the first time they run on a connection
    (`execute(..., prepare=True)`, psycopg's public switch), not the third as the connection's
    `prepare_threshold` says. For the packet's one statement (~20 KB): psycopg deallocates every
    prepared statement of a connection after any rollback (a refused write, a rolled-back
    savepoint), and each of the two runs before the third parsed and planned it anew (~4.7 ms more
    a packet over the 1,000-row history; docs/performance.md, "After a rollback")."""

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: Any = None
    ) -> Any:
        return super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)


def _select(conn: Any, statements: list[list[Part]]) -> list[Any]:
    """The value of every scalar subquery, each inner list read as one `SELECT (a), (b), …`, all
    from one snapshot (one transaction; a caller's own when there is one), flattened in order;
    each statement prepared once per connection and shape:

    - Constants of the code (members of a `Choices` enumeration: a status, a kind) are written
      into the text, as `InConstants` does for the open board. A planner that sees a bound value
      where a partial index's condition is can use that index only by planning for the value:
      SQLite prepares such a statement again each time the value is bound (any `status = ?` on a
      table with a partial index on its status, `intent_executing_lease`, `run_single_running`:
      ~0.2 ms for each of three lists and up to ~0.75 ms for the figures, on every packet), and
      PostgreSQL's generic plan of the prepared statement cannot use it at all (the one running
      run would be looked for without `run_single_running`).
    - On SQLite the other placeholders are named and bound from a dictionary — the "%(name)s" style
      Django's cursors take on every database — which Django's SQLite cursor converts with
      Python's "%" formatting; "%s" placeholders it converts with a regular expression over the
      whole text on every call (about 30 µs per KB: 0.7 ms of the packet's ~22 KB).

    - On PostgreSQL the statement is sent with PostgreSQL's own placeholders (`$1`, `$2`, …)
      through psycopg's `RawCursor` (prepared at its first run: `_PreparedAtOnce`), which sends
      the text as it is: psycopg finds the "%s" placeholders of a text longer than 4 KB (the
      packet's is ~20 KB) again on every call, and that search was 0.14 ms of client CPU per
      packet (0.26 -> 0.12 ms for the statement, docs/performance.md). The server receives the
      same text either way (psycopg writes "%s" as `$1`, `$2`, … in order), so when Django logs
      queries (DEBUG, a test counting them, whose log reads "%s" placeholders) the "%s" text goes
      through Django's cursor as before.

    Every value that is not such a constant stays a bound parameter."""
    style = {"sqlite": "named", "postgresql": "native"}.get(conn.vendor, "format")
    if style == "native" and conn.queries_logged:
        style = "format"
    values: list[Any] = []
    with transaction.atomic(using=conn.alias, savepoint=False), ExitStack() as cursors:
        plain = None  # Django's cursor, opened once for the statements that go through it
        for parts in statements:
            if not parts:
                continue
            params = [p for _, ps in parts for p in ps]
            texts = tuple(sql for sql, _ in parts)
            constants = tuple((i, p) for i, p in enumerate(params) if isinstance(p, models.Choices))
            prepared = memo(
                ("read_many", "statement", texts, constants, style),
                lambda c, texts=texts, constants=constants: _statement(
                    "SELECT " + ", ".join(texts), constants, style=style
                ),
                conn,
            )
            if prepared is None or prepared[3] != len(params):
                text, bound, native = "SELECT " + ", ".join(texts), params, False
            elif style == "named":
                text, kept, names, _ = prepared
                bound = {name: params[i] for name, i in zip(names, kept, strict=True)}
                native = False
            else:
                text, kept, _, _ = prepared
                bound, native = [params[i] for i in kept], style == "native"
            if native:
                cursor = cursors.enter_context(wrapped_cursor(conn, _PreparedAtOnce))
            else:
                cursor = plain = plain or cursors.enter_context(conn.cursor())
            cursor.execute(text, bound)
            values += cursor.fetchone()
    return values


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
    SQLite `json_group_array(json_array(…))`), read back into the instances the ORM would have
    built (`Model.from_db`'s, through `loading.loader`; the related rows of `select_related`
    attached as the ORM attaches them, `loading.attacher`; annotations as attributes). Every
    list's SQL is compiled once per connection (`Rows`). tests/test_sql.py compares every list
    with the ORM's on both databases."""
    conn = connections[DEFAULT_DB_ALIAS]
    plans = {name: _list_plan_of(conn, rows) for name, rows in lists.items()}
    names, figure_sql = figure_parts(counts or {}, maxima or {}, cap=cap, fixed=fixed_figures, conn=conn)
    list_sql = [(plan.sql, params) for plan, params in plans.values()]
    if conn.vendor == "postgresql":
        row = _select(conn, [list_sql + figure_sql])  # one round trip
    else:
        # SQLite has no round trips to save, and its time for one SELECT grows faster than the
        # number of JSON-building subqueries in it: the packet's 14 lists take ~1.5 ms together
        # and ~0.3 ms one by one on an empty operator (docs/performance.md). A list each, then the
        # figures (plain counts) together.
        row = _select(conn, [[part] for part in list_sql] + [figure_sql])
    found = {
        name: _instances(conn, plan, text)
        for (name, (plan, _)), text in zip(plans.items(), row, strict=False)
    }
    figures = named_figures(names, row[len(plans) :])
    return found, figures
