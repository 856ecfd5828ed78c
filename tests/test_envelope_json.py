"""The envelope's text is what json.dumps(indent=2, ensure_ascii=False) with Django's encoder wrote
before it was written by orjson: same bytes for everything a tool answers (floats aside, which are
written in their shortest form)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from django.core.serializers.json import DjangoJSONEncoder

from operator_site.face.envelope import to_json


def _stdlib(value: Any) -> str:
    class Encoder(DjangoJSONEncoder):
        def default(self, o: Any) -> Any:
            return sorted(o) if isinstance(o, set | frozenset) else super().default(o)

    return json.dumps(value, indent=2, ensure_ascii=False, cls=Encoder)


CORPUS: list[Any] = [
    {},
    [],
    {"ok": True, "items": [], "nested": {"empty": {}, "list": [[], [{}]]}},
    {"text": "é ü 漢字 \u2028 \u2029 \x7f emoji 🙂", "controls": "\x00\x01\x1f\b\f\n\r\t", "quote": '"\\/'},
    {"when": datetime(2026, 11, 30, 8, 0, 1, 123456, tzinfo=UTC), "day": date(2026, 11, 30)},
    {
        "whole": datetime(2026, 11, 30, 8, 0, 1, tzinfo=UTC),
        "micro": datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
    },
    {"offset": datetime(2026, 6, 1, 9, 30, 0, 500000, tzinfo=timezone(timedelta(hours=2)))},
    {"minus": datetime(2026, 6, 1, 9, 30, tzinfo=timezone(timedelta(hours=-5, minutes=-30)))},
    {
        "naive_micro": datetime(2026, 1, 2, 3, 4, 5, 678000),
        "first": date(1, 1, 1),
        "last": date(9999, 12, 31),
    },
    {"naive": datetime(2026, 1, 2, 3, 4, 5), "at": time(7, 30), "took": timedelta(minutes=3)},
    {"money": Decimal("12.50"), "id": uuid.UUID(int=7), "tags": {"b", "a"}, "frozen": frozenset({3, 1})},
    {"ints": [0, -1, 2**63 - 1, -(2**63)], "floats": [0.1, 0.5, 1.0, -2.25, 123456.789], "none": None},
    {1: "int keys become strings", "k": [True, False]},
    {"order": {"z": 1, "a": 2, "m": 3}},
]


@pytest.mark.parametrize("value", CORPUS)
def test_the_text_is_the_standard_librarys(value: Any) -> None:
    assert to_json(value) == _stdlib(value)


def test_what_orjson_refuses_is_written_as_before() -> None:
    huge = {"n": 2**70}
    assert to_json(huge) == _stdlib(huge)
    lone_surrogate = {"s": "\ud800"}
    assert to_json(lone_surrogate) == _stdlib(lone_surrogate)


def test_floats_are_written_in_their_shortest_form_and_read_back_equal() -> None:
    value = {"tiny": 1e-05, "big": 1e16}
    assert json.loads(to_json(value)) == value


def test_an_unknown_type_is_still_an_error() -> None:
    with pytest.raises(TypeError):
        to_json({"object": object()})


class _Moment(datetime):
    pass


class _Day(date):
    pass


def test_datetimes_and_dates_are_written_as_djangos_encoder_writes_them() -> None:
    """The envelope writes a datetime and a date itself (the packet holds a hundred or more), and
    hands every other type — a subclass too — to Django's encoder: the same text either way."""
    from operator_site.face.envelope import _default

    encoder = DjangoJSONEncoder()
    zones = [UTC, None, timezone(timedelta(hours=1)), timezone(timedelta(hours=-9, minutes=-30))]
    values: list[Any] = [
        datetime(2026, 12, 3, 14, 24, 35, micro, tzinfo=zone)
        for micro in (0, 1, 999, 123456)
        for zone in zones
    ]
    values += [datetime.min, datetime.max, date(2026, 12, 3), date.min, date.max, time(1, 2, 3, 4)]
    values += [_Moment(2026, 12, 3, 1, 2, 3, 4500, tzinfo=UTC), _Day(2026, 12, 3), Decimal("2.50")]
    for value in values:
        assert _default(value) == encoder.default(value), value
    assert to_json({"v": values}) == _stdlib({"v": values})
