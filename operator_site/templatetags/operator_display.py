"""``{% load operator_display %}``: show agent-written text so it cannot disguise itself.

``{{ value|visible }}`` — escaped, hidden characters (controls, direction overrides, zero-width and
other invisible characters) as marked tokens like ``[U+202E]``, direction isolated in ``<bdi>``.
Use it for every agent-written string a person reads. ``{{ value|visible_identifier }}`` — the same
for an identifier (a recipient, an action type, a topic): when it mixes directions, each right-to-left
character is a marked token too, so it reads in the order it is stored. ``{{ value|visible_plain }}``
— the same tokens as plain text, for the initial value of a form field (autoescaped as usual). The
rules live in `operator_site.display`.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from operator_site.display import has_hidden, visible_html, visible_identifier_html, visible_text

register = template.Library()


@register.filter(is_safe=True)
def visible(value: Any) -> SafeString:
    return visible_html(value)


@register.filter(is_safe=True)
def visible_identifier(value: Any) -> SafeString:
    return visible_identifier_html(value)


@register.filter
def visible_plain(value: Any) -> str:
    """The plain-text form (tokens, no markup), for a form field's initial value: what the person
    submits from an edit form is what they saw in it, never a string that displays as another."""
    return visible_text(value)


@register.filter
def hides_characters(value: Any) -> bool:
    """True if the text holds a character `visible` would mark (to flag one field)."""
    return has_hidden(None if value is None else str(value))
