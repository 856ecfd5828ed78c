"""Property-based check of the evidence rule (hypothesis): for random instructions and random
high-stakes changes, a write succeeds ONLY IF the quote is a whole sentence (or a run of whole
sentences) of a live human's instruction that holds every significant word of the target and the
value, with matching polarity and no hedge, condition or question — and it always succeeds when
the quote is exactly such a sentence, its negation reaching the value's words as the value's does
and the value said next to the target (`_said_in_order`).

The oracle below knows the sentences because it built them; it does not use `operator_site.wording`."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.db import transaction
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from beliefs import services
from beliefs.models import Belief
from operator_site.refusals import Refusal

pytestmark = pytest.mark.django_db

NOUNS = ["city", "river", "garden", "violin", "harbour", "lantern", "meadow", "copper", "falcon", "orchard"]
FILLER = ["my", "the", "is", "to", "please", "now", "and", "it", "for", "me"]
NEGATIONS = ["never", "not", "don't"]
HEDGES = ["maybe", "perhaps"]
CONDITIONS = ["if", "unless"]
MARKS = [".", ".", "!", ";", "?"]


class _Undo(Exception):
    """Raised to roll back one example's rows (the test's own transaction stays)."""


@dataclass(frozen=True)
class Piece:
    words: tuple[str, ...]
    mark: str

    @property
    def text(self) -> str:
        return " ".join(self.words) + self.mark


@st.composite
def sentence(draw: st.DrawFn, key: tuple[str, ...], value: tuple[str, ...]) -> Piece:
    chosen: list[str] = []
    for w in key + value:  # each target/value word is in the sentence, or not
        if draw(st.integers(0, 7)) > 0:
            chosen.append(w)
    chosen += draw(st.lists(st.sampled_from(FILLER + NOUNS), max_size=3))
    if draw(st.integers(0, 4)) == 0:
        chosen.append(draw(st.sampled_from(NEGATIONS)))
    if draw(st.integers(0, 9)) == 0:
        chosen.append(draw(st.sampled_from(HEDGES + CONDITIONS)))
    order = draw(st.permutations(chosen)) if chosen else ["ok"]
    return Piece(tuple(order) or ("ok",), draw(st.sampled_from(MARKS)))


@st.composite
def case(draw: st.DrawFn) -> tuple:
    key = tuple(draw(st.lists(st.sampled_from(NOUNS), min_size=1, max_size=2, unique=True)))
    value = tuple(draw(st.lists(st.sampled_from(NOUNS), min_size=1, max_size=2, unique=True)))
    negative = draw(st.integers(0, 3)) == 0
    pieces = draw(st.lists(sentence(key, value + (("never",) if negative else ())), min_size=1, max_size=3))
    first = draw(st.integers(0, len(pieces) - 1))
    last = draw(st.integers(first, len(pieces) - 1))
    quote_kind = draw(st.sampled_from(["run", "run", "fragment"]))
    who = draw(st.sampled_from(["person", "person", "person", "agent", "revoked"]))
    return key, value, negative, pieces, first, last, quote_kind, who


def _oracle_allows(key, value, negative, pieces, first, last, quote_kind, who) -> bool:
    """Necessary conditions for a write to succeed, from the generated structure."""
    if who != "person" or quote_kind != "run":
        return False
    quoted = pieces[first : last + 1]
    words = [w for p in quoted for w in p.words]
    if any(p.mark == "?" for p in quoted) or any(w in HEDGES + CONDITIONS for w in words):
        return False
    value_words = (*value, "never") if negative else value
    # Some quoted sentence holds every key and value word ...
    holds = any(all(w in p.words for w in key + value) for p in quoted)
    # ... and the quote's negations are exactly the value's (polarity).
    quote_negated = any(w in NEGATIONS for w in words)
    return holds and quote_negated == ("never" in value_words)


def _oracle_requires(key, value, negative, pieces, first, last, quote_kind, who) -> bool:
    """When a write must succeed: the quote is one firm sentence saying exactly the change."""
    if who != "person" or quote_kind != "run" or first != last:
        return False
    piece = pieces[first]
    if piece.mark == "?" or any(w in HEDGES + CONDITIONS for w in piece.words):
        return False
    if not all(w in piece.words for w in key + value):
        return False
    negations = [w for w in piece.words if w in NEGATIONS]
    if negations != (["never"] if negative else []) or len(pieces) != 1:
        return False
    return _said_in_order(piece.words, key, value, negative)


def _said_in_order(
    words: tuple[str, ...], key: tuple[str, ...], value: tuple[str, ...], negative: bool
) -> bool:
    """The sentence says the value of the key, not only holds their words: its negation reaches the
    value's words as the value's does (a negative value's words all stand after the "never", as in
    "never ..."), and one stretch of it holds every value word and a key word with no other noun
    between them ("city garden river" does not say the city is a river), a key word and a value
    word in one clause ("and" starts the next one)."""
    clause = [sum(1 for w in words[1 : i + 1] if w == "and") for i in range(len(words))]
    if negative:
        at = words.index("never")
        for i, w in enumerate(words):
            # "never" reaches the words after it in its clause, and on past an "and" only while
            # what it reached names no noun.
            reached = i > at and not any(
                words[k] in NOUNS and clause[k] < clause[i] for k in range(at + 1, i)
            )
            if w in value and not reached:
                return False
    for i in range(len(words)):
        for j in range(i, len(words)):
            stretch = range(i, j + 1)
            if any(words[k] in NOUNS and words[k] not in key + value for k in stretch):
                break
            keyed = {clause[k] for k in stretch if words[k] in key}
            valued = {clause[k] for k in stretch if words[k] in value}
            if set(value) <= {words[k] for k in stretch} and keyed & valued:
                return True
    return False


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(example=case())
def test_a_write_succeeds_only_with_the_persons_whole_bound_firm_words(
    owner, agent, make_principal, example
) -> None:
    key, value, negative, pieces, first, last, quote_kind, who = example
    text = " ".join(p.text for p in pieces)
    quoted = pieces[first : last + 1]
    quote = " ".join(p.text for p in quoted)
    if quote_kind == "fragment":
        if len(quoted[0].words) < 2:
            return  # cutting its only word would leave whole sentences
        words = [w for p in quoted for w in p.words]
        quote = " ".join(words[1:])  # the first word cut off: not a whole sentence
    belief_value = " ".join(("never", *value) if negative else value)
    ok = False
    code = ""
    try:
        with transaction.atomic():
            recorder = {"person": owner.principal, "agent": agent.principal}.get(who)
            if who == "revoked":
                from operator_site.face.auth import revoke

                recorder = make_principal("former", kind="human").principal
            services.record_instruction(principal=recorder, text=text)
            if who == "revoked":
                revoke(recorder)
            try:
                made = services.update_world_model(
                    principal=agent.principal,
                    changes=[{"op": "add", "kind": "identity", "key": "_".join(key), "value": belief_value}],
                    confirmed=True,
                    quote=quote,
                )
                ok = made["ok"] is True
                assert Belief.objects.filter(kind="identity", key="_".join(key)).exists()
            except Refusal as refusal:
                code = refusal.code
            else:
                code = "written"
            raise _Undo

    except _Undo:
        pass
    event(code)
    assert code == "written" or code.startswith("confirmation_"), code
    if ok:
        assert _oracle_allows(*example), (example, quote)
    if _oracle_requires(*example):
        assert ok, (example, quote)
