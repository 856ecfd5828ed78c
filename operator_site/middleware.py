"""Every HTML page says when it shows hidden characters, and shows each one (operator_site.display).

Templates render agent text with ``{{ value|visible }}``; the admin's own views (list and change
pages, breadcrumbs, filters) render model values without it. This middleware is the net under both,
for every HTML response Django serves (admin, revert pages, the API's docs):

- a hidden character that reached the page's *text* unmarked becomes the same marked token the filter
  writes (in ``<title>``, where markup cannot go, the plain token). Text inside ``<script>``,
  ``<style>`` and ``<textarea>`` and attribute values are left as they are: they are data a form
  sends back, and rewriting them here would change what is submitted behind the person's back (the
  approval page's edit form prefills its fields with the tokens itself, ``|visible_plain``, so what
  is submitted is what was seen);
- a page that shows any such character — marked by the filter or here, or left in an attribute —
  gets a banner at the top naming them (where the console's base template leaves its marker, else
  right after ``<body>``).

A page without hidden characters costs one search of its text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.html import escape

from operator_site.display import describe_char, hidden_chars, mark_html_text, visible_text
from operator_site.hidden import hidden_re

BANNER_MARKER = "<!--operator:hidden-characters-banner-->"
_RAW_ELEMENTS = ("script", "style", "textarea", "title")
_TAG = re.compile(r"<!--.*?-->|<(/?)([a-zA-Z][a-zA-Z0-9-]*)[^>]*>|<", re.S)
_MARKED = re.compile(r'class="op-hidden" title="([^"]+)"')


def mark_page(html: str) -> tuple[str, list[str]]:
    """Mark hidden characters in the text of an HTML page; returns (page, the characters it shows,
    described, in order of first appearance)."""
    found = {describe_char(ch): None for ch in hidden_chars(html)}
    if found:
        html = _mark_text_nodes(html)
    for described in _MARKED.findall(html):
        found.setdefault(described.replace("&#x27;", "'"), None)
    return html, list(found)


def _mark_text_nodes(html: str) -> str:
    out: list[str] = []
    pos = 0
    length = len(html)
    while pos < length:
        match = _TAG.search(html, pos)
        if match is None:
            out.append(mark_html_text(html[pos:]))
            break
        out.append(mark_html_text(html[pos : match.start()]))
        out.append(match.group())
        pos = match.end()
        name = (match.group(2) or "").lower()
        if match.group(1) or name not in _RAW_ELEMENTS or match.group().endswith("/>"):
            continue
        # A raw-text element: everything up to its closing tag is its content.
        close = re.compile(rf"</{name}\s*>", re.I).search(html, pos)
        end = close.start() if close else length
        content = html[pos:end]
        out.append(visible_text(content) if name == "title" else content)
        pos = end
    return "".join(out)


def banner(described: list[str]) -> str:
    shown = ", ".join(escape(d) for d in described[:12]) + (
        f" and {len(described) - 12} more" if len(described) > 12 else ""
    )
    return (
        '<div id="op-hidden-banner" role="alert">This page shows text that contains hidden characters '
        "(controls, direction overrides, zero-width or other invisible characters), right-to-left "
        "characters in an identifier that mixes directions, or another script's letters in a word of "
        "an identifier that reads as a Latin word: "
        f'{shown}. Each one is shown where it is as a red token like <span class="op-hidden">[U+202E]'
        "</span>; read those values character by character before you act on them.</div>"
    )


def html_of(response: HttpResponse) -> str | None:
    """The text of a whole (not streamed) HTML response; None for anything else."""
    if response.streaming or not response.get("Content-Type", "").startswith("text/html"):
        return None
    try:
        return response.content.decode(response.charset or "utf-8")
    except UnicodeDecodeError:
        return None


def set_html(response: HttpResponse, html: str) -> None:
    response.content = html.encode(response.charset or "utf-8")
    if response.has_header("Content-Length"):
        response["Content-Length"] = str(len(response.content))


def at_top(html: str, note: str) -> str:
    """`note` at the top of the page: right after ``<body>``, else first."""
    body = re.search(r"<body[^>]*>", html, re.I)
    at = body.end() if body else 0
    return html[:at] + note + html[at:]


class VisibleTextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        html = html_of(response)
        if html is None:
            return response
        if BANNER_MARKER not in html and not hidden_re().search(html) and "op-hidden" not in html:
            return response
        html, described = mark_page(html)
        if described:
            note = banner(described)
            html = html.replace(BANNER_MARKER, note, 1) if BANNER_MARKER in html else at_top(html, note)
        set_html(response, html.replace(BANNER_MARKER, ""))
        return response
