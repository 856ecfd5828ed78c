"""How the evidence rules read words: normalising, sentences, context, keys, negations (pure)."""

from __future__ import annotations

import pytest

from operator_site import wording


def _texts(text: str) -> list[str]:
    return [s.text for s in wording.split_sentences(text)]


def test_normalise_folds_case_width_quotes_dashes_and_spaces() -> None:
    assert wording.normalise("  A\tB\n\nC  ") == "a b c"
    assert wording.normalise("That\u2019s \u201cIT\u201d \u2014 ok") == 'that\'s "it" - ok'
    assert wording.normalise("\uff2c\uff49\uff53\uff42\uff4f\uff4e") == "lisbon"  # full-width letters (NFKC)
    assert wording.normalise("Straße") == "strasse"
    assert wording.words("Don\u2019t  call me IAIN!") == ("don't", "call", "me", "iain")


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("One. Two! Three? Four; five", ["One.", "Two!", "Three?", "Four;", "five"]),
        ("Version 4.5 is fine. See example.com now", ["Version 4.5 is fine.", "See example.com now"]),
        (
            "Dr. Lee and Mrs. Shaw agreed, e.g. yesterday. Done",
            ["Dr. Lee and Mrs. Shaw agreed, e.g. yesterday.", "Done"],
        ),
        ("Call J. Smith today. Thanks", ["Call J. Smith today.", "Thanks"]),
        ("No. Never pay invoices automatically.", ["No.", "Never pay invoices automatically."]),
        ('He said "stop." Then he left', ['He said "stop."', "Then he left"]),
        ("Really?! Yes...", ["Really?!", "Yes..."]),
        ("line one\nline two\r\nline three", ["line one", "line two", "line three"]),
        ("Full width\uff1f Yes\u3002 Done", ["Full width\uff1f", "Yes\u3002", "Done"]),
        ("  \n\n  ", []),
    ],
)
def test_sentences_end_at_marks_followed_by_space_and_at_line_breaks(text: str, sentences: list[str]) -> None:
    assert _texts(text) == sentences


def test_sentences_keep_their_offsets_terminator_and_layout() -> None:
    text = "Changes:\n- My name is Ian\n- Don't call me Mallory\n\nIs my city Porto?"
    found = wording.split_sentences(text)
    assert [text[s.start : s.end] for s in found] == [s.text for s in found]
    assert [s.terminator for s in found] == ["\n", "\n", "\n", "?"]
    assert [s.bullet for s in found] == [False, True, True, False]
    assert [s.blank_before for s in found] == [False, False, False, True]
    assert found[0].intro and not found[1].intro


def test_context_takes_lines_that_run_on_and_an_introducing_line() -> None:
    found = wording.split_sentences("Fine.\nDo not\nset my city to Springfield\nplease. Next one.")
    # "Do not" / "set my city ..." / "please." are joined by bare line breaks: one sentence to the rules.
    assert [s.text for s in wording.context_of(found, 2, 2)] == [
        "Do not",
        "set my city to Springfield",
        "please.",
    ]
    assert [s.text for s in wording.context_of(found, 4, 4)] == ["Next one."]
    listed = wording.split_sentences(
        "Never do these:\n- pay invoices automatically\n- share my address\n\nCall me Ian."
    )
    assert [s.text for s in wording.context_of(listed, 2, 2)] == ["Never do these:", "- share my address"]
    assert [s.text for s in wording.context_of(listed, 3, 3)] == ["Call me Ian."]


def test_key_words_split_separators_and_camel_case_and_drop_insignificant_words() -> None:
    assert wording.key_words("home_city") == ["home", "city"]
    assert wording.key_words("homeCity") == ["home", "city"]
    assert wording.key_words("preferred-name.v2/full") == ["preferred", "name", "full"]
    assert wording.key_words("no_gambling") == ["gambling"]
    for nameless in ("the", "to_i", "my-own", "a.b", "it_is_ok", "x"):
        assert wording.key_words(nameless) == [], nameless


def test_significant_words_and_stems() -> None:
    assert wording.significant_words("I am a vegetarian, not vegan") == ["vegetarian", "vegan"]
    assert wording.significant_words("it is ok") == []
    assert wording.significant_words("pay 100 euros") == ["pay", "100", "euros"]
    assert wording.stem("invoices") == wording.stem("invoice")
    assert wording.stem("person's") == "person"
    assert wording.stem("address") == "address"


def test_negations_include_contractions_denials_and_the_past() -> None:
    found = [w for _, w in wording.negations_in(wording.words("I don't, never did; it's fake and I used to"))]
    assert found == ["don't", "never", "fake", "used to"]
    assert wording.negations_in(wording.words("Always ask me first")) == []


@pytest.mark.parametrize(
    ("text", "condition"),
    [
        ("I go running once a week.", None),
        ("I call my mother once every two weeks.", None),
        ("I call once every 3 days on the phone.", None),
        ("I fast once daily.", None),
        ("I visit once per month and on holidays.", None),
        ("Do it at once.", None),
        ("My city is Berlin at once the loan clears.", "once"),
        ("Once again, my city is Berlin.", None),
        ("Once the offer comes through, my city is Berlin.", "once"),
        ("Once every debt is paid, I retire.", "once"),
        ("Once a decision is made my city is Berlin.", "once"),
        ("Once a week passes, my city is Berlin.", "once"),
        ("Once a week, I fast.", None),  # the subject follows: it says how often
        ("Once every two weeks we meet.", None),
        ("Once monthly, my sister visits.", None),
        ("Once a week is over, I fast.", "once"),  # a verb follows: a condition
        ("Once a month the rent is due.", "once"),  # fail closed: "the" may open the condition
        ("My city is Berlin once a week passes.", "once"),
        ("My city is Berlin once a month is over.", "once"),
        ("My city is Berlin once every creditor is paid.", "once"),
        ("My employer is Initech once more people join.", "once"),
        ("I fly when I travel.", "when"),
    ],
)
def test_once_that_says_how_often_is_no_condition(text: str, condition: str | None) -> None:
    assert wording.condition_in(wording.words(text)) == condition


def _naive_find(words: tuple[str, ...], phrase: tuple[str, ...]) -> list[int]:
    n = len(phrase)
    return [i for i in range(len(words) - n + 1) if words[i : i + n] == phrase]


def test_a_phrase_list_found_in_one_pass_finds_what_each_phrase_in_turn_finds() -> None:
    """`wording.Phrases` looks for all its phrases in one pass; it must find exactly what looking
    for each phrase in turn finds: every occurrence, and the first phrase in the list's order."""
    import random

    lists = (wording.HEDGES, wording.CONDITIONS, wording.REPORTED, wording.NEGATION_PHRASES)
    vocab = sorted({w for phrases in lists for p in phrases for w in p} | {"a", "x", "week", "i", "the"})
    rng = random.Random(19)
    for _ in range(5_000):
        words = tuple(rng.choice(vocab) for _ in range(rng.randint(0, 10)))
        for phrases in lists:
            every = sorted((i, p) for p in phrases for i in _naive_find(words, p))
            assert sorted(phrases.occurrences(words)) == every, (words, phrases[:3])
            first = next((p for p in phrases if _naive_find(words, p)), None)
            assert phrases.first(words) == first, words


def test_close_matches_suggest_names_a_typo_away_and_not_others() -> None:
    names = ["garden shed", "garden", "pond", "scrape", "employer", "preferences.tone"]
    assert wording.close_matches("garden_shed", names)[:2] == ["garden shed", "garden"]
    assert wording.close_matches("employr", names) == ["employer"]
    assert wording.close_matches("scope", names) == ["scrape"]
    assert wording.close_matches("preferences.tnoe", names) == ["preferences.tone"]
    assert wording.close_matches("zzz", names) == []
    assert wording.close_matches("a", ["a", "b"], n=1) == ["a"]
    assert wording.close_matches("", ["", "x"]) == [""]
