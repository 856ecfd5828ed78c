"""operator_site.display (the one mechanism for showing agent text), its page middleware and the
outbound deadline helper: the rules each surface relies on, one by one."""

from __future__ import annotations

import re
import time
import unicodedata

import pytest

from operator_site import display, outbound
from operator_site import hidden as hidden_module
from operator_site.middleware import BANNER_MARKER, mark_page


@pytest.mark.parametrize(
    ("ch", "hidden"),
    [
        ("\u202e", True),
        ("\u2066", True),
        ("\u200b", True),
        ("\u00ad", True),
        ("\u3164", True),
        ("\U000e0041", True),
        ("\u2028", True),
        ("\x1b", True),
        ("\r", True),
        ("\n", False),
        ("\t", False),
        ("\u00a0", False),
        ("é", False),
        ("ע", False),
        # Variation selectors, alone (after a letter, below, or in a run), and blank-looking letters.
        ("\ufe0f", True),
        ("\ufe00", True),
        ("\U000e0100", True),
        ("\U00016fe4", True),
        ("\U0001d159", True),
    ],
)
def test_which_characters_are_hidden(ch: str, hidden: bool) -> None:
    assert hidden_module.is_hidden(ch) is hidden
    assert bool(hidden_module.hidden_re().search(ch)) is hidden
    assert display.has_hidden(f"a{ch}b") is hidden


def test_the_compiled_patterns_match_exactly_the_characters_the_rules_name() -> None:
    """Every code point: the compiled patterns (a BMP bitmap, then the check of a character past
    U+FFFF against its own ranges) decide as `is_hidden` and `refused_in_identifier` do, alone and
    found in running text (one string of every code point, so each match is tried after all kinds
    of neighbours, in one pass as a notice body is scanned)."""
    hidden, refused = hidden_module._classes()
    every = [chr(code) for code in range(0x110000)]
    assert [bool(hidden.fullmatch(ch)) for ch in every] == [hidden_module.is_hidden(ch) for ch in every]
    assert [bool(refused.fullmatch(ch)) for ch in every] == [
        hidden_module.refused_in_identifier(ch) for ch in every
    ]
    text = "".join(every)
    assert [m.start() for m in hidden.finditer(text)] == [
        i for i, ch in enumerate(every) if hidden_module.is_hidden(ch)
    ]
    assert [m.start() for m in refused.finditer(text)] == [
        i for i, ch in enumerate(every) if hidden_module.refused_in_identifier(ch)
    ]


@pytest.mark.parametrize(
    ("text", "marked"),
    [
        ("I \u2764\ufe0f it", []),  # an emoji's picture form, after a symbol
        ("\u00a9\ufe0e 2026", []),  # a symbol's text form
        ("press 1\ufe0f\u20e3", []),  # a keycap
        ("\u203c\ufe0f done", []),  # after punctuation
        ("a\ufe0f", ["\ufe0f"]),  # after a letter: nothing to select, it only hides
        ("1\ufe0f2", ["\ufe0f"]),  # after a digit with no keycap
        ("\ufe0fstart", ["\ufe0f"]),
        ("\U0001f600\ufe0f\ufe0f", ["\ufe0f"]),  # the second of a run
        # A whole message hidden in selectors after one emoji (each byte one selector): every one marked.
        (
            "\U0001f600" + "".join(chr(0xE0100 + b) for b in b"pay") + "\ufe01",
            ["\U000e0170", "\U000e0161", "\U000e0179", "\ufe01"],
        ),
        ("\u6f22\U000e0100", ["\U000e0100"]),
    ],
)
def test_variation_selectors_are_marked_except_an_emojis_presentation(text: str, marked: list[str]) -> None:
    assert display.hidden_chars(text) == marked
    shown = display.visible_text(text)
    assert not display.has_hidden(shown)
    for ch in marked:
        assert display.token(ch) in shown


def test_an_identifier_that_mixes_directions_reads_in_the_order_it_is_stored() -> None:
    """The bidirectional algorithm (python-bidi, the reference rules) lays out what is shown: an
    identifier mixing a right-to-left character with what a left-to-right reader reads would show its
    parts in another order; shown with each right-to-left character as a token, it reads as stored."""
    from bidi import get_display

    spoofs = [
        "\u05f3 1111 2222 3333",  # a geresh, which looks like an apostrophe, before an account number
        "0958 7946 20 44+\u05f3",  # a phone number stored reversed
        "\u05d0 DE89 3704 0044 0532 0130 00",  # a Hebrew letter before an IBAN
        "GB82 WEST 1234 \u0627 5698 7654 32",  # an Arabic letter inside one
        "\u0661\u0662\u0663\u0664 \u0665\u0666\u0667\u0668",  # Arabic-Indic digits alone
        "IBAN \u05d0 12 34 56",  # a letter that makes the groups after it run right to left
    ]

    def reads_as_stored(text: str) -> bool:
        # Alone (a page's <bdi>: its direction from its first strong character) and after a label.
        return get_display(text) == text and get_display(f"To: {text}") == f"To: {text}"

    for text in spoofs:
        assert not reads_as_stored(text), text  # shown as it is, it would reorder
        assert display.mixes_directions(text)
        shown = display.identifier_text(text)
        assert reads_as_stored(shown), (text, shown)
        assert not {unicodedata.bidirectional(ch) for ch in shown} & {"R", "AL", "AN"}  # all tokens now
        html = display.visible_identifier_html(text)
        assert html.startswith('<bdi class="op-agent">') and "right-to-left, in an identifier" in html
        # The page's text (markup removed) is the plain text's, so it reads in order as well.
        assert re.sub(r"<[^>]*>", "", html) == shown.replace("&", "&amp;")
    # One right-to-left script alone, or with only hidden characters beside it, is shown as it is.
    for text in ("\u05d3\u05e0\u05d9 \u05db\u05d4\u05df", "\u0645\u062d\u0645\u062f \u0639\u0644\u064a"):
        assert not display.mixes_directions(text)
        assert display.identifier_text(text) == text
        assert display.visible_identifier_html(text) == display.visible_html(text)
    assert display.identifier_text("DE89\u200f 1234") == "DE89[U+200F] 1234"  # a mark is a hidden token


def test_a_word_that_reads_as_a_latin_one_is_shown_as_tokens() -> None:
    """ "paypal" in Cyrillic letters (one script: past the door) would pass for the Latin word; each of
    its letters is a token, named in its tooltip. A word in another script that does not read wholly
    as Latin, a Latin word and an accented one are shown as they are."""
    paypal = "\u0440\u0430\u0443\u0440\u0430\u04cf"
    assert display.identifier_text(f"billing@{paypal}.com") == (
        "billing@[U+0440][U+0430][U+0443][U+0440][U+0430][U+04CF].com"
    )
    assert display.lookalike_tokens(f"pay {paypal}") == ["[U+0440]", "[U+0430]", "[U+0443]", "[U+04CF]"]
    html = display.visible_identifier_html(f"{paypal}.com")
    assert html.startswith('<bdi class="op-agent">') and paypal[0] not in html
    assert "reads as the Latin &#x27;paypal&#x27;" in html and html.count('class="op-hidden"') == 6
    # Full-width letters (stored before the door refused them) read as Latin too.
    assert display.identifier_text("\uff54one") == "[U+FF54]one"
    for plain in (
        "paypal.com",
        "\u043c\u043e\u0441\u043a\u0432\u0430",
        "\u041c\u0430\u043c\u0430",
        "caf\u00e9",
    ):
        assert display.identifier_text(plain) == plain and display.lookalike_tokens(plain) == []
        assert display.visible_identifier_html(plain) == display.visible_html(plain)
    # Both marks in one identifier: a right-to-left letter and a look-alike word.
    both = display.identifier_text(f"\u05d0 {paypal}")
    assert both == "[U+05D0] [U+0440][U+0430][U+0443][U+0440][U+0430][U+04CF]"
    _, described = mark_page(f"<body><p>{display.visible_identifier_html(paypal)}</p></body>")
    assert any("CYRILLIC SMALL LETTER ER (reads as 'p'" in d for d in described)


def test_identifiers_are_stricter_and_the_refusal_names_the_character() -> None:
    for ch in ("\n", "\t", "\u00a0", "\ufe0f", "\u202e"):
        problem = display.identifier_problem(f"ab{ch}c")
        assert problem and f"U+{ord(ch):04X}" in problem and "position 3" in problem
    assert display.identifier_problem("Run a marathon — 2027 (Lisbon) עברית") is None


def test_a_new_identifier_is_plain_and_one_script_a_target_only_visible() -> None:
    """A new name refuses a character NFKC changes (named with its plain form) and a word mixing
    scripts (naming the letter of the word's other script); a target refuses hidden characters only."""
    for text, named, where, why in (
        ("\uff50refs", "U+FF50", "position 1", "(NFKC: 'p')"),
        ("pre\ufb01x", "U+FB01", "position 4", "(NFKC: 'fi')"),
        ("cafe\u0301", "U+0301", "position 5", "(NFKC: '\u00e9')"),
        ("home.t\u043ene", "U+043E", "position 7", "Latin and Cyrillic"),
        ("\u043e\u043d\u043eo", "U+006F", "position 4", "Cyrillic and Latin"),  # the minority named
        ("g\u3007\u3007gle", "U+3007", "position 2", "Latin and Han"),
        ("t\u0301\u043ene", "U+043E", "position 3", "Latin and Cyrillic"),  # a mark does not end a word
    ):
        problem = display.identifier_problem(text)
        assert problem and named in problem and where in problem and why in problem, (text, problem)
        assert display.identifier_problem(text, target=True) is None
    for text in (
        "caf\u00e9",
        "\u043c\u043e\u0441\u043a\u0432\u0430",
        "\u98df\u3079\u7269",
        "a.\u03b1",
        "T-\u30b7",
    ):
        assert display.identifier_problem(text) is None, text
    assert "U+202E" in (display.identifier_problem("a\u202eb", target=True) or "")


def test_a_title_may_hold_typographic_signs_but_no_letter_in_another_form() -> None:
    """A title allows the signs of ordinary writing that NFKC spells out; every other new name still
    refuses them, and a title still refuses a letter or digit in another form, naming it. The lists are
    written here from the characters' names, not taken from the operator's own class."""
    signs = (
        "\u00bd\u00bc\u00be\u2153\u215b"  # fractions
        "\u00b2\u00b3\u00b9\u2070\u2074\u2089\u2082\u207a\u207b\u207d\u207e"  # raised, lowered
        "\u2122\u2120\u2026\u203c\u00b4"  # ™ ℠ … ‼ spacing acute
        "\uff08\uff09\uff0c\uff1a\uff01\uff1f\uff5e\uff0f\ufe50\uff64"  # wide, small, narrow
        "\u00aa\u00ba\u00b5\u2103\u2109\u2116"  # ª º µ ℃ ℉ №
    )
    for sign in signs:
        assert not unicodedata.is_normalized("NFKC", sign), sign  # each needs the allowance
        assert display.typographic(sign), f"U+{ord(sign):04X}"
        assert display.identifier_problem(f"Plan 3{sign} now", title=True) is None, sign
        problem = display.identifier_problem(f"plan3{sign}now")
        assert problem and f"U+{ord(sign):04X}" in problem, (sign, problem)
    letters = (
        "\uff41\uff21\uff11"  # full-width a, A, 1
        "\U0001d41a\U0001d7ce"  # mathematical bold a, digit zero
        "\u24d0\u24b6\u2474\u249c"  # circled a and A, parenthesised 1 and a
        "\u1d43\u207f\u2090\u1d2c"  # raised and lowered letters
        "\ufb01\u0133\u017f\u212a\u2160\u2170"  # ligatures, long s, Kelvin, Roman numerals
        "\uff71\u33a1\u3392\u2100\u3192\u3220"  # kana, ㎡, a/c, kanbun
    )
    for letter in letters:
        assert not display.typographic(letter), f"U+{ord(letter):04X}"
        problem = display.identifier_problem(f"Plan 3{letter} now", title=True)
        assert problem and f"U+{ord(letter):04X}" in problem, (letter, problem)
    # A sign does not hide a look-alike letter beside it, nor join two scripts into one word.
    problem = display.identifier_problem("t\u043ene\u00b2", title=True)
    assert problem and "U+043E" in problem and "position 2" in problem, problem
    assert display.identifier_problem("\u043c\u00b2", title=True) is None  # Cyrillic м with a raised two
    assert not display.typographic("a") and not display.typographic("\u00e9")  # NFKC leaves them


def test_plain_text_marks_each_hidden_character_and_keeps_layout() -> None:
    assert (
        display.visible_text("DE89\u202e1234\u202c\nx\r\ny\rz") == "DE89[U+202E]1234[U+202C]\nx\ny[U+000D]z"
    )
    assert display.visible_text("a\nb\tc", single_line=True) == "a b c"
    assert display.visible_text("x" * 50, limit=10) == "x" * 9 + "…"


def test_header_text_is_one_bounded_control_free_line() -> None:
    value = display.header_text(
        "[operator: safety] ", agent=["Shed\r\nBcc: evil@example.com\u2028", "x" * 500]
    )
    assert "\n" not in value and "\r" not in value and not display.has_hidden(value)
    assert value.startswith("[operator: safety] Shed Bcc: evil@example.com[U+2028]")
    assert len(value) <= display.HEADER_LIMIT


def test_html_is_escaped_marked_and_isolated() -> None:
    html = display.visible_html("<b>Bob\u202e</b>")
    assert html.startswith('<bdi class="op-agent">&lt;b&gt;Bob<span class="op-hidden"')
    assert 'title="U+202E RIGHT-TO-LEFT OVERRIDE">[U+202E]</span>&lt;/b&gt;</bdi>' in html


def test_the_middleware_marks_page_text_flags_the_page_and_leaves_form_data_alone() -> None:
    page = (
        f"<html><head><title>x\u200by</title></head><body>{BANNER_MARKER}"
        '<p>pay \u202eBob</p><input value="a\u202eb"><textarea>c\u202ed</textarea>'
        "<script>var s = 'e\u200bf';</script></body></html>"
    )
    marked, described = mark_page(page)
    assert "<title>x[U+200B]y</title>" in marked
    assert '<p>pay <span class="op-hidden"' in marked
    assert 'value="a\u202eb"' in marked and "<textarea>c\u202ed</textarea>" in marked
    assert "'e\u200bf'" in marked
    assert described == ["U+200B ZERO WIDTH SPACE", "U+202E RIGHT-TO-LEFT OVERRIDE"]


def test_a_clean_page_is_not_flagged() -> None:
    marked, described = mark_page("<html><body><p>Nothing hidden — “quotes” and עברית</p></body></html>")
    assert described == [] and "op-hidden" not in marked


def test_call_with_deadline_returns_or_abandons_on_time() -> None:
    assert outbound.call_with_deadline(lambda: 42, 1.0, "probe") == 42
    with pytest.raises(ValueError, match="boom"):
        outbound.call_with_deadline(lambda: (_ for _ in ()).throw(ValueError("boom")), 1.0, "probe")
    started = time.monotonic()
    with pytest.raises(outbound.OutboundDeadline, match=r"within 0\.3 s"):
        outbound.call_with_deadline(lambda: time.sleep(3), 0.3, "probe")
    assert time.monotonic() - started < 1.0
