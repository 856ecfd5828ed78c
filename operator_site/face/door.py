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
  thing on either database. (Integers inside JSON values, e.g. a goal change's `fields`, too.)
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

import math
import re
import typing
from datetime import UTC, date, datetime, timedelta
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


def raw_problem(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first (field, message) in raw JSON arguments that no database could store: NUL or a lone
    surrogate in a string or key, a non-finite number. Iterative (arguments may nest deeply)."""
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


def range_problems(model: BaseModel, path: str = "") -> list[tuple[str, str]]:
    """Every (field, message) of a validated argument model whose value is out of the door's range."""
    problems: list[tuple[str, str]] = []
    stack: list[tuple[Any, str, bool]] = []
    for name, info in type(model).model_fields.items():
        stack.append((getattr(model, name), _join(path, info.alias or name), _is_any(info.annotation)))
    while stack:
        value, where, untyped = stack.pop()
        if isinstance(value, BaseModel):
            problems += range_problems(value, where)
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, float):
            if not math.isfinite(value):
                problems.append((where, "numbers must be finite (NaN and Infinity are not JSON)"))
        elif isinstance(value, int):
            if not INT_MIN <= value <= INT_MAX:
                problems.append((where, f"an integer must lie between {INT_MIN} and {INT_MAX}"))
        elif untyped:
            if isinstance(value, dict):
                stack.extend((v, _join(where, k), True) for k, v in value.items())
            elif isinstance(value, list | tuple):
                stack.extend((v, _join(where, i), True) for i, v in enumerate(value))
        elif isinstance(value, str):
            if len(value) > MAX_TEXT_CHARS:
                problems.append((where, f"text is limited to {MAX_TEXT_CHARS} characters"))
        elif isinstance(value, datetime):
            why = datetime_problem(value)
            if why:
                problems.append((where, why))
        elif isinstance(value, date):
            why = date_problem(value)
            if why:
                problems.append((where, why))
        elif isinstance(value, timedelta):
            continue
        elif isinstance(value, dict):
            stack.extend((v, _join(where, k), False) for k, v in value.items())
        elif isinstance(value, list | tuple | set | frozenset):
            stack.extend((v, _join(where, i), False) for i, v in enumerate(value))
    return sorted(problems)
