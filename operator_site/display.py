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
  character.

Reuse it for any new surface (the proposals' approval page renders its diff with ``|visible``); do not
write a second copy.

Which characters are hidden (`is_hidden`): every control (Unicode category Cc) except the line feed
and tab of free text, every format character (Cf: the bidi embeddings, overrides, isolates and marks,
zero-width space/joiners, word joiner, BOM, soft hyphen, invisible operators, tag characters, ...),
the line and paragraph separators (Zl, Zp), surrogates, private-use and unassigned code points, and a
list of letters and marks that render as nothing (Hangul fillers, the combining grapheme joiner, Khmer
inherent vowels, Mongolian variation selectors, the braille blank). Identifiers refuse those, plus any
line break or tab, any space other than U+0020, and variation selectors.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from typing import Annotated, Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from pydantic import BeforeValidator, StrictInt

# Letters and marks that are not format characters but render as nothing (or as blank space).
_BLANK_LOOKING = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x2800, 0x3164, 0xFFA0]
)
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
_LAYOUT = frozenset("\n\t")  # kept in free text: they show as what they are (with pre-wrap)

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


def is_hidden(ch: str) -> bool:
    """Would this character, shown as it is, be invisible or move other text? (Free-text rule: the
    line feed and tab are layout, not hidden.)"""
    if ch in _LAYOUT:
        return False
    code = ord(ch)
    return code in _BLANK_LOOKING or unicodedata.category(ch) in _HIDDEN_CATEGORIES


def refused_in_identifier(ch: str) -> bool:
    """Identifiers are stricter: no hidden character, no line break or tab, no space but U+0020, no
    variation selector."""
    if ch in _LAYOUT or is_hidden(ch):
        return True
    code = ord(ch)
    if unicodedata.category(ch) == "Zs" and ch != " ":
        return True
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF


# One pass of a compiled pattern finds every hidden character (a per-character Python loop is ~50x
# slower on long bodies). The classes are built from the rules above on first use, in one scan of
# the code space (~0.15 s, once per process), so they always match this Python's Unicode database.
@functools.cache
def _classes() -> tuple[re.Pattern[str], re.Pattern[str]]:
    hidden: list[list[int]] = []
    refused: list[list[int]] = []

    def add(ranges: list[list[int]], code: int) -> None:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])

    category = unicodedata.category
    for code in range(0x110000):
        # The same decisions as is_hidden / refused_in_identifier, inlined: this loop runs 1.1M times.
        cat = category(chr(code))
        if cat in _HIDDEN_CATEGORIES or code in _BLANK_LOOKING:
            add(refused, code)
            if code not in (0x09, 0x0A):
                add(hidden, code)
        elif (cat == "Zs" and code != 0x20) or 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:
            add(refused, code)

    def chars(ranges: list[list[int]]) -> str:
        parts = "".join(
            re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges
        )
        return f"[{parts}]"

    def compiled(ranges: list[list[int]]) -> re.Pattern[str]:
        # Python's `re` tests a class holding any code point past U+FFFF range by range (hundreds of
        # ranges: ~0.4 µs a character); a class of the BMP alone becomes a bitmap (one lookup). So:
        # the BMP part as a bitmap, and for a character past U+FFFF — one comparison rules the rest
        # out — the check against its own ranges, after it. The same characters match (tests
        # compare every code point); a 600-character notice is scanned ~24x faster.
        bmp = [[a, min(b, 0xFFFF)] for a, b in ranges if a <= 0xFFFF]
        astral = [[max(a, 0x10000), b] for a, b in ranges if b > 0xFFFF]
        pattern = chars(bmp) if bmp else "(?!)"
        if astral:
            pattern += f"|[\U00010000-\U0010ffff](?<={chars(astral)})"
        return re.compile(pattern)

    return compiled(hidden), compiled(refused)


def hidden_re() -> re.Pattern[str]:
    """The compiled class of hidden characters (free-text rule)."""
    return _classes()[0]


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
    spaces; `limit` cuts the result to that many characters (ending in "…")."""
    text = _normal_newlines("" if text is None else str(text))
    text = hidden_re().sub(lambda m: token(m.group()), text)
    if single_line:
        text = re.sub(r"[\n\t]+", " ", text)
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)].rstrip() + "…"
    return text


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
    (``<bdi class="op-agent">``) so it cannot reorder the text around it."""
    text = "" if value is None else str(value)
    return mark_safe(f'<bdi class="op-agent">{mark_html_text(escape(text))}</bdi>')  # noqa: S308


# --- identifiers ------------------------------------------------------------------------------------------
def identifier_problem(text: str | None) -> str | None:
    """Why this text cannot be an identifier (naming the first offending character and where it is),
    or None if it can."""
    if not text:
        return None
    match = _classes()[1].search(text)
    if match is None:
        return None
    return (
        f"contains {describe_char(match.group())} at position {match.start() + 1}: identifiers may not "
        "hold control, direction, zero-width or other invisible characters (they could make a page show "
        "something other than what is stored)"
    )


def _check_identifier(value: Any) -> Any:
    if isinstance(value, str):
        problem = identifier_problem(value)
        if problem:
            raise ValueError(problem)
    return value


# A pydantic type for identifier-like tool arguments: refused (invalid_arguments, naming the field and
# the character) if they hold a hidden character. Combine with Field(...) as usual. Checked before the
# field's own constraints (a pattern, a length), so the refusal always names the character.
Identifier = Annotated[str, BeforeValidator(_check_identifier)]
# A target named by id or by its title: the title is checked as an identifier (the refusal names the
# field itself, not a branch of the union).
IdOrIdentifier = Annotated[StrictInt | str, BeforeValidator(_check_identifier)]
check_identifier = _check_identifier
