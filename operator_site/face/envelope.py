"""The one envelope every tool answers in: a single text block of indented JSON.

Services signal "no" by raising `operator_site.refusals.Refusal`; the dispatcher rolls the call
back and the refusal becomes an ordinary result, `{"ok": false, "error": <code>, "reason": ...}`
(docs/architecture.md, "The envelope and refusals").
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from mcp_types import CallToolResult, TextContent


class _Encoder(DjangoJSONEncoder):
    def default(self, o: Any) -> Any:
        if isinstance(o, set | frozenset):
            return sorted(o)
        return super().default(o)


_DEFAULT = _Encoder().default
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
        return orjson.dumps(result, default=_DEFAULT, option=_ORJSON).decode()
    except orjson.JSONEncodeError:
        return json.dumps(result, indent=2, ensure_ascii=False, cls=_Encoder)


def envelope(result: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    """Exactly one text content block holding the result as indented JSON."""
    return CallToolResult(content=[TextContent(type="text", text=to_json(result))], is_error=is_error)
