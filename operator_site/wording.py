"""How the evidence rules read the person's words: normalising, cutting a text into sentences and
words, and the word lists the rules use. Data and pure functions only; the rules themselves are in
`operator_site.evidence`, and docs/world-model.md explains both with examples.

The rules are lexical and English only: they do not parse grammar. Every list below errs on the
side of refusing (a refused honest change can always be proposed to the person instead).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cached_property

# --- normalising -----------------------------------------------------------------------------------
# One character for one character, so offsets found on the mapped text are offsets into the
# original: typographic quotes and apostrophes, dashes, and the full-width and ideographic
# sentence marks.
_SAME_WIDTH = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u02bc": "'",
        "\uff07": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u3002": ".",
        "\uff0e": ".",
        "\uff01": "!",
        "\uff1f": "?",
        "\uff1b": ";",
        "\u037e": ";",  # Greek question mark: NFKC makes it ";"
        "\u00a0": " ",
    }
)
LINE_BREAKS = frozenset("\n\r\v\f\x85\u2028\u2029")
TERMINATORS = frozenset(".!?;")
# What may follow a sentence mark before the space that ends the sentence: `He said "stop."`.
_CLOSERS = frozenset("\"')]}")
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_BULLET = re.compile(r"^\s*(?:[-*+\u2022\u2023\u25e6\u2043]|\d{1,3}[.)])\s+")
# Abbreviations whose full stop does not end a sentence ("Dr. Lee", "e.g. this"); a single
# capital letter is an initial ("J. Smith"). "No." is deliberately not here: "No. Never do that."
ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "e.g", "i.e", "approx"})


def normalise(text: str) -> str:
    """NFKC, typographic quotes/apostrophes/dashes straightened, case folded, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text.translate(_SAME_WIDTH)).translate(_SAME_WIDTH).casefold()
    return " ".join(folded.split())


def words(text: str) -> tuple[str, ...]:
    """The words of a text, normalised: letters and digits, with inner apostrophes ("don't")."""
    return tuple(_WORD.findall(normalise(text)))


_VOWELS = frozenset("aeiouy")


def stem(word: str) -> str:
    """A word's comparable form, by a light and fixed stemming: a possessive, a plural (-s, -es,
    -ies), -ing and -ed are dropped, a doubled final consonant undoubled and a final -e dropped, so
    "learning" and "learn", "paused" and "pause", "cities" and "city" compare equal. Words of three
    letters or fewer are left alone."""
    if word.endswith("'s"):
        word = word[:-2]
    elif word.endswith("s'"):
        word = word[:-1]
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in _VOWELS and word[-1] not in "lsz":
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


# --- sentences -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sentence:
    """One sentence of a text: where it is in the original (`start`, `end`), its words, and how it
    ended: ``.``, ``!``, ``?``, ``;``, ``\\n`` (a bare line break, no mark before it) or ``""`` (the
    end of the text). `bullet`: the line starts with a list marker; `blank_before`: an empty line
    separates it from the sentence before; `intro`: it ends with a colon at a line break (a line
    that introduces what follows, like "Never do these:")."""

    index: int
    start: int
    end: int
    text: str
    words: tuple[str, ...]
    terminator: str
    bullet: bool
    blank_before: bool

    @property
    def intro(self) -> bool:
        return self.terminator == "\n" and self.text.rstrip().endswith(":")

    @cached_property
    def stems(self) -> tuple[str, ...]:
        return tuple(stem(w) for w in self.words)


def _abbreviation(text: str, start: int, at: int) -> bool:
    match = re.search(r"([^\W\d_]+(?:\.[^\W\d_]+)*)$", text[start:at])
    if not match:
        return False
    token = match.group(1)
    return token.casefold() in ABBREVIATIONS or (len(token) == 1 and token.isupper())


def split_sentences(text: str) -> list[Sentence]:
    """Cut a text into sentences: a sentence ends at ``.``, ``!``, ``?`` or ``;`` followed by a space
    or the end (so "4.5" and "example.com" do not end one; nor do "Dr." or "e.g."), and at every
    line break. Pieces without a word are dropped (they only mark a blank line)."""
    mapped = text.translate(_SAME_WIDTH)
    out: list[Sentence] = []
    start = 0
    i = 0
    n = len(mapped)
    blank = False

    def close(end: int, after: int, terminator: str) -> None:
        nonlocal start, blank
        piece = text[start:end]
        found = words(piece)
        if found:
            stripped = piece.strip()
            lead = len(piece) - len(piece.lstrip())
            out.append(
                Sentence(
                    index=len(out),
                    start=start + lead,
                    end=start + lead + len(stripped),
                    text=stripped,
                    words=found,
                    terminator=terminator,
                    bullet=bool(_BULLET.match(piece)),
                    blank_before=blank,
                )
            )
            blank = False
        elif terminator == "\n" and out:
            blank = True  # an empty line: what follows starts a new paragraph
        start = after

    while i < n:
        ch = mapped[i]
        if ch in LINE_BREAKS:
            after = i + 2 if mapped[i : i + 2] == "\r\n" else i + 1
            close(i, after, "\n")
            i = after
            continue
        if ch in TERMINATORS:
            j = i
            while j < n and mapped[j] in TERMINATORS:
                j += 1
            k = j
            while k < n and mapped[k] in _CLOSERS:
                k += 1
            if k == n or mapped[k].isspace():
                run = mapped[i:j]
                if run == "." and _abbreviation(mapped, start, i):
                    i = j
                    continue
                mark = "?" if "?" in run else "!" if "!" in run else ";" if ";" in run else "."
                close(k, k, mark)
                i = k
                continue
            i = j
            continue
        i += 1
    close(n, n, "")
    return out


def context_of(sentences: list[Sentence], first: int, last: int) -> list[Sentence]:
    """The sentences `first..last` plus what runs on into them: a neighbour joined by a bare line
    break (no sentence mark before it, and no list marker or blank line after it), and a line
    ending in a colon that introduces them. Negations, hedges, conditions and questions anywhere
    in this context count: "Do not" on one line and "set my city to X" on the next is one
    sentence to these rules."""

    def joined(before: Sentence, after: Sentence) -> bool:
        return before.terminator == "\n" and not after.bullet and not after.blank_before

    lo, hi = first, last
    while lo > 0 and joined(sentences[lo - 1], sentences[lo]):
        lo -= 1
    while hi + 1 < len(sentences) and joined(sentences[hi], sentences[hi + 1]):
        hi += 1
    picked = set(range(lo, hi + 1))
    # The nearest introducing line above, in the same paragraph.
    k = lo - 1
    while k >= 0 and not sentences[k + 1].blank_before:
        if sentences[k].intro:
            picked.add(k)
            j = k
            while j > 0 and joined(sentences[j - 1], sentences[j]):
                j -= 1
                picked.add(j)
            break
        k -= 1
    return [sentences[i] for i in sorted(picked)]


# --- word lists ------------------------------------------------------------------------------------
# Not significant: a target or value is named by its other words.
_STOPWORD_TEXT = """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i i'm i've i'd i'll if in into is it
    it's its itself just let let's me more most my myself no nor not now of off on once only or other
    our ours ourselves out over own please same she should so some such than that that's the their
    theirs them themselves then there these they this those through to too under until up very was
    we were what when where which while who whom why will with would yes you your yours yourself
    yourselves also okay ok yeah sure thing things want wants like really get got make made use used
    call called set new now from"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
# Words (and phrases) that negate, deny or put a statement in the past. Also every word ending
# in "n't".
_NEGATION_TEXT = """not no never nor neither none nobody nothing nowhere without cannot
    stop stops stopped stopping dont doesnt didnt wont cant isnt arent wasnt werent shouldnt
    wouldnt couldnt mustnt hasnt havent
    hadnt aint neednt avoid avoids avoiding refuse refuses forbid forbids forbidden prohibit prohibited
    ban banned prevent disallow reject deny denied decline against ignore disregard fake false wrong
    untrue incorrect mistaken mistake bogus scam lie lies lying formerly previously former anymore"""
NEGATIONS = frozenset(_NEGATION_TEXT.split())
NEGATION_PHRASES: tuple[tuple[str, ...], ...] = (("used", "to"), ("any", "more"), ("no", "more"))
# A hedge or a question in words: the person is wondering, not deciding.
HEDGES: tuple[tuple[str, ...], ...] = tuple(
    tuple(p.split())
    for p in (
        "maybe",
        "perhaps",
        "possibly",
        "probably",
        "might",
        "not sure",
        "unsure",
        "should we",
        "should i",
        "shall we",
        "could we",
        "what if",
        "what about",
        "how about",
        "i think",
        "i guess",
        "i suppose",
        "i wonder",
        "wondering",
        "considering",
        "thinking about",
        "thinking of",
        "kind of",
        "sort of",
        "do you think",
        "would it",
        "idk",
    )
)
# A condition: the change holds only if something else does.
CONDITIONS: tuple[tuple[str, ...], ...] = tuple(
    tuple(p.split())
    for p in (
        "if",
        "unless",
        "in case",
        "provided",
        "providing",
        "assuming",
        "suppose",
        "supposing",
        "whether",
    )
)
# The words an operation that removes or redirects must be said with. A negative phrase among them
# ("no longer") is the cue itself, not a negation of the change.
_REMOVE = (
    "forget",
    "drop",
    "remove",
    "delete",
    "erase",
    "retire",
    "scrap",
    "cancel",
    "abandon",
    "give up",
    "get rid",
    "throw out",
    "cross off",
    "take off",
    "no longer",
    "anymore",
    "any more",
    "no more",
)
CUES: dict[str, tuple[tuple[str, ...], ...]] = {
    op: tuple(tuple(p.split()) for p in phrases)
    for op, phrases in {
        "retire": _REMOVE,
        "remove": _REMOVE,
        "pause": (
            "pause",
            "paused",
            "on hold",
            "hold off",
            "put aside",
            "set aside",
            "suspend",
            "freeze",
            "take a break",
            "break from",
        ),
        "resume": (
            "resume",
            "resumed",
            "restart",
            "unpause",
            "back on",
            "pick up",
            "continue",
            "reactivate",
            "again",
        ),
        "review": ("review", "reconsider", "rethink", "revisit", "evaluate", "reevaluate", "reassess"),
        "rank": (
            "first",
            "top",
            "priority",
            "prioritise",
            "prioritize",
            "important",
            "importance",
            "rank",
            "rerank",
            "move",
            "order",
            "ahead",
            "higher",
            "lower",
            "second",
            "third",
            "fourth",
            "fifth",
            "last",
            "bottom",
            "number",
        ),
    }.items()
}
# Positions a ranking sentence may name; when it names one, the new rank must be that one (-1: last).
POSITIONS: dict[tuple[str, ...], int] = {
    ("first",): 1,
    ("1st",): 1,
    ("top",): 1,
    ("most", "important"): 1,
    ("number", "one"): 1,
    ("second",): 2,
    ("2nd",): 2,
    ("number", "two"): 2,
    ("third",): 3,
    ("3rd",): 3,
    ("number", "three"): 3,
    ("fourth",): 4,
    ("4th",): 4,
    ("fifth",): 5,
    ("5th",): 5,
    ("last",): -1,
    ("bottom",): -1,
    ("least", "important"): -1,
}


def find_phrase(haystack: tuple[str, ...], phrase: tuple[str, ...]) -> list[int]:
    """Start positions of `phrase` (a word sequence) in `haystack`."""
    n = len(phrase)
    return [i for i in range(len(haystack) - n + 1) if haystack[i : i + n] == phrase]


def find_said(sentence: Sentence, phrase: tuple[str, ...]) -> list[int]:
    """Start positions of `phrase` in a sentence, word forms compared by their stems ("dropping"
    says "drop")."""
    return find_phrase(sentence.stems, tuple(stem(w) for w in phrase))


def negations_in(found: tuple[str, ...]) -> list[tuple[int, str]]:
    """(position, word) of every negating word or phrase in a word sequence."""
    out = [(i, w) for i, w in enumerate(found) if w in NEGATIONS or w.endswith("n't")]
    for phrase in NEGATION_PHRASES:
        out += [(i, " ".join(phrase)) for i in find_phrase(found, phrase)]
    return sorted(out)


def is_significant(word: str) -> bool:
    """A word that names something: three letters or more, not a stopword, and not a negation (a
    negation is the polarity rule's business, not the binding's)."""
    return len(word) >= 3 and word not in STOPWORDS and word not in NEGATIONS and not word.endswith("n't")


def significant_words(text: str) -> list[str]:
    """The words of a value that must be in the sentence that authorises it, in order, once each."""
    return list(dict.fromkeys(w for w in words(text) if is_significant(w)))


def key_words(key: str) -> list[str]:
    """The significant words of a key: split at ``_ - . /``, spaces and camelCase."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", key)
    spaced = re.sub(r"[_\-./]+", " ", spaced)
    return significant_words(spaced)
