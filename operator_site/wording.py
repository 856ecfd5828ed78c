"""How the evidence rules read the person's words: normalising, cutting a text into sentences and
words, and the word lists the rules use. Data and pure functions only; the rules themselves are in
`operator_site.evidence`, and docs/world-model.md explains both with examples.

The rules are lexical and English only: they do not parse grammar. Every list below errs on the
side of refusing (a refused honest change can always be proposed to the person instead).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
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
        # Apostrophe look-alikes: without this, NFKC turns the acute accent (U+00B4) into a
        # combining mark and "don't" written with it into two words, hiding the negation.
        "\u00b4": "'",
        "`": "'",
        "\u02b9": "'",
        "\u02bb": "'",
        "\u02bd": "'",
        "\u055a": "'",
        "\u2035": "'",
        "\ua78c": "'",
        "\uff40": "'",
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
_HEADING = re.compile(r"^#{1,6}(?:\s|$)")
ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "e.g", "i.e", "approx"})


# Dropped before words are read: invisible format characters (soft hyphen, zero-width joiners and
# spaces, bidirectional controls: "Ne\u00adver" is "never") and combining marks ("névér" is "never").
_DROPPED_CATEGORIES = frozenset({"Cf", "Mn", "Me"})


def _visible(text: str) -> str:
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFD", text)
    kept = "".join(c for c in decomposed if unicodedata.category(c) not in _DROPPED_CATEGORIES)
    return unicodedata.normalize("NFC", kept)


def normalise(text: str) -> str:
    """NFKC, typographic quotes/apostrophes/dashes straightened, invisible characters and combining
    marks dropped, case folded, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text.translate(_SAME_WIDTH)).translate(_SAME_WIDTH)
    folded = _visible(folded).casefold()
    return " ".join(folded.split())


def words(text: str) -> tuple[str, ...]:
    """The words of a text, normalised: letters and digits, with inner apostrophes ("don't")."""
    return tuple(_WORD.findall(normalise(text)))


# --- scripts -----------------------------------------------------------------------------------------
# The ONE place that decides whether a word mixes scripts: the evidence rules refuse such a word in the
# person's words (`confirmation_unreadable`: "never" written with a Cyrillic "e" hides a negation), and
# the door refuses it in a new identifier (`operator_site.display.identifier_problem`: a belief key
# "tone" written with a Cyrillic "o" is a second belief that reads as the first). Python's unicodedata
# has no script property; a character's name starts with its script ("CYRILLIC SMALL LETTER O"), and
# these names say the same script another way.
_SCRIPT_OF_NAME = {
    "CJK": "HAN",  # CJK UNIFIED IDEOGRAPH-6F22
    "IDEOGRAPHIC": "HAN",  # the iteration mark 々 and closing mark 〆
    "KATAKANA-HIRAGANA": "KATAKANA",  # the prolonged sound mark ー, written with either kana
    "HENTAIGANA": "HIRAGANA",
    "MASU": "HIRAGANA",
    "ARABIC-INDIC": "ARABIC",  # ARABIC-INDIC DIGIT ONE
    "EXTENDED": "ARABIC",  # EXTENDED ARABIC-INDIC DIGIT ONE (Persian, Urdu)
}
# Scripts that one word may combine, as the languages that write them do (Unicode TR39's "highly
# restrictive" sets, less Latin): Japanese writes Han, Hiragana and Katakana in one word (漢字かな,
# 食べ物, コーヒー), Chinese annotates Han with Bopomofo, Korean mixes Han and Hangul. Not with Latin,
# which TR39 allows: ideographs such as U+4E28 (a vertical stroke), U+4E00 (a dash) and U+5DE5 read as
# "l", "-" and "I" inside a Latin word. (A Latin letter before a kana word is a word of its own when a
# hyphen or a space separates them.)
_WRITTEN_TOGETHER = (
    frozenset({"HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"HAN", "BOPOMOFO"}),
    frozenset({"HAN", "HANGUL"}),
)


def script(char: str) -> str | None:
    """The script of a letter, or of a digit or number other than 0-9, by its Unicode name ("LATIN",
    "CYRILLIC", "GREEK", "HAN", "DEVANAGARI", ...); None for anything else — the digits 0-9,
    punctuation, symbols, marks and spaces belong to no script. (A Bengali zero, U+09E6, or the
    ideographic zero, U+3007, does: "not" written with either for the "o" is a look-alike.)"""
    if char.isascii():
        return "LATIN" if char.isalpha() else None
    if not (char.isalpha() or char.isnumeric()):
        return None
    name = unicodedata.name(char, "")
    if not name:
        return "UNKNOWN"
    first = name.split(" ", 1)[0]
    return _SCRIPT_OF_NAME.get(first, first)


def written_together(scripts: set[str] | frozenset[str]) -> bool:
    """Do these scripts make one word as a language writes it: one script alone, or a combination
    the languages that use them write in one word (Japanese kanji with kana, ...)?"""
    return len(scripts) <= 1 or any(scripts <= together for together in _WRITTEN_TOGETHER)


def mixes_scripts(word: str) -> bool:
    """Does this word hold letters (or digits) of scripts no language writes in one word — Latin with
    Cyrillic, Latin with Greek, Cyrillic with Greek, Latin with a Bengali digit?"""
    if word.isascii():
        return False
    return not written_together({s for s in map(script, word) if s is not None})


def mixed_script(found: tuple[str, ...] | list[str]) -> list[str]:
    """The words that mix letters of two scripts ("never" written with a Cyrillic "e"): a look-alike
    letter can hide a negation, so the rules refuse words like these rather than guess what they
    say."""
    return [word for word in found if mixes_scripts(word)]


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
    line: int = 0
    indent: int = 0

    @property
    def intro(self) -> bool:
        return self.terminator == "\n" and self.text.rstrip().endswith(":")

    @property
    def heading(self) -> bool:
        """A markdown heading ("## Never"): it heads everything below it."""
        return bool(_HEADING.match(self.text))

    @property
    def question(self) -> bool:
        """It asks: it ends with a question mark, or holds one anywhere (any script's question mark,
        "﹖", "⁇", "؟", "‽" included), or it is worded as a question without one (`asks_in_words`)."""
        return (
            self.terminator == "?" or any(is_question_mark(c) for c in self.text) or asks_in_words(self.words)
        )

    @cached_property
    def stems(self) -> tuple[str, ...]:
        return tuple(stem(w) for w in self.words)


# A question written without its question mark: an auxiliary verb before its subject ("Do I still
# live in Lisbon", "Is my employer Acme"), or a question word before one ("What is my home city",
# "Where do I live"). An order or a statement starts otherwise ("Do not share it", "Do remember it",
# "My employer is Acme"). Read at the start of the sentence, after a list marker or an interjection.
# fmt: off
_AUXILIARIES = frozenset((
    "do", "does", "did", "is", "are", "am", "was", "were", "can", "could", "would", "will", "should",
    "shall", "have", "has", "had", "may", "might", "must",
))
_SUBJECTS = frozenset((
    "i", "you", "we", "he", "she", "it", "they", "my", "your", "our", "their", "his", "her", "its",
    "this", "that", "these", "those", "the", "a", "an",
))
_QUESTION_WORDS = frozenset(("what", "where", "which", "who", "whom", "whose", "why", "how"))
_OPENERS = frozenset(("so", "and", "but", "ok", "okay", "well", "hey", "oh", "um", "uh", "hmm", "also"))
# fmt: on


def asks_in_words(words: tuple[str, ...]) -> bool:
    """Is a sentence (its words, lower-cased) worded as a question, whatever ends it?"""
    at = 0
    while at < len(words) and words[at] in _OPENERS:
        at += 1
    first, second = (*words[at : at + 2], "", "")[:2]
    if first in _AUXILIARIES and second in _SUBJECTS:
        return True
    return first in _QUESTION_WORDS and second in _AUXILIARIES


@functools.lru_cache(maxsize=4096)
def is_question_mark(char: str) -> bool:
    """Whether a character is a question mark of any script: its NFKC form holds "?" (U+FE56 small,
    U+FF1F full-width, U+2047 double, U+2048 question-exclamation) or its Unicode name says QUESTION
    MARK (U+061F Arabic, U+00BF inverted, U+037E Greek) or INTERROBANG (U+203D)."""
    if char == "?":
        return True
    if char.isascii() or char.isalnum() or char.isspace():
        return False
    if "?" in unicodedata.normalize("NFKC", char):
        return True
    name = unicodedata.name(char, "")
    return "QUESTION MARK" in name or "INTERROBANG" in name


_ABBREVIATION_TOKEN = re.compile(r"([^\W\d_]+(?:\.[^\W\d_]+)*)$")
# Longer than any abbreviation: the only part of the sentence looked at before each full stop, so
# a sentence of thousands of "e.g." or initials is split in linear time, not in quadratic time.
_ABBREVIATION_WINDOW = 2 * max(len(a) for a in ABBREVIATIONS) + 2


def _abbreviation(text: str, start: int, at: int) -> bool:
    """Whether the full stop at `at` ends an abbreviation or an initial (the token just before it)."""
    window = max(start, at - _ABBREVIATION_WINDOW)
    match = _ABBREVIATION_TOKEN.search(text, window, at)
    if not match:
        return False
    if match.start() == window > start and (text[window - 1] == "." or text[window - 1].isalpha()):
        return False  # the token goes on before the window: longer than any abbreviation
    token = match.group(1)
    return token.casefold() in ABBREVIATIONS or (len(token) == 1 and token.isupper())


def _indent(text: str, at: int) -> int:
    """How far the line starting at `at` is indented (a tab counts four)."""
    width = 0
    while at < len(text) and text[at] in " \t":
        width += 4 if text[at] == "\t" else 1
        at += 1
    return width


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
    line = 0
    line_at = 0  # where the current line starts
    indent = _indent(mapped, 0)

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
                    line=line,
                    indent=indent,
                )
            )
            blank = False
        elif terminator == "\n" and out and start == line_at:
            # An empty line (not the rest of a line after its last sentence's mark): what follows
            # starts a new paragraph.
            blank = True
        start = after

    while i < n:
        ch = mapped[i]
        if ch in LINE_BREAKS:
            after = i + 2 if mapped[i : i + 2] == "\r\n" else i + 1
            close(i, after, "\n")
            i = after
            line += 1
            line_at = after
            indent = _indent(mapped, after)
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


def _trails_off(text: str) -> bool:
    """A sentence that does not end its thought: it trails off ("Never..."), or leaves a bracket
    open ("Don't (I repeat: don't!")."""
    body = text.rstrip("\"')]}")
    if body.endswith(("..", "\u2026")):
        return True
    return text.count("(") > text.count(")") or text.count("[") > text.count("]")


def _continues(text: str) -> bool:
    """A sentence that carries on the one before: it does not start with a capital letter ("...
    never! auto-approve", "— auto-approve", "(I mean it)"), or it closes a bracket opened before."""
    if text.count(")") > text.count("(") or text.count("]") > text.count("["):
        return True
    lead = text.lstrip()
    return not lead or not lead[0].isupper()


_EMPHASIS_TEXT = """ever and i mean it repeat said say really seriously absolutely definitely just please
    oh again do does that this so"""
_EMPHASIS = frozenset(_EMPHASIS_TEXT.split())


def bare_negation(sentence: Sentence) -> bool:
    """A sentence that only negates ("No!", "Don't!", "Never, ever."): it says no to its
    neighbour."""
    found = negations_in(sentence.words)
    said = {at for at, _ in found}
    return bool(found) and all(
        i in said or w in _EMPHASIS or is_negation(w) for i, w in enumerate(sentence.words)
    )


_INSISTING_TEXT = "ever i mean it repeat really seriously absolutely definitely"
_INSISTING = frozenset(_INSISTING_TEXT.split())


def interjection(sentence: Sentence) -> bool:
    """A sentence that only negates or insists ("No!", "Don't!", "Ever.", "I mean it!"): it belongs
    to its neighbour."""
    if bare_negation(sentence):
        return True
    return all(w in _INSISTING for w in sentence.words)


def context_of(sentences: list[Sentence], first: int, last: int) -> list[Sentence]:
    """The sentences `first..last` plus what runs on into them, where a negation, hedge, condition or
    question also counts:

    - a neighbour joined by a bare line break (no sentence mark before it, and no list marker or
      blank line after it): "Do not" on one line and "set my city to X" on the next is one sentence;
    - a neighbour the sentence carries on from or into: after a ``;``, a trailing "..." or an open
      bracket, or before a sentence that does not start with a capital ("Never — and I mean never!
      — auto-approve payments" is one sentence to these rules);
    - a neighbour of negations and emphasis only ("No!", "Don't!", "Ever.", "I mean it.");
    - for a list item: every enclosing item above it (nested lists) and the line that introduces the
      list, whatever it ends with and across blank lines ("Never do these:", "## Don'ts");
    - the nearest line ending in a colon above it (across one blank line), and the nearest
      markdown heading above it."""

    def joined(before: Sentence, after: Sentence) -> bool:
        new_line = after.line != before.line
        if after.blank_before or (new_line and after.bullet):
            return False
        if before.terminator == "\n" or before.terminator == ";":
            return True
        if _trails_off(before.text) or _continues(after.text):
            return True
        # A sentence of its own (not a line running on) that only negates or insists.
        return any(interjection(s) and s.terminator != "\n" for s in (before, after))

    def run_back(k: int) -> set[int]:
        """Sentence `k` and those joined before it."""
        out = {k}
        while k > 0 and joined(sentences[k - 1], sentences[k]):
            k -= 1
            out.add(k)
        return out

    lo, hi = first, last
    while lo > 0 and joined(sentences[lo - 1], sentences[lo]):
        lo -= 1
    while hi + 1 < len(sentences) and joined(sentences[hi], sentences[hi + 1]):
        hi += 1
    picked = set(range(lo, hi + 1))
    # The nearest introducing line above (the line just above a blank line included).
    k = lo - 1
    while k >= 0:
        if sentences[k].intro:
            picked |= run_back(k)
            break
        if sentences[k + 1].blank_before:
            break
        k -= 1
    # A list item: its enclosing items and the line introducing the list.
    head = sentences[lo]
    line_start = lo
    while line_start > 0 and sentences[line_start - 1].line == head.line:
        line_start -= 1
    if sentences[line_start].bullet:
        level = sentences[line_start].indent
        k = line_start - 1
        while k >= 0:
            here = sentences[k]
            begin = k
            while begin > 0 and sentences[begin - 1].line == here.line:
                begin -= 1
            line = set(range(begin, k + 1))
            if sentences[begin].bullet:
                if here.indent < level:
                    picked |= line
                    level = here.indent
            elif here.indent <= level:
                for j in line:
                    picked |= run_back(j)
                break
            k = begin - 1
    # The nearest heading above.
    for k in range(lo - 1, -1, -1):
        if sentences[k].heading:
            picked.add(k)
            break
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
# Words (and phrases) that negate, deny or put a statement in the past. Also every word holding
# "n't" ("don't", "don'ts").
_NEGATION_TEXT = """not no never nor neither none nobody nothing nowhere without cannot
    stop stops stopped stopping dont doesnt didnt wont cant isnt arent wasnt werent shouldnt
    wouldnt couldnt mustnt hasnt havent
    hadnt aint neednt avoid avoids avoiding refuse refuses forbid forbids forbidden prohibit prohibited
    ban banned prevent disallow reject deny denied decline against ignore disregard fake false wrong
    untrue incorrect mistaken mistake bogus scam lie lies lying formerly previously former anymore
    quit quits quitting cease ceases ceased ceasing refrain refrains refraining halt halts halted
    halting discontinue discontinues discontinued abstain abstains forgo forgoes forego skip skips
    omit omits exclude excludes excluding nope nah neer ne'er nevermore hardly barely seldom rarely
    donts taboo kidding joking jk sarcasm sarcastic nein nicht nunca jamais niet"""
NEGATIONS = frozenset(_NEGATION_TEXT.split())
_SPLIT_CONTRACTIONS = (
    "don doesn didn won can isn aren wasn weren shouldn wouldn couldn mustn hasn haven hadn ain needn"
)


class Phrases(tuple[tuple[str, ...], ...]):
    """A fixed list of phrases (word sequences), found in a sentence's words in one pass: each
    phrase is indexed by its first word. Looking for each phrase in turn made a lookup cost
    phrases x sentences slices: a quoted line in a block of 10,000 run-on lines was checked against
    130 hedges, conditions and reports one phrase at a time, 1.3 million searches (2 s)."""

    @cached_property
    def _starting(self) -> dict[str, list[tuple[int, tuple[str, ...]]]]:
        index: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
        for rank, phrase in enumerate(self):
            index.setdefault(phrase[0], []).append((rank, phrase))
        return index

    def occurrences(self, words: tuple[str, ...]) -> list[tuple[int, tuple[str, ...]]]:
        """(position, phrase) of every occurrence, by position (phrases at one position in list
        order)."""
        starting = self._starting
        return [
            (i, phrase)
            for i, word in enumerate(words)
            for _, phrase in starting.get(word, ())
            if words[i : i + len(phrase)] == phrase
        ]

    def first(
        self, words: tuple[str, ...], keep: Callable[[int, tuple[str, ...]], bool] | None = None
    ) -> tuple[str, ...] | None:
        """The first phrase of the list (not of the sentence) that occurs in `words` — where `keep`
        is given, at a position it keeps — or None."""
        best: tuple[int, tuple[str, ...]] | None = None
        starting = self._starting
        for i, word in enumerate(words):
            for rank, phrase in starting.get(word, ()):
                if best is not None and rank >= best[0]:
                    continue
                if words[i : i + len(phrase)] == phrase and (keep is None or keep(i, phrase)):
                    best = (rank, phrase)
        return None if best is None else best[1]


NEGATION_PHRASES = Phrases(
    (
        ("used", "to"),
        ("any", "more"),
        ("no", "more"),
        ("off", "limits"),
        ("no", "go"),
        # A contraction split by a space or a dropped apostrophe look-alike: "don t".
        *((stem_, "t") for stem_ in _SPLIT_CONTRACTIONS.split()),
    )
)
# A hedge or a question in words: the person is wondering, not deciding.
HEDGES = Phrases(
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
        "may be",
        "may well",
        "may become",
        "may have",
        "could be",
        "could become",
        "could have",
        "likely",
        "unlikely",
        "hopefully",
        "i hope",
        "hoping",
        "i believe",
        "i feel",
        "i expect",
        "i assume",
        "i reckon",
        "i imagine",
        "presumably",
        "supposedly",
        "apparently",
        "potentially",
        "tentatively",
        "seems",
        "seem",
        "uncertain",
        "not certain",
        "unclear",
        "not decided",
        "undecided",
        "or not",
    )
)
# Someone else's words reported, or a joke: the person is not deciding either.
REPORTED = Phrases(
    tuple(p.split())
    for p in (
        "said",
        "says",
        "saying",
        "claims",
        "claimed",
        "claiming",
        "according to",
        "told me",
        "tells me",
        "wrote",
        "writes",
        "texted",
        "emailed",
        "messaged",
        "reportedly",
        "allegedly",
        "rumour",
        "rumor",
        "heard",
    )
)
_SARCASM = re.compile(r"(?:^|\s)/s(?:\W|$)|/sarcasm\b", re.IGNORECASE)


def sarcastic(text: str) -> bool:
    """A sentence marked as sarcasm ("... /s")."""
    return bool(_SARCASM.search(text))


# A condition: the change holds only if something else does.
CONDITIONS = Phrases(
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
        "once",
        "when",
        "whenever",
        "as soon as",
        "as long as",
        "so long as",
        "only after",
        "after the",
        "in the event",
        "event that",
        "otherwise",
        "on condition",
        "given that",
        "depending",
        "depends",
        "subject to",
        "pending",
        "upon",
    )
)
# "once" that counts rather than conditions, where nothing can hang a condition on it: "once again",
# and inside a sentence "at once", "once a week", "once per month", "once every two weeks", "once
# daily", at its end or before "on", "at", "in", ... ("I call my mother once a week on Sundays").
# Opening a sentence, "once a week" counts only when the sentence's subject follows it, a pronoun or
# a possessive ("Once a week, I fast"; "Once a month my sister visits"): a condition would need a verb
# there ("Once a week passes, ..."). Anything else is a condition: "Once the offer comes through",
# "Once every debt is paid", "Once a week passes, ...", "... Berlin once a month is over", and any
# other "once" that opens a sentence but "Once again" (fail closed: "Once a week the rent is due" is
# refused, since "the" may open the condition's subject).
_TIMES = frozenset(
    {
        *("hour", "day", "night", "morning", "evening", "week", "weekend", "fortnight", "month"),
        *("quarter", "season", "term", "semester", "year", "decade", "lifetime"),
    }
)
_HOW_OFTEN = frozenset(
    {"hourly", "daily", "nightly", "weekly", "fortnightly", "monthly", "quarterly", "yearly", "annually"}
)
_HOW_MANY = frozenset(
    {*("two", "three", "four", "five", "six", "seven", "eight"), *("nine", "ten", "twelve", "few", "other")}
)
_THEN = frozenset({"", "on", "at", "in", "for", "with", "and", "or", "but"})  # "": the sentence ends
_SUBJECTS = frozenset({"i", "we", "you", "he", "she", "they", "my", "our", "your", "his", "her", "their"})


def _is_time(word: str) -> bool:
    return word in _TIMES or (word.endswith("s") and word[:-1] in _TIMES)


def _once_counts(words: tuple[str, ...], i: int) -> bool:
    """Does the "once" at `i` say how often (or "at once", "once again"), not on what condition?"""
    after = (*words[i + 1 : i + 5], "", "", "", "")
    if after[0] == "again":
        return True
    if i > 0 and words[i - 1] == "at":  # "at once", unless a clause follows ("... at once the loan clears")
        return after[0] in _THEN
    if after[0] in _HOW_OFTEN:
        length = 1
    elif after[0] in ("a", "an", "per", "each", "every") and _is_time(after[1]):
        length = 2
    elif after[0] == "every" and (after[1].isdigit() or after[1] in _HOW_MANY) and _is_time(after[2]):
        length = 3
    else:
        return False
    return after[length] in (_SUBJECTS if i == 0 else _THEN)


def condition_in(words: tuple[str, ...]) -> str | None:
    """The first phrase of `CONDITIONS` in a sentence's words, or None; a "once" that says how often
    (`_once_counts`) is no condition."""
    found = CONDITIONS.first(words, keep=lambda i, phrase: phrase != ("once",) or not _once_counts(words, i))
    return None if found is None else " ".join(found)


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
            "start again",
            "started again",
            "going again",
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


def is_negation(word: str) -> bool:
    """A word that negates: in `NEGATIONS`, or holding "n't"."""
    return word in NEGATIONS or "n't" in word


def negations_in(found: tuple[str, ...]) -> list[tuple[int, str]]:
    """(position, word) of every negating word or phrase in a word sequence."""
    out = [(i, w) for i, w in enumerate(found) if is_negation(w)]
    out += [(i, " ".join(phrase)) for i, phrase in NEGATION_PHRASES.occurrences(found)]
    return sorted(out)


def is_significant(word: str) -> bool:
    """A word that names something: three letters or more, not a stopword, and not a negation (a
    negation is the polarity rule's business, not the binding's)."""
    return len(word) >= 3 and word not in STOPWORDS and not is_negation(word)


def significant_words(text: str) -> list[str]:
    """The significant words of a text, in order, once each."""
    return list(dict.fromkeys(w for w in words(text) if is_significant(w)))


# Short or common words that still change what a value says: its quantity and scope ("all
# payments" is not "payments to my landlord").
_SCOPE_TEXT = """all any every each both some few more most less least only other others everything
    everyone everybody anything anyone anybody always"""
SCOPE_WORDS = frozenset(_SCOPE_TEXT.split())


def value_words(text: str) -> list[str]:
    """The words of a new value that must be in the sentence that authorises it, in order, once
    each: every word that is not a stopword or a negation, however short ("NY", "20", "5k"), and
    its words of quantity or scope (`SCOPE_WORDS`: "all", "any", "only"...). A value with none of
    these needs all its words ("they them")."""
    found = words(text)
    picked = [w for w in found if (w not in STOPWORDS and not is_negation(w)) or w in SCOPE_WORDS]
    picked = picked or [w for w in found if not is_negation(w)]
    return list(dict.fromkeys(picked))


# What cuts a sentence into clauses, for the rules that tie a cue word to what it is about:
# punctuation inside it, and these joining words.
_CLAUSE_BREAK = re.compile(r"[,;:()\[\]{}!?.\u2026]|\s-+\s|--")
_CLAUSE_TEXT = (
    "and but or nor yet while whereas although though however except instead then plus also meanwhile"
)
CLAUSE_WORDS = frozenset(_CLAUSE_TEXT.split())


def clauses(text: str) -> tuple[int, ...]:
    """The clause number of each of a text's words (aligned with `words(text)`); a joining word
    (`CLAUSE_WORDS`) starts the next clause. "Drop the gym membership but keep running the
    marathon": "drop", "gym" and "membership" are clause 0, the rest clause 1."""
    normal = normalise(text)
    out: list[int] = []
    clause = 0
    previous_end = 0
    for found in _WORD.finditer(normal):
        if out and _CLAUSE_BREAK.search(normal, previous_end, found.start()):
            clause += 1
        if found.group() in CLAUSE_WORDS and out:
            clause += 1
        out.append(clause)
        previous_end = found.end()
    return tuple(out)


def negated(
    found: tuple[str, ...], clause: tuple[int, ...], skip: frozenset[int] = frozenset()
) -> list[bool]:
    """For each word, whether a negation reaches it: every word after a negating word or phrase to
    the end of its clause, and on into the next clauses while what it reached names nothing ("Never,
    ever, share my address" negates "share my address"; "Never X, always Y" negates X, not Y).
    Negations starting at a position in `skip` (a negative cue like "no longer") are not counted."""
    starts = {at for at, _ in negations_in(found) if at not in skip}
    out = [False] * len(found)
    active = named = False
    for i, w in enumerate(found):
        if i > 0 and clause[i] != clause[i - 1] and active and named:
            active = False
        if i in starts:
            active, named = True, False
            continue
        out[i] = active
        if active and w not in _EMPHASIS and (is_significant(w) or any(c.isdigit() for c in w)):
            named = True
    return out


# Words that say to keep something as it is: next to the target they contradict a removal, a
# retirement or a pause ("Drop the gym membership but keep running the marathon").
_KEEP_TEXT = """keep keeps keeping kept retain retains retaining maintain maintains stay stays still
    continue continues continuing preserve preserves leave"""
KEEP_WORDS = frozenset(_KEEP_TEXT.split())
# Which way a re-rank goes, for a sentence that names no position.
RANK_UP: tuple[tuple[str, ...], ...] = tuple(
    tuple(p.split())
    for p in (
        "higher",
        "up",
        "raise",
        "promote",
        "ahead",
        "above",
        "before",
        "more important",
        "prioritise",
        "prioritize",
        "first",
        "top",
    )
)
RANK_DOWN: tuple[tuple[str, ...], ...] = tuple(
    tuple(p.split())
    for p in (
        "lower",
        "down",
        "demote",
        "behind",
        "below",
        "after",
        "less important",
        "deprioritise",
        "deprioritize",
        "last",
        "bottom",
    )
)


def key_words(key: str) -> list[str]:
    """The significant words of a key: split at ``_ - . /``, spaces and camelCase."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", key)
    spaced = re.sub(r"[_\-./]+", " ", spaced)
    return significant_words(spaced)


def _dice(mine: Counter[str], theirs: Counter[str]) -> float:
    total = sum(mine.values()) + sum(theirs.values())
    return 2 * sum((mine & theirs).values()) / total if total else 1.0


def _pairs(text: str) -> Counter[str]:
    return Counter(text[i : i + 2] for i in range(len(text) - 1))


def close_matches(wanted: str, options: Iterable[str], *, n: int = 5, cutoff: float = 0.5) -> list[str]:
    """The options most like `wanted` ("did you mean"): at most `n`, each at least `cutoff` alike,
    the closest first (ties in the options' order). Alike is the mean of two Dice coefficients, of
    the texts' letters and of their pairs of letters ("scope" and "scrape": 0.73 and 0.44; "garden"
    and "pond": 0.4 and 0), computed in time linear in the texts. difflib's ratio, used before and
    close to this on names, is quadratic on repetitive text: 500 belief keys of 120 "a"s and "b"s
    took 1.2 s to compare with one missing key (check 26). To compare many names with the same
    options, build a `Likeness` once."""
    return Likeness(options).closest(wanted, n=n, cutoff=cutoff)


class Likeness:
    """Options prepared once (their letters and pairs of letters counted) for `close_matches`
    against many wanted names: a call naming 50 missing targets among 2,000 goal-model items
    counted each item's letters 50 times."""

    def __init__(self, options: Iterable[str]) -> None:
        self.options = [(option, Counter(option), _pairs(option)) for option in options]

    def plus(self, more: Iterable[str]) -> Likeness:
        """These options and then `more` (those not among them already), the counts reused."""
        have = {option for option, _, _ in self.options}
        out = Likeness(())
        added = [(o, Counter(o), _pairs(o)) for o in dict.fromkeys(more) if o not in have]
        out.options = self.options + added
        return out

    def closest(self, wanted: str, *, n: int = 5, cutoff: float = 0.5) -> list[str]:
        letters, pairs = Counter(wanted), _pairs(wanted)
        scored = []
        for at, (option, their_letters, their_pairs) in enumerate(self.options):
            by_letters = _dice(letters, their_letters)
            # A text of one letter has no pair: its letters alone decide.
            by_pairs = _dice(pairs, their_pairs) if pairs or their_pairs else by_letters
            alike = (by_letters + by_pairs) / 2
            if alike >= cutoff:
                scored.append((-alike, at, option))
        return [option for _, _, option in sorted(scored)[:n]]
