"""Every value range-checked at the door: what a tool call may carry into the operator.

The argument models (pydantic) check types and each field's own bounds. What they do not check —
because it is the same for every field of every tool, and because a value that passes it can still
break a database, a page or a worker later — is checked here, by the dispatcher, before a tool runs:

- **Storable text** (the raw arguments, after the SDK unwrapped JSON sent inside a string): no NUL
  character (PostgreSQL stores none, in text or JSON) and no lone surrogate (not Unicode: no
  UTF-8 encoder writes one), in any string or key, at any depth.
- **Finite numbers**: NaN and ±Infinity are not JSON (RFC 8259 §6); the endpoint refuses them in
  the body (-32700), and here they are refused wherever else they could come from (a number given
  as text, `"NaN"`, or JSON inside a string).
- **Integers** of typed fields within the database's range (a signed 64-bit integer): beyond it
  SQLite cannot bind the value at all and PostgreSQL refuses it — the same call must mean the same
  thing on either database. (Integers inside nested models and JSON values too: a goal change's
  `fields`, an observation's `data`.)
- **Date-times** between 0001-01-02 and 9999-12-30 in UTC (a date-time without an offset is in the
  operator's zone, `OPERATOR_TIME_ZONE`, and must exist there too). With a day to spare at each end,
  every accepted instant can be written in UTC and in ANY time zone, the operator's included, now
  and after `OPERATOR_TIME_ZONE` changes: a stored `due` can never again overflow when a worker or
  a page renders it in local time. **Dates** within the same span.
- **Bounded text**: a typed string field is at most `MAX_TEXT_CHARS` characters even where its
  model declares no bound (the request body is bounded too, but a bound per value keeps rows and
  pages readable). Fields typed `Any` (a claimed `actor`, an observation's `data`) are JSON values
  checked by their own rules; here only storability, finiteness and the integer range apply.

Each problem is reported as `invalid_arguments` naming the field (`action.due`, `changes.0.key`),
like a type error: nothing runs, and the call's audit row is written.
"""

from __future__ import annotations

import functools
import json
import math
import re
import types
import typing
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from pydantic import BaseModel

INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
MAX_TEXT_CHARS = 20_000
# A day inside each end of what a Python datetime can hold: every zone is within ±26 h of UTC, so
# an instant in this span can be written in any of them.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC)
EARLIEST_DATE = EARLIEST.date()
LATEST_DATE = LATEST.date()

_SURROGATE = re.compile("[\ud800-\udfff]")


def unstorable_text(text: str) -> str | None:
    """Why `text` cannot be stored as it is (a NUL, a lone surrogate), or None."""
    if "\x00" in text:
        return "text may not contain NUL (\\u0000) characters"
    if _SURROGATE.search(text):
        return "text may not contain lone surrogates (\\ud800-\\udfff): it is not Unicode"
    return None


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _clean_as_json(value: Any) -> bool:
    """The fast path (C speed) for the common case: `value` written as JSON has no NaN/Infinity, no
    escaped NUL and no lone surrogate. False only means "look closer" (`raw_problem` walks it)."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except (ValueError, UnicodeEncodeError, TypeError, RecursionError):
        return False
    return "\\u0000" not in text


def raw_problem(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first (field, message) in raw JSON arguments that no database could store: NUL or a lone
    surrogate in a string or key, a non-finite number. Iterative (arguments may nest deeply)."""
    if _clean_as_json(value):
        return None
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            why = unstorable_text(item)
            if why:
                return where or "(arguments)", why
        elif isinstance(item, float):
            if not math.isfinite(item):
                return where or "(arguments)", "numbers must be finite (NaN and Infinity are not JSON)"
        elif isinstance(item, dict):
            for key, sub in item.items():
                if isinstance(key, str):
                    why = unstorable_text(key)
                    if why:
                        return where or "(arguments)", f"a key: {why}"
                stack.append((sub, _join(where, key)))
        elif isinstance(item, list | tuple):
            stack.extend((sub, _join(where, i)) for i, sub in enumerate(item))
    return None


def datetime_problem(value: datetime) -> str | None:
    """Why a date-time given to the operator is out of range, or None (see the module docstring)."""
    try:
        aware = (
            value if value.tzinfo is not None else value.replace(tzinfo=ZoneInfo(settings.OPERATOR_TIME_ZONE))
        )
        utc = aware.astimezone(UTC)
        aware.astimezone(ZoneInfo(settings.OPERATOR_TIME_ZONE))
    except (OverflowError, ValueError):
        utc = None
    if utc is None or not EARLIEST <= utc <= LATEST:
        return (
            f"a date-time must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d} (UTC), so that it can "
            f"be written in UTC and in the operator's time zone ({settings.OPERATOR_TIME_ZONE})"
        )
    return None


def date_problem(value: date) -> str | None:
    if not EARLIEST_DATE <= value <= LATEST_DATE:
        return f"a date must lie between {EARLIEST_DATE:%Y-%m-%d} and {LATEST_DATE:%Y-%m-%d}"
    return None


def _is_any(annotation: Any) -> bool:
    if annotation is Any:
        return True
    return any(_is_any(arg) for arg in typing.get_args(annotation))


def _bounded(kind: Any, metadata: list[Any]) -> bool:
    """Whether a field of this type and these constraints is already within the door's range by its
    model's own validation (so the walk can skip it)."""
    if kind is bool or typing.get_origin(kind) is typing.Literal:
        return True
    limits = {type(m).__name__: m for m in metadata}
    if kind is str:
        bound = getattr(limits.get("MaxLen"), "max_length", None)
        return bound is not None and bound <= MAX_TEXT_CHARS
    if kind is int:
        low = getattr(limits.get("Ge") or limits.get("Gt"), "ge", None)
        low = low if low is not None else getattr(limits.get("Gt"), "gt", None)
        high = getattr(limits.get("Le") or limits.get("Lt"), "le", None)
        high = high if high is not None else getattr(limits.get("Lt"), "lt", None)
        return low is not None and high is not None and INT_MIN <= low and high <= INT_MAX
    if kind is float:  # NaN and ±Infinity fail any bound pydantic checks
        return any(name in limits for name in ("Ge", "Gt", "Le", "Lt"))
    return False


@functools.cache
def _fields_of(model: type[BaseModel]) -> tuple[tuple[str, str, bool], ...]:
    """(attribute, name in the arguments, typed Any?) of the fields of a model the walk must look at,
    worked out once per model: a field its own constraints already keep in range is left out."""
    out = []
    for name, info in model.model_fields.items():
        kind = info.annotation
        options = [a for a in typing.get_args(kind) if a is not type(None)]
        if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(options) == 1:
            kind = options[0]  # Optional[X]: None is always in range
        if _bounded(kind, info.metadata):
            continue
        out.append((name, info.alias or name, _is_any(info.annotation)))
    return tuple(out)


def range_problems(model: BaseModel, path: str = "") -> list[tuple[str, str]]:
    """Every (field, message) of a validated argument model whose value is out of the door's range.

    Iterative (an `Any` value may nest deeply); a path is joined once per container, not per value
    (this runs on every call)."""
    problems: list[tuple[str, str]] = []
    # (value, the path of its container, its key there, typed Any?)
    stack: list[tuple[Any, str, Any, bool]] = [
        (getattr(model, name), path, alias, untyped) for name, alias, untyped in _fields_of(type(model))
    ]
    while stack:
        value, where, key, untyped = stack.pop()
        kind = type(value)
        if kind is str:
            if not untyped and len(value) > MAX_TEXT_CHARS:
                problems.append((_join(where, key), f"text is limited to {MAX_TEXT_CHARS} characters"))
        elif kind is int:
            if not INT_MIN <= value <= INT_MAX:
                problems.append((_join(where, key), f"an integer must lie between {INT_MIN} and {INT_MAX}"))
        elif value is None or kind is bool:
            continue
        elif kind is float:
            if not math.isfinite(value):
                problems.append((_join(where, key), "numbers must be finite (NaN and Infinity are not JSON)"))
        elif kind is dict:
            inner = _join(where, key)
            stack.extend((v, inner, k, untyped) for k, v in value.items())
        elif kind is list or kind is tuple:
            inner = _join(where, key)
            stack.extend((v, inner, i, untyped) for i, v in enumerate(value))
        elif isinstance(value, BaseModel):
            inner = _join(where, key)
            stack.extend((getattr(value, n), inner, a, u) for n, a, u in _fields_of(type(value)))
        elif isinstance(value, datetime):
            why = datetime_problem(value)
            if why:
                problems.append((_join(where, key), why))
        elif isinstance(value, date):
            why = date_problem(value)
            if why:
                problems.append((_join(where, key), why))
        elif isinstance(value, int) and not isinstance(value, bool):  # an int subclass (an IntEnum)
            if not INT_MIN <= value <= INT_MAX:
                problems.append((_join(where, key), f"an integer must lie between {INT_MIN} and {INT_MAX}"))
        elif isinstance(value, str):  # a str subclass (a StrEnum)
            if not untyped and len(value) > MAX_TEXT_CHARS:
                problems.append((_join(where, key), f"text is limited to {MAX_TEXT_CHARS} characters"))
        elif isinstance(value, list | tuple | set | frozenset):
            inner = _join(where, key)
            stack.extend((v, inner, i, untyped) for i, v in enumerate(value))
    return sorted(problems)
