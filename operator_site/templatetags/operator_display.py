"""``{% load operator_display %}``: show agent-written text so it cannot disguise itself.

``{{ value|visible }}`` — escaped, hidden characters (controls, direction overrides, zero-width and
other invisible characters) as marked tokens like ``[U+202E]``, direction isolated in ``<bdi>``.
Use it for every agent-written string a person reads. The rules live in `operator_site.display`.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from operator_site.display import has_hidden, visible_html

register = template.Library()


@register.filter(is_safe=True)
def visible(value: Any) -> SafeString:
    return visible_html(value)


@register.filter
def hides_characters(value: Any) -> bool:
    """True if the text holds a character `visible` would mark (to flag one field)."""
    return has_hidden(None if value is None else str(value))
