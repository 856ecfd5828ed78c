"""Small helpers for the runs tests: run a service the way the dispatcher does (one transaction,
rolled back on a refusal)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from operator_site.refusals import Refusal


def attempt(fn: Callable[..., Any], /, **kwargs: Any) -> Any:
    """Call a service inside one transaction; a Refusal rolls it back and is returned, not raised."""
    try:
        with transaction.atomic():
            return fn(**kwargs)
    except Refusal as refusal:
        return refusal
