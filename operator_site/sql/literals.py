"""Constants of the code written into a statement's text, where a partial index needs to see them.

A partial index is usable only when the planner can prove the query's condition implies the
index's. It cannot for a bound value: SQLite plans a statement before seeing its parameters, and a
PostgreSQL prepared statement's generic plan (which psycopg's prepared statements reach after a few
executions) is made for any value. `InConstants` writes plain words of the code (never input) into
the text instead, so the proof holds on every plan.
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Lookup

_WORD = re.compile(r"[a-z][a-z_-]*")


class InConstants(Lookup):
    """`field IN ('a', 'b')` with the values written into the SQL rather than bound as parameters
    (one value: `field = 'a'`). Used as an expression:
    `filter(InConstants(F("status"), ["todo", "doing"]))`, negated with `~Q(InConstants(...))`.
    The values must be plain lowercase words (a `TextChoices` member's value is one): anything
    else is refused, so no input can reach the text."""

    lookup_name = "in_constants"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, params = self.process_lhs(compiler, connection)
        words = [str(v) for v in self.rhs] if self.rhs else []
        if not words or not all(
            isinstance(v, str) and _WORD.fullmatch(w) for v, w in zip(self.rhs, words, strict=True)
        ):
            raise ValueError("InConstants takes a non-empty list of plain words")
        if len(words) == 1:  # written as an index's condition writes it, so SQLite matches the two
            return f"{lhs} = {words[0]!r}", list(params)
        return f"{lhs} IN ({', '.join(repr(w) for w in words)})", list(params)
