"""Hidden characters: which characters, shown as they are, would be invisible or move other text.

The one definition every surface uses: `operator_site.display` shows them as tokens and refuses them
in identifiers; `operator_site.lookalikes.as_seen` drops them where a rule reads words. Pure (no
Django), so the gate (`intents.gate`) may read text through it. What counts as hidden, and why, is in
`operator_site.display`'s docstring ("Which characters are hidden").
"""

from __future__ import annotations

import functools
import re
import unicodedata

# Letters and marks that are not format characters but render as nothing (or as blank space).
# The last two: KHITAN SMALL SCRIPT FILLER, MUSICAL SYMBOL NULL NOTEHEAD.
_BLANK_LOOKING = frozenset(
    {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x2800, 0x3164, 0xFFA0}
    | {0x16FE4, 0x1D159}
)
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
_LAYOUT = frozenset("\n\t")  # kept in free text: they show as what they are (with pre-wrap)


def _is_variation_selector(code: int) -> bool:
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF


def is_hidden(ch: str) -> bool:
    """Would this character, shown as it is (alone), be invisible or move other text? (Free-text
    rule: the line feed and tab are layout, not hidden. In running text `hidden_re` also lets an
    emoji's U+FE0E/FE0F through, after a symbol, a punctuation mark or a keycap's digit.)"""
    if ch in _LAYOUT:
        return False
    code = ord(ch)
    return (
        code in _BLANK_LOOKING
        or _is_variation_selector(code)
        or unicodedata.category(ch) in _HIDDEN_CATEGORIES
    )


def refused_in_identifier(ch: str) -> bool:
    """Identifiers are stricter: no hidden character, no line break or tab, no space but U+0020, no
    variation selector (not even an emoji's)."""
    if ch in _LAYOUT or is_hidden(ch):
        return True
    return unicodedata.category(ch) == "Zs" and ch != " "


def add_code(ranges: list[list[int]], code: int) -> None:
    """Add `code` to `ranges` (inclusive [first, last] pairs), scanned in ascending order."""
    if ranges and ranges[-1][1] == code - 1:
        ranges[-1][1] = code
    else:
        ranges.append([code, code])


def _chars(ranges: list[list[int]]) -> str:
    parts = "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges
    )
    return f"[{parts}]"


def class_of(ranges: list[list[int]]) -> re.Pattern[str]:
    """A compiled pattern matching one character in `ranges`. Python's `re` tests a class holding
    any code point past U+FFFF range by range (hundreds of ranges: ~0.4 µs a character); a class of
    the BMP alone becomes a bitmap (one lookup). So: the BMP part as a bitmap, and for a character
    past U+FFFF — one comparison rules the rest out — the check against its own ranges, after it.
    The same characters match (tests compare every code point); a 600-character notice is scanned
    ~24x faster."""
    bmp = [[a, min(b, 0xFFFF)] for a, b in ranges if a <= 0xFFFF]
    astral = [[max(a, 0x10000), b] for a, b in ranges if b > 0xFFFF]
    pattern = _chars(bmp) if bmp else "(?!)"
    if astral:
        pattern += f"|[\U00010000-\U0010ffff](?<={_chars(astral)})"
    return re.compile(pattern)


# One pass of a compiled pattern finds every hidden character (a per-character Python loop is ~50x
# slower on long bodies). The classes are built from the rules above on first use, in one scan of
# the code space (~0.15 s, once per process), so they always match this Python's Unicode database.
@functools.cache
def _classes() -> tuple[re.Pattern[str], re.Pattern[str]]:
    hidden: list[list[int]] = []
    refused: list[list[int]] = []

    symbols: list[list[int]] = []  # symbols and punctuation: the bases of an emoji's presentation
    category = unicodedata.category
    for code in range(0x110000):
        # The same decisions as is_hidden / refused_in_identifier, inlined: this loop runs 1.1M times.
        cat = category(chr(code))
        if cat in _HIDDEN_CATEGORIES or code in _BLANK_LOOKING or _is_variation_selector(code):
            add_code(refused, code)
            if code not in (0x09, 0x0A, 0xFE0E, 0xFE0F):
                add_code(hidden, code)
        elif cat == "Zs" and code != 0x20:
            add_code(refused, code)
        elif cat[0] in "SP":
            add_code(symbols, code)

    # U+FE0E/FE0F: hidden unless right after a symbol or punctuation mark (an emoji's presentation),
    # or after a digit and before U+20E3 (a keycap). After another selector (a run of them), after a
    # letter, a space or nothing, they are hidden like every other variation selector.
    # The selector is matched first and what precedes it looked at after (a lookbehind of two
    # characters): a lookbehind tried at every position of a text cost ~0.35 µs a character.
    emoji_form = (
        # not after a symbol, punctuation or digit
        f"|[\ufe0e\ufe0f](?<!{_chars(symbols)}[\ufe0e\ufe0f])(?<![0-9][\ufe0e\ufe0f])"
        "|[\ufe0e\ufe0f](?<=[0-9][\ufe0e\ufe0f])(?!\u20e3)"  # after a digit, but no keycap follows
    )
    hidden_pattern = class_of(hidden)
    return re.compile(hidden_pattern.pattern + emoji_form), class_of(refused)


def hidden_re() -> re.Pattern[str]:
    """The compiled class of hidden characters (free-text rule)."""
    return _classes()[0]


def refused_re() -> re.Pattern[str]:
    """The compiled class of characters an identifier refuses (`refused_in_identifier`)."""
    return _classes()[1]
