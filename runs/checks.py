"""Text checks shared by the run lock and the record: trimmed, bounded, and storable on both databases."""

from __future__ import annotations

from operator_site.refusals import Refusal


def refuse_nul(name: str, text: str) -> None:
    # PostgreSQL cannot store NUL in text or JSON; SQLite can. Refuse it on both, so a call means
    # the same thing on either database (and is not mistaken for a database failure).
    if "\x00" in text:
        raise Refusal("invalid_text", f"{name} contains a NUL character; nothing was written.", field=name)


def check_text(name: str, value: str | None, limit: int) -> str:
    value = (value or "").strip()
    if len(value) > limit:
        raise Refusal(
            "too_large", f"{name} is {len(value)} characters; at most {limit} are kept.", field=name
        )
    refuse_nul(name, value)
    return value
