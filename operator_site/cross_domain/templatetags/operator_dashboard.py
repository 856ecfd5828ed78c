from __future__ import annotations

from typing import Any

from django import template

from operator_site.cross_domain.dashboard import review_summary

register = template.Library()


@register.simple_tag
def operator_review() -> dict[str, Any]:
    return review_summary()
