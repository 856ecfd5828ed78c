"""The one envelope every tool answers in: a single text block of indented JSON.

Services signal "no" by raising `operator_site.refusals.Refusal`; the dispatcher rolls the call
back and the refusal becomes an ordinary result, `{"ok": false, "error": <code>, "reason": ...}`
(docs/architecture.md, "The envelope and refusals").
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from mcp_types import CallToolResult, TextContent


class _Encoder(DjangoJSONEncoder):
    def default(self, o: Any) -> Any:
        if isinstance(o, set | frozenset):
            return sorted(o)
        return super().default(o)


_ENCODER_DEFAULT = _Encoder().default


def _default(o: Any) -> Any:
    """What orjson hands over (it is told to pass datetimes through): the encoder's text, with the
    two types an answer holds by the hundred done first (DjangoJSONEncoder's own steps for a
    datetime and a date; every other type, and any subclass, goes to the encoder)."""
    kind = type(o)
    if kind is datetime:
        r = o.isoformat()
        if o.microsecond:
            r = r[:23] + r[26:]
        if r.endswith("+00:00"):
            r = r.removesuffix("+00:00") + "Z"
        return r
    if kind is date:
        return o.isoformat()
    return _ENCODER_DEFAULT(o)


# Two-space indentation, keys in order, unicode kept readable: what json.dumps(indent=2,
# ensure_ascii=False) writes, byte for byte, except that a float is written in its shortest form
# (0.00001, where json writes 1e-05) and NaN/Infinity as null. Dates, times, decimals and sets go
# through the same encoder as before (Django's formats).
_ORJSON = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME


def to_json(result: Any) -> str:
    """The envelope's text: indented JSON, unicode kept readable.

    Written by orjson: with indentation the standard library's encoder is pure Python, and for
    the orientation packet (tens of KB) it was some 40 % of the call. What orjson refuses (an
    integer beyond 64 bits, a lone surrogate) is written by the standard library as before."""
    try:
        return orjson.dumps(result, default=_default, option=_ORJSON).decode()
    except orjson.JSONEncodeError:
        return json.dumps(result, indent=2, ensure_ascii=False, cls=_Encoder)


def envelope(result: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    """Exactly one text content block holding the result as indented JSON."""
    return CallToolResult(content=[TextContent(type="text", text=to_json(result))], is_error=is_error)
