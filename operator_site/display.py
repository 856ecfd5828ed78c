"""What the person sees is what is approved: agent-written text, shown so it cannot disguise itself.

An agent can put characters in a string that the person cannot see — controls, bidirectional
overrides and isolates, zero-width characters, fillers that render as nothing — and with them make a
page show something other than what is stored: a right-to-left override inside an IBAN makes the page
display another account than the one Accept approves. This module is the ONE place that knows which
characters those are and how to show them. Everything that puts agent text in front of a person goes
through it:

- **HTML** (admin pages, the approval page, notice and revert pages, the dashboard): the template
  filter ``{{ value|visible }}`` (``{% load operator_display %}``), i.e. `visible_html()`. The text is
  escaped, each hidden character becomes a marked token ``[U+202E]`` (``<span class="op-hidden"
  title="U+202E RIGHT-TO-LEFT OVERRIDE">``), and the whole string is wrapped in ``<bdi>`` so its
  direction cannot reorder the page around it. Line breaks and tabs of free text are kept as layout
  (show them with ``white-space: pre-wrap``).
- **A page that shows any** says so: `operator_site.middleware.VisibleTextMiddleware` puts a banner at
  the top of every HTML page whose body holds a marked token or a hidden character, and marks (as
  plain tokens) any hidden character that reached a page's text without the filter — the admin's own
  list and change views, breadcrumbs — so nothing slips through a template that forgot the filter.
- **Plain text** (emails, webhook summaries): `visible_text()`, the same tokens without markup.
- **Headers** (an email subject, webhook headers): `header_text()` — fixed words plus agent text made
  one line, control-free (every hidden character a token, line breaks a space) and bounded, so no
  content can make a header invalid and a notice undeliverable.
- **Identifiers** (action type, recipient, belief key, titles used as targets, task key, directive
  topic) refuse hidden characters at the door: `Identifier` is a pydantic type for tool arguments,
  `identifier_problem()` the check itself; the refusal (``invalid_arguments``) names the field and the
  character. A new name (an added belief's key, a title on add or rename, a task key, a topic, an
  action type, a recipient) must also be in its plain form (NFKC: no full-width, mathematical,
  circled or superscript letters, no ligatures) with no word mixing scripts (`operator_site.wording`
  decides that, for the evidence rules too): it would be a second name reading as another. A title
  (a goal's, priority's or project's: `TitleIdentifier`, `check_title`) may also hold the typographic
  signs of ordinary writing that NFKC spells out ("½", "m²", "™", "…": `typographic`). A name
  that only finds what exists (`check_target`, `IdOrIdentifier`: a belief's key on update or retire,
  a target or link by title) refuses hidden characters alone, so a row stored before that rule can
  still be reached by its stored name (see "identifiers" below for why refuse, not normalise).

Reuse it for any new surface (the proposals' approval page renders its diff with ``|visible``); do not
write a second copy.

Which characters are hidden (`operator_site.hidden.is_hidden`): every control (Unicode category Cc)
except the line feed and tab of free text, every format character (Cf: the bidi embeddings, overrides,
isolates and marks, zero-width space/joiners, word joiner, BOM, soft hyphen, invisible operators, tag
characters, ...), the line and paragraph separators (Zl, Zp), surrogates, private-use and unassigned
code points, and a list of letters and marks that render as nothing (Hangul fillers, the combining
grapheme joiner, Khmer inherent vowels, Mongolian variation selectors, the braille blank, the Khitan
filler, the musical null notehead). Variation selectors (U+FE00-FE0F, U+E0100-E01EF) are hidden too — a
run of them after one character can carry a whole hidden message — except U+FE0E/FE0F right after a
symbol or a punctuation mark (an emoji's text or picture form, as in ❤️) or after a digit that a keycap
follows (1️⃣): those are shown as they are. Identifiers refuse all of those, plus any line break or tab,
any space other than U+0020, and every variation selector.

**Directions inside an identifier.** Isolation keeps an agent string from reordering the page around
it, not the order inside it: an account number that starts with one visible right-to-left character
(a Hebrew geresh looks like an apostrophe) is laid out right to left, its groups of digits in reverse
order. An identifier that mixes directions — a right-to-left character (bidi class R, AL or AN) and a
character read left to right (L, EN, AN) — is shown with each right-to-left character as a token
(`identifier_text`, `visible_identifier_html`), so what is shown reads in the order it is stored. An
identifier written in one right-to-left script alone is shown as it is. Where the operator's own
words name an identifier — ``identity/`` + a belief's key, ``goal #3 “…”``, a ranking of titles, a
proposal's lines and labels — the text is a `Named`: it spells the same string, and every surface
shows the identifiers in it that way. The admin's own columns and fields of identifiers go through
`operator_site.admin.identifier_column`, and a model's ``__str__`` (a page's title and breadcrumbs)
through `identifier_text`.

**A word that reads as a Latin one.** The door takes a word written wholly in one other script, and
some such words read exactly as a Latin word: "paypal" in six Cyrillic letters, so a recipient
``billing@…paypal….com`` would pass for the Latin address on the page the person approves it on.
In an identifier, each letter of a word whose every letter reads as an ASCII one
(`operator_site.lookalikes.fold`) without being one is shown as a token too, named in its tooltip
("reads as 'p', in a word of another script's letters that reads as the Latin 'paypal'"), and the
page's banner says so. A word with any letter that reads as no Latin one ("москва") is shown as it
is; a Russian word that happens to read as Latin (the word for "ear") is shown as tokens, which
costs its reader, not its safety.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import Annotated, Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from pydantic import BeforeValidator, StrictInt

# wording: the one place that decides what a word mixing scripts is; lookalikes: what a word reads as
from operator_site import lookalikes, wording

# hidden: which characters are hidden (one definition, pure, shared with the gate's reading of text)
from operator_site.hidden import hidden_re, refused_re

# Names the Unicode database does not give (controls), for the tooltip and refusals.
_CONTROL_NAMES = {
    0x00: "NULL",
    0x07: "BELL",
    0x08: "BACKSPACE",
    0x09: "CHARACTER TABULATION",
    0x0A: "LINE FEED",
    0x0B: "LINE TABULATION",
    0x0C: "FORM FEED",
    0x0D: "CARRIAGE RETURN",
    0x1B: "ESCAPE",
    0x7F: "DELETE",
    0x85: "NEXT LINE",
}


def code_point(ch: str) -> str:
    """``U+202E``."""
    return f"U+{ord(ch):04X}"


def char_name(ch: str) -> str:
    """``RIGHT-TO-LEFT OVERRIDE``; a description where Unicode has no name."""
    code = ord(ch)
    if code in _CONTROL_NAMES:
        return _CONTROL_NAMES[code]
    name = unicodedata.name(ch, "")
    if name:
        return name
    category = unicodedata.category(ch)
    return {
        "Cc": "CONTROL",
        "Cs": "SURROGATE",
        "Co": "PRIVATE USE",
        "Cn": "UNASSIGNED",
    }.get(category, category)


def describe_char(ch: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``: how refusals and tooltips name a character."""
    return f"{code_point(ch)} {char_name(ch)}"


def token(ch: str) -> str:
    """The visible stand-in of a hidden character: ``[U+202E]``."""
    return f"[{code_point(ch)}]"


def has_hidden(*texts: str | None) -> bool:
    """Does any of these texts hold a character `visible_text` would mark?"""
    return any(text and hidden_re().search(_normal_newlines(text)) for text in texts)


def hidden_chars(text: str | None) -> list[str]:
    """The distinct hidden characters of a text, in order of first appearance."""
    seen: dict[str, None] = {}
    for match in hidden_re().finditer(_normal_newlines(text or "")):
        seen.setdefault(match.group(), None)
    return list(seen)


def _normal_newlines(text: str) -> str:
    # A CR LF pair is an ordinary line break (forms post them); a lone CR is a hidden control.
    return text.replace("\r\n", "\n")


# --- plain text ---------------------------------------------------------------------------------------
def visible_text(text: Any, *, single_line: bool = False, limit: int | None = None) -> str:
    """Agent text for a plain-text surface (an email body, a webhook summary, a log line): every hidden
    character replaced by its token ``[U+XXXX]``. `single_line` also turns line breaks and tabs into
    spaces; `limit` cuts the result to that many characters (ending in "…"). A `Named` shows its
    identifier as `identifier_text` does."""
    if isinstance(text, Named):
        text = "".join(identifier_text(part) if ident else part for part, ident in text.parts)
    text = _normal_newlines("" if text is None else str(text))
    text = hidden_re().sub(lambda m: token(m.group()), text)
    if single_line:
        text = re.sub(r"[\n\t]+", " ", text)
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)].rstrip() + "…"
    return text


def shown_start(text: str, limit: int) -> str:
    """The longest start of `text` that `visible_text` shows in at most `limit` characters (each
    hidden character is shown as its token): where to cut agent text that must stay as written."""
    if len(visible_text(text)) <= limit:
        return text
    low, high = 0, min(len(text), limit)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if len(visible_text(text[:middle])) <= limit else (low, middle - 1)
    return text[:low]


HEADER_LIMIT = 180  # characters of a header value; email subjects beyond ~80 are folded anyway


def header_text(*parts: str, agent: Iterable[Any] = (), limit: int = HEADER_LIMIT) -> str:
    """A header value (email subject, webhook header): the fixed `parts` (the code's own words) then
    the `agent` texts, each made single-line and control-free, the whole bounded to `limit`
    characters. Whatever the agent wrote, the result is one valid line: Django's mail refuses a header
    with a line break (BadHeaderError), which would otherwise make the notice undeliverable."""
    fixed = "".join(parts)
    agent_text = " ".join(visible_text(a, single_line=True).strip() for a in agent)
    value = visible_text(fixed + agent_text, single_line=True)  # the fixed words are checked too
    value = re.sub(r" {2,}", " ", value).strip()
    if len(value) > limit:
        value = value[: limit - 1].rstrip() + "…"
    return value


# --- HTML -------------------------------------------------------------------------------------------------
def _marked(ch: str) -> str:
    return f'<span class="op-hidden" title="{escape(describe_char(ch))}">{token(ch)}</span>'


def mark_html_text(text: str) -> str:
    """Already-escaped HTML text with every hidden character replaced by its marked token (used by
    the filter, and by the middleware on page text that did not go through it)."""
    return hidden_re().sub(lambda m: _marked(m.group()), _normal_newlines(text))


def visible_html(value: Any) -> SafeString:
    """Agent text for an HTML page: escaped, hidden characters as marked tokens, direction isolated
    (``<bdi class="op-agent">``) so it cannot reorder the text around it. A `Named` shows its
    identifier as `visible_identifier_html` does, isolated from the words around it."""
    if isinstance(value, Named):
        shown = "".join(
            visible_identifier_html(part) if ident else mark_html_text(escape(part))
            for part, ident in value.parts
        )
        return mark_safe(f'<bdi class="op-agent">{shown}</bdi>')  # noqa: S308
    text = "" if value is None else str(value)
    return mark_safe(f'<bdi class="op-agent">{mark_html_text(escape(text))}</bdi>')  # noqa: S308


# --- identifiers shown ------------------------------------------------------------------------------------
_RIGHT_TO_LEFT = frozenset({"R", "AL", "AN"})  # letters of right-to-left scripts, Arabic digits
_READ_LEFT_TO_RIGHT = frozenset({"L", "EN", "AN"})  # what a left-to-right reader reads in order


def mixes_directions(text: str | None) -> bool:
    """Does this identifier hold a right-to-left character and a character read left to right? Then
    the bidirectional algorithm may lay its parts out in another order than the stored one."""
    if not text:
        return False
    classes = {unicodedata.bidirectional(ch) for ch in hidden_re().sub("", text)}  # those are tokens
    return bool(classes & _RIGHT_TO_LEFT) and bool(classes & _READ_LEFT_TO_RIGHT)


def _is_right_to_left(ch: str) -> bool:
    """A visible right-to-left character (a hidden one, such as U+200F, is a token already)."""
    return unicodedata.bidirectional(ch) in _RIGHT_TO_LEFT and not hidden_re().match(ch)


def right_to_left_tokens(text: str | None) -> list[str]:
    """The tokens (``[U+05F3]``) `identifier_text` shows in place of an identifier's right-to-left
    characters, each once in order of first appearance; none if it does not mix directions."""
    if not text or not mixes_directions(text):
        return []
    return list(dict.fromkeys(token(ch) for ch in text if _is_right_to_left(ch)))


def lookalike_tokens(text: str | None) -> list[str]:
    """The tokens `identifier_text` shows in place of the letters of a word that reads wholly as a
    Latin word without being one ("paypal" in Cyrillic letters), each once in order."""
    marks = _lookalike_marks(text or "")
    return list(dict.fromkeys(token((text or "")[at]) for at in marks))


def _lookalike_marks(text: str) -> dict[int, str]:
    """Each non-ASCII character of a word that reads wholly as a Latin word (`operator_site.lookalikes`:
    every one of its letters is another script's look-alike of a Latin one), by position, with what
    its tooltip says. Such a word passes the door (one script), and shown as it is it would read as
    the Latin word: a recipient "paypal.com" whose "paypal" is Cyrillic."""
    marks: dict[int, str] = {}
    if text.isascii():  # the common case, on every identifier a page shows
        return marks
    for start, word in _words(text):
        reads = lookalikes.fold(word)
        if word.isascii() or not reads.isascii():
            continue
        for at, ch in enumerate(word, start):
            if not ch.isascii():
                marks[at] = (
                    f"{describe_char(ch)} (reads as {lookalikes.fold(ch)!r}, in a word of another "
                    f"script's letters that reads as the Latin {reads!r})"
                )
    return marks


def _identifier_marks(text: str) -> dict[int, str]:
    """The characters of an identifier shown as tokens, by position, with their tooltips: when it
    mixes directions, each right-to-left character (so it reads in the order it is stored); and each
    letter of a word that reads as a Latin word without being one."""
    marks = _lookalike_marks(text)
    if mixes_directions(text):
        rtl = "(right-to-left, in an identifier that mixes directions)"
        marks.update(
            {at: f"{describe_char(ch)} {rtl}" for at, ch in enumerate(text) if _is_right_to_left(ch)}
        )
    return marks


def identifier_text(value: Any) -> str:
    """An identifier (a recipient, an action type, a topic) for a plain-text surface: one line, hidden
    characters as tokens, and as tokens too, when it mixes directions, each right-to-left character
    (so that it reads in the order it is stored), and the letters of a word that reads as a Latin word
    without being one (so that it does not pass for it)."""
    text = visible_text(value, single_line=True)
    marks = _identifier_marks(text)
    return "".join(token(ch) if at in marks else ch for at, ch in enumerate(text)) if marks else text


def visible_identifier_html(value: Any) -> SafeString:
    """`identifier_text` for an HTML page: escaped, every token marked (``op-hidden``, named in its
    tooltip, so the page's banner says so), direction isolated."""
    text = "" if value is None else str(value)
    marks = _identifier_marks(text)
    if not marks:
        return visible_html(text)
    parts, plain = [], []
    for at, ch in enumerate(text):
        if at not in marks:
            plain.append(ch)
            continue
        if plain:
            parts.append(mark_html_text(escape("".join(plain))))
            plain = []
        parts.append(f'<span class="op-hidden" title="{escape(marks[at])}">{token(ch)}</span>')
    if plain:
        parts.append(mark_html_text(escape("".join(plain))))
    return mark_safe(f'<bdi class="op-agent">{"".join(parts)}</bdi>')  # noqa: S308


class Named(str):
    """Text the operator composes of its own words and identifiers an agent wrote: ``identity/`` + a
    belief's key, ``goal #3 “`` + a title + ``”``, a ranking of titles. It is the plain string it
    spells — equal to it, stored and serialised as it — and the surfaces that know it
    (`visible_text`, `visible_html`, so the ``|visible`` filter and every notice line) show each
    identifier as an identifier: when it mixes directions, each right-to-left character a token, so it
    reads in the order it is stored whatever words surround it. (Shown whole as free text, a key such
    as ``[U+05F3] 1111 2222`` after ``identity/`` would still be laid out right to left.) Built with
    ``Named(words, identifier, tail)``, extended with `then`, joined with `Named.join`; anything made
    of it by plain string operations is a plain string again, shown as free text."""

    parts: tuple[tuple[str, bool], ...]  # (text, is it an identifier), in order

    def __new__(cls, words: str = "", identifier: Any = None, tail: str = "") -> Named:
        ident = "" if identifier is None else str(identifier)
        return cls._of(((words, False), (ident, True), (tail, False)))

    @classmethod
    def _of(cls, parts: Iterable[tuple[str, bool]]) -> Named:
        kept = tuple((text, ident) for text, ident in parts if text)
        named = super().__new__(cls, "".join(text for text, _ in kept))
        named.parts = kept
        return named

    def then(self, more: str) -> Named:
        """The same text with `more` after it (`` · value``; a `Named` keeps its identifiers)."""
        return Named._of((*self.parts, *_parts_of(more)))

    @classmethod
    def join(cls, separator: str, items: Iterable[str]) -> Named:
        """`separator`.join(items), each `Named` among them keeping its identifiers."""
        parts: list[tuple[str, bool]] = []
        for n, item in enumerate(items):
            parts += [(separator, False)] if n else []
            parts += _parts_of(item)
        return cls._of(parts)


def _parts_of(text: Any) -> tuple[tuple[str, bool], ...]:
    return text.parts if isinstance(text, Named) else (("" if text is None else str(text), False),)


# --- identifiers ------------------------------------------------------------------------------------------
# What would let one name pass for another is refused at the door, not normalised. Besides hidden
# characters: a character that is not in its plain form (NFKC: full-width letters U+FF41...,
# mathematical alphanumerics U+1D400..., circled letters U+24D0..., superscripts, ligatures U+FB01...:
# "tone" written with any of them reads as "tone"), and a word that mixes scripts ("tone" with a
# Cyrillic "o", U+043E; `operator_site.wording` decides that, for the evidence rules too). Normalising
# instead would change what a stored name is: belief keys are stored as written (lower-cased) under a
# unique constraint, so a key stored before this rule would no longer be reached by its own text, or
# every stored key would need migrating and each look-alike pair merging.
#
# Only a NEW name is held to the plain form and one script per word: a belief's key on add, a title or
# name on add or rename, a task key, a directive's or an intent's topic, an action type, a recipient. A
# name that only finds what exists — a belief's key on update or retire, a goal, priority or project
# named as a target or a link — is checked for hidden characters alone (`target=True`), so a row stored
# before the rule can still be read, updated and retired by exactly its stored name, and cleaned up.
def identifier_problem(text: str | None, *, target: bool = False, title: bool = False) -> str | None:
    """Why this text cannot be an identifier (naming the first offending character and where it is),
    or None if it can. `target`: it names something that exists (hidden characters alone refused).
    `title`: a goal's, priority's or project's title, words a person reads — the typographic signs
    of ordinary writing that NFKC spells out (`typographic`: "½", "m²", "CO₂", "™", "…", "1º",
    full-width brackets and commas) are allowed in it; a letter or digit reading as another is not."""
    if not text:
        return None
    match = refused_re().search(text)
    if match is not None:
        return (
            f"contains {describe_char(match.group())} at position {match.start() + 1}: identifiers may not "
            "hold control, direction, zero-width or other invisible characters (they could make a page "
            "show something other than what is stored)"
        )
    if target or text.isascii():  # plain ASCII is in its plain form and one script
        return None
    if title:
        # Each sign is checked as what it is, and the words around it as if it were not there ("m²"
        # is the word "m": a sign has no script of its own, though Unicode names "²" SUPERSCRIPT).
        signs = {at for at, ch in enumerate(text) if typographic(ch)}
        if signs:
            rest = "".join(" " if at in signs else ch for at, ch in enumerate(text))
            return _not_plain(rest) or _mixed_word(rest)
    return _not_plain(text) or _mixed_word(text)


# The typographic signs a title may hold though NFKC spells them out. None reads as a letter or a digit
# of a name at full size: a fraction, a raised or lowered digit or sign, a punctuation mark or symbol
# in its full-width (CJK), small or vertical form or spelled with several ("…" is "..."), and a short
# list of signs people type as they are. Still refused in a title: every letter or digit in another
# form (full-width, mathematical, circled, parenthesised, raised letters, ligatures, the Kelvin sign,
# Roman numerals, half-width kana, squared units such as "㎡") — each would be a second title reading as
# another. Titles are compared by `lookalikes.fold`, which is NFKC, so "Run ½ marathon" and "Run 1/2
# marathon" (with U+2044) still name each other (a title naming both is refused as ambiguous).
_TYPOGRAPHIC_SIGNS = frozenset(
    "\u2122\u2120"  # ™ ℠
    "\u2103\u2109"  # ℃ ℉
    "\u2116"  # № (Russian "Квартира №5")
    "\u00aa\u00ba"  # ª º (Spanish and Portuguese ordinals: "1º de mayo")
    "\u00b5"  # µ (the micro sign of "25 µg"; NFKC makes it the Greek mu, the same glyph)
)
_SIGN_TAGS = frozenset({"<wide>", "<narrow>", "<small>", "<vertical>", "<compat>"})


def typographic(ch: str) -> bool:
    """Is `ch` a typographic sign a title may hold though NFKC changes it (see `_TYPOGRAPHIC_SIGNS`)?
    False for a character NFKC leaves as it is: it needs no allowance."""
    if ch in _TYPOGRAPHIC_SIGNS:
        return True
    tag = unicodedata.decomposition(ch).partition(" ")[0]
    if tag == "<fraction>":
        return True
    if tag in ("<super>", "<sub>"):
        # ² ₂ ⁺ ⁽ ™: not a raised letter (ᵃ ⁿ ₒ) nor a raised ideograph (the kanbun marks ㆒ ㆓).
        plain = unicodedata.normalize("NFKC", ch)
        ascii_words = all(c.isascii() or not c.isalnum() for c in plain)
        return ascii_words and not unicodedata.category(ch).startswith("L")
    if tag in _SIGN_TAGS:
        # Neither the sign nor what NFKC makes of it holds a letter or digit: full-width
        # brackets and commas, "…", "‼", the spacing acute accent.
        return not ch.isalnum() and not any(c.isalnum() for c in unicodedata.normalize("NFKC", ch))
    return False


def _not_plain(text: str) -> str | None:
    """The first character NFKC changes, with its plain form; None if the text is in NFKC."""
    if unicodedata.is_normalized("NFKC", text):
        return None
    at, plain = _first_not_plain(text)
    return (
        f"contains {describe_char(text[at])} at position {at + 1}: identifiers must be written in their "
        f"plain form (NFKC: {plain!r})"
    )


def _first_not_plain(text: str) -> tuple[int, str]:
    for at, ch in enumerate(text):
        plain = unicodedata.normalize("NFKC", ch)
        if plain != ch:
            return at, plain
    # Every character is plain alone: a letter and a combining mark that compose ("e" + U+0301 is
    # "é"), or marks out of their canonical order.
    for at in range(1, len(text)):
        pair = text[at - 1 : at + 1]
        if not unicodedata.is_normalized("NFKC", pair):
            return at, unicodedata.normalize("NFKC", pair)
    return 0, unicodedata.normalize("NFKC", text)


def _words(text: str) -> Iterable[tuple[int, str]]:
    """An identifier's words, each with where it starts: runs of letters and digits, with the marks on
    them (a combining mark does not end a word). Anything else separates them (".", "_", "-", " ")."""
    start: int | None = None
    for at, ch in enumerate(f"{text} "):
        inside = ch.isalnum() or (start is not None and unicodedata.category(ch).startswith("M"))
        if inside and start is None:
            start = at
        elif not inside and start is not None:
            yield start, text[start:at]
            start = None


def _mixed_word(text: str) -> str | None:
    """A word that mixes scripts, naming the first character of the word's other script; None if none
    does. (An all-Cyrillic, all-Greek or all-Hebrew word is one script; kanji with kana is Japanese.)"""
    for start, word in _words(text):
        if not wording.mixes_scripts(word):
            continue
        scripts = [wording.script(ch) for ch in word]
        found = {s for s in scripts if s is not None}
        # The word's own script is the one most of its letters are in (the first, on a tie).
        own = max(found, key=lambda s: (scripts.count(s), -scripts.index(s)))
        at = next(i for i, s in enumerate(scripts) if s and not wording.written_together({own, s}))
        return (
            f"contains {describe_char(word[at])} at position {start + at + 1}, in {word!r}, a word that "
            f"mixes the {own.title()} and {str(scripts[at]).title()} scripts: identifiers may not mix "
            "scripts inside one word (a look-alike letter makes a second name that reads as the first)"
        )
    return None


def _checker(*, target: bool = False, title: bool = False) -> Callable[[Any], Any]:
    """A pydantic validator refusing a text `identifier_problem` finds a problem in (naming it)."""

    how = {name: True for name, on in (("target", target), ("title", title)) if on}

    def check(value: Any) -> Any:
        if isinstance(value, str):
            problem = identifier_problem(value, **how)
            if problem:
                raise ValueError(problem)
        return value

    return check


check_identifier = _checker()
check_title = _checker(title=True)
check_target = _checker(target=True)


# A pydantic type for identifier-like tool arguments that name something new: refused (invalid_arguments,
# naming the field and the character) if they hold a hidden character, a character not in its plain
# form, or a word mixing scripts. Combine with Field(...) as usual. Checked before the field's own
# constraints (a pattern, a length), so the refusal always names the character.
Identifier = Annotated[str, BeforeValidator(check_identifier)]
# A new goal's, priority's or project's title: an identifier that may also hold typographic signs.
TitleIdentifier = Annotated[str, BeforeValidator(check_title)]
# A target named by id or by its title: the title is checked as a target (hidden characters alone: it
# may name a row stored before the plain-form rule), and the refusal names the field itself, not a
# branch of the union.
IdOrIdentifier = Annotated[StrictInt | str, BeforeValidator(check_target)]
