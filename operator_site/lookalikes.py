"""Names that read as one another: the fold that finds them.

The door refuses a new name that is not in its plain form (NFKC) or holds a word mixing scripts
(`operator_site.display`, "identifiers"). Two things get past that rule, and this module is how
they are caught where it matters — where a name must pick out one thing:

- a whole word in another script: "pay" written with three Cyrillic letters (U+0440, U+0430,
  U+0443) is one script, so the door takes it, and it reads as "pay";
- a plain name next to a look-alike stored before the rule: "employer" is plain, but a key
  "employer" with a Cyrillic "e" (U+0435) may already be stored.

`fold(text)` is what a name reads as: its plain form (NFKC), each character that reads as a printable
ASCII character replaced by it (Unicode's confusables, UTS #39: `lookalike_table.READS_AS`, written
by scripts/make_lookalikes.py), in lower case, with whitespace collapsed. Two names with the same fold
read the same to the person, though they are different names to the database.

What it does not fold, on purpose: ASCII characters into one another ("l" and "1", "O" and "0",
"rn" and "m"): "fall" and "fail" must stay two names; and a character into more than one
(confusables that read as two letters). A fold is compared, never stored as the name.

Who uses it: a belief's key on add is refused when an active belief of its kind has a different key
with the same fold (`beliefs.services`, `looks_like_existing`; the fold is stored in
`Belief.key_alike` so the write's one snapshot statement finds it); a goal, priority or project named
by title matches every item whose title folds the same, so a look-alike twin makes the name
ambiguous rather than silently the other one (`goals.goal_model.state.resolve`); an agent's revert
may not bring a belief back beside one whose key folds the same (`beliefs.services`).

Rules that look for words in free text read it with `as_seen` (hidden characters dropped, Latin
letters bare — `undecorated`: accents, strokes and hooks off, small capitals and circled capitals as
plain letters — then `read`: the fold's letters, case and spacing kept): the gate's credential
types and secret patterns (`intents.gate`), and a directive's topic in a notice
(`intents.directives`). Names are never read bare: "café" and "cafe" stay two names.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from operator_site.hidden import add_code, class_of, hidden_re
from operator_site.lookalike_table import READS_AS

_TO_ASCII: dict[int, str] = READS_AS  # str.translate's table: code point -> text


def read(text: str | None) -> str:
    """Text as it reads, case and spacing kept: its plain form (NFKC), each character that reads as a
    printable ASCII character replaced by it. For a rule that looks for words in free text (the
    gate's secret patterns), which must find them however they are spelled."""
    if not text:
        return ""
    if text.isascii():
        return text
    plain = unicodedata.normalize("NFKC", text)
    # NFKC again: a Cyrillic "e" with U+0301 read as "e" composes to "\u00e9", as a Latin one does.
    return unicodedata.normalize("NFKC", plain.translate(_TO_ASCII))


def as_seen(text: str | None) -> str:
    """What free text reads as to the person, case kept: its hidden characters dropped (shown as
    tokens, they split no word the person reads: "pass" + U+200B + "word" is "password"), its
    decorated Latin letters read bare (`undecorated`: "ṕ", "p" + U+0336, "ᵽ", "ᴘ" and "🅟" all
    show a p), and each look-alike character read as the ASCII one it shows (`read`). For rules
    that look for words — the gate (`intents.gate`), a directive's topic (`intents.directives`) —
    never for what is stored or shown."""
    visible = hidden_re().sub("", text or "")
    if visible.isascii():
        return visible
    return read(undecorated(unicodedata.normalize("NFKC", visible)))


# A Latin letter the person reads as the plain one its name says, whatever decorates it: a stroke,
# hook, tail, bar or curl Unicode does not take apart ("ᵽ" LATIN SMALL LETTER P WITH STROKE, "ø"),
# a small capital ("ᴘ" LATIN LETTER SMALL CAPITAL P: a lower-case letter, Unicode's category Ll, as
# the confusables read the ones they list) and an enclosed letter NFKC leaves as it is ("🅟"
# NEGATIVE CIRCLED LATIN CAPITAL LETTER P). Where the confusables read a letter otherwise (U+028B
# LATIN SMALL LETTER V WITH HOOK, as "u"), their reading stands: it is how the letter looks.
_DECORATED_LETTER = re.compile(
    r"(?:NEGATIVE (?:CIRCLED|SQUARED) )?LATIN "
    r"(?:(?P<case>SMALL|CAPITAL) LETTER|LETTER SMALL CAPITAL|SMALL CAPITAL LETTER) (?P<letter>[A-Z])"
    r"(?: WITH .+)?"
)
# Where such letters are: Latin-1 to IPA, the phonetic extensions, Latin Extended Additional, C, D
# and E, Latin Extended-F and G, the enclosed alphanumerics' supplement.
_LATIN_BLOCKS = (
    (0x00C0, 0x02AF),
    (0x1D00, 0x1DBF),
    (0x1E00, 0x1EFF),
    (0x2C60, 0x2C7F),
    (0xA720, 0xA7FF),
    (0xAB30, 0xAB6F),
    (0x10780, 0x107BF),
    (0x1DF00, 0x1DFFF),
    (0x1F100, 0x1F1FF),
)


@functools.cache
def _bare_reading() -> tuple[dict[int, str], re.Pattern[str]]:
    """The table of decorated Latin letters (each to its plain letter) with the fold's look-alike
    table over it, and the pattern of combining marks (categories Mn and Me) following an ASCII
    character. Built on first use from this Python's Unicode database (a scan of the first two
    planes, ~25 ms once per process), as `operator_site.hidden` builds its classes. Past those
    planes the only marks are variation selectors, which `as_seen` has dropped as hidden."""
    letters: dict[int, str] = {}
    for first, last in _LATIN_BLOCKS:
        for code in range(first, last + 1):
            named = _DECORATED_LETTER.fullmatch(unicodedata.name(chr(code), ""))
            if named and unicodedata.normalize("NFKC", chr(code)) == chr(code):
                letter = named["letter"]
                letters[code] = letter if named["case"] == "CAPITAL" else letter.lower()
    marks: list[list[int]] = []
    category = unicodedata.category
    for code in range(0x20000):
        if category(chr(code)) in ("Mn", "Me"):
            add_code(marks, code)
    return {**letters, **_TO_ASCII}, re.compile(f"(?<=[\x00-\x7f])(?:{class_of(marks).pattern})+")


def undecorated(text: str) -> str:
    """`text` with its Latin letters bare, for rules that look for words (`as_seen`): each letter
    taken apart from its accents (NFD), a decorated letter Unicode does not take apart read as its
    plain letter (`_DECORATED_LETTER`), a look-alike letter as the ASCII one it shows (the fold's
    table), and the combining marks on an ASCII character dropped: "ṕássword", "p̶a̶s̶s̶w̶o̶r̶d̶",
    "ᵽassword" and "ᴘᴀꜱꜱᴡᴏʀᴅ" read as "password". Marks on any other letter stay: they make the
    words of other scripts ("किताब")."""
    letters, marks_on_ascii = _bare_reading()
    bare = unicodedata.normalize("NFD", text).translate(letters)
    return unicodedata.normalize("NFC", marks_on_ascii.sub("", bare))


def fold(text: str | None) -> str:
    """What a name reads as (see the module docstring); equal folds read the same."""
    if not text:
        return ""
    if text.isascii():
        return " ".join(text.lower().split())
    # Lower case, not case folding: "straße" and "strasse" do not read the same.
    return " ".join(unicodedata.normalize("NFKC", read(text).lower()).split())


def reads_as(text: str) -> list[tuple[str, str]]:
    """The characters of `text` that read as another (each once, in order), with what they read as:
    [("\u0440", "p"), ...]. For a refusal that must show why two names read the same."""
    seen: dict[str, str] = {}
    for ch in text:
        plain = unicodedata.normalize("NFKC", ch)
        read = plain.translate(_TO_ASCII)
        if read != ch and ch not in seen:
            seen[ch] = read
    return list(seen.items())
