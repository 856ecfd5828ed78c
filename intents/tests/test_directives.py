"""Directives: quiet, topic_mute and focus — set, list, clear; every bad input refused, nothing written."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from intents.answers import directive_dict
from intents.directives import active_directives, clear_directives, set_directive
from intents.models import Directive
from operator_site.refusals import Refusal
from tests.fixtures import asgi_http, call, orm

pytestmark = pytest.mark.django_db


def test_set_defaults_to_sixty_minutes_and_normalises_the_topic(agent) -> None:
    now = timezone.now()
    directive, superseded = set_directive(
        principal=agent.principal, kind="focus", topic="  Tax   Return ", minutes=60, reason=None, now=now
    )
    assert directive.topic == "tax return"
    assert directive.expires_at == now + timedelta(minutes=60)
    assert superseded == []
    assert directive_dict(directive, now)["minutes_left"] == 60


def test_a_newer_directive_of_the_same_kind_and_topic_replaces_the_one_in_force(agent) -> None:
    first, _ = set_directive(
        principal=agent.principal, kind="topic_mute", topic="news", minutes=600, reason=None
    )
    other, _ = set_directive(
        principal=agent.principal, kind="topic_mute", topic="sport", minutes=600, reason=None
    )
    second, superseded = set_directive(
        principal=agent.principal, kind="topic_mute", topic="NEWS", minutes=10, reason=None
    )
    assert superseded == [first.id]
    assert [d.id for d in active_directives()] == [second.id, other.id]
    first.refresh_from_db()
    assert first.clear_reason == "superseded"


@pytest.mark.parametrize(
    ("kind", "topic", "minutes", "code"),
    [
        ("topic_mute", None, 60, "topic_required"),
        ("focus", "   ", 60, "topic_required"),
        ("quiet", "news", 60, "topic_not_allowed"),
        ("quiet", None, 0, "minutes_out_of_range"),
        ("quiet", None, 1441, "minutes_out_of_range"),
        ("shout", None, 60, "invalid_kind"),
    ],
)
def test_bad_directives_are_refused(agent, kind: str, topic: str | None, minutes: int, code: str) -> None:
    with pytest.raises(Refusal) as refused:
        set_directive(principal=agent.principal, kind=kind, topic=topic, minutes=minutes, reason=None)
    assert refused.value.code == code
    assert Directive.objects.count() == 0


def test_expired_directives_are_never_listed_and_order_is_soonest_expiry_first(agent) -> None:
    now = timezone.now()
    set_directive(
        principal=agent.principal,
        kind="quiet",
        topic=None,
        minutes=5,
        reason=None,
        now=now - timedelta(minutes=10),
    )  # lapsed five minutes ago
    late, _ = set_directive(
        principal=agent.principal, kind="focus", topic="a", minutes=120, reason=None, now=now
    )
    soon, _ = set_directive(
        principal=agent.principal, kind="topic_mute", topic="b", minutes=30, reason=None, now=now
    )
    assert [d.id for d in active_directives(now)] == [soon.id, late.id]


def test_clear_by_id_kind_or_all(agent) -> None:
    p = agent.principal
    a, _ = set_directive(principal=p, kind="topic_mute", topic="a", minutes=60, reason=None)
    b, _ = set_directive(principal=p, kind="topic_mute", topic="b", minutes=60, reason=None)
    c, _ = set_directive(principal=p, kind="focus", topic="c", minutes=60, reason=None)
    d, _ = set_directive(principal=p, kind="quiet", topic=None, minutes=60, reason=None)
    assert [x.id for x in clear_directives(principal=p, directive_id=a.id)] == [a.id]
    assert [x.id for x in clear_directives(principal=p, kind="topic_mute")] == [b.id]
    assert sorted(x.id for x in clear_directives(principal=p, everything=True)) == [c.id, d.id]
    assert list(active_directives()) == []
    assert clear_directives(principal=p, everything=True) == []


@pytest.mark.parametrize(
    "selectors",
    [
        {},
        {"directive_id": 1, "kind": "quiet"},
        {"kind": "quiet", "everything": True},
        {"directive_id": 1, "everything": True},
    ],
)
def test_clear_needs_exactly_one_selector(agent, selectors: dict) -> None:
    set_directive(principal=agent.principal, kind="quiet", topic=None, minutes=60, reason=None)
    with pytest.raises(Refusal) as refused:
        clear_directives(principal=agent.principal, **selectors)
    assert refused.value.code == "one_selector_required"
    assert len(active_directives()) == 1


def test_clearing_an_unknown_or_lapsed_directive_is_refused(agent) -> None:
    lapsed, _ = set_directive(
        principal=agent.principal,
        kind="quiet",
        topic=None,
        minutes=1,
        reason=None,
        now=timezone.now() - timedelta(minutes=5),
    )
    for directive_id in (lapsed.id, 999_999):
        with pytest.raises(Refusal) as refused:
            clear_directives(principal=agent.principal, directive_id=directive_id)
        assert refused.value.code == "not_found"


# --- through /mcp: the refusals arrive as results and nothing is written ------------------------------
@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("tool", "arguments", "error"),
    [
        ("operator_set_directive", {"kind": "shout"}, "invalid_arguments"),
        ("operator_set_directive", {"kind": "focus"}, "topic_required"),
        ("operator_set_directive", {"kind": "quiet", "minutes": 1441}, "invalid_arguments"),
        ("operator_set_directive", {"kind": "quiet", "minutes": "soon"}, "invalid_arguments"),
        ("operator_set_directive", {"kind": "quiet", "colour": "red"}, "invalid_arguments"),
        ("operator_clear_directive", {"kind": "quiet", "all": True}, "one_selector_required"),
        ("operator_clear_directive", {}, "one_selector_required"),
        ("operator_clear_directive", {"all": False}, "one_selector_required"),
        ("operator_clear_directive", {"id": 0}, "invalid_arguments"),
    ],
)
async def test_bad_input_over_mcp_is_a_clear_refusal(agent, tool: str, arguments: dict, error: str) -> None:
    async with asgi_http(agent.token) as http:
        await call(http, "operator_set_directive", {"kind": "quiet", "minutes": 30})
        answer = await call(http, tool, arguments)
    assert answer["ok"] is False
    assert answer["error"] == error
    assert answer["reason"]
    directives = await orm(lambda: list(Directive.objects.values_list("kind", "cleared_at")))
    assert directives == [("quiet", None)]


def test_a_topic_is_found_whole_as_the_pattern_it_replaced_finds_it() -> None:
    """`directives._about` (a topic's reading, whole, in a notice's read text) and the one-search
    pattern over all topics (`_any_about`) find exactly what the per-topic regular expression
    `(?<!\\w)topic(?!\\w)` finds, on random texts of letters of three scripts, digits, "_" and
    separators."""
    import random
    import re

    from intents import directives

    rng = random.Random(11)
    alphabet = "ab1_ -.é\u0436\u05d0"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        topics = tuple({"".join(rng.choice("ab1 é") for _ in range(rng.randint(1, 3))) for _ in range(3)})
        topics = tuple(t for t in topics if t.strip() and t == " ".join(t.split()))

        def found(topic: str, text: str) -> bool:
            reading = directives._topic_read(topic)
            return bool(reading) and re.search(rf"(?<!\w){re.escape(reading)}(?!\w)", text) is not None

        for topic in topics:
            expected = found(topic, text)
            assert directives._about(topic, text) is expected, (topic, text)
        if topics:
            expected_any = any(found(t, text) for t in topics)
            assert (directives._any_about(topics).search(text) is not None) is expected_any, (topics, text)
