"""Constants of the code written into a statement's text, where a partial index needs to see them.

A partial index is usable only when the planner can prove the query's condition implies the
index's. It cannot for a bound value: SQLite plans a statement before seeing its parameters, and a
PostgreSQL prepared statement's generic plan (which psycopg's prepared statements reach after a few
executions) is made for any value. `InConstants` writes plain words of the code (never input) into
the text instead, so the proof holds on every plan. `word_literal` is the one test of such a word:
the packet's statement writes a `Choices` member's value into its text with it too (`sql.many`).
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Lookup

# A plain word of the code (a status, a kind): nothing in it can end a quoted SQL string.
_WORD = re.compile(r"[a-z][a-z0-9_-]*")


def word_literal(word: Any) -> str | None:
    """`'word'`, the SQL literal of a plain lowercase word of the code (a `TextChoices` member's
    value is one); None for anything else, which must then stay a bound parameter."""
    return f"'{word}'" if type(word) is str and _WORD.fullmatch(word) else None


class InConstants(Lookup):
    """`field IN ('a', 'b')` with the values written into the SQL rather than bound as parameters
    (one value: `field = 'a'`). Used as an expression:
    `filter(InConstants(F("status"), ["todo", "doing"]))`, negated with `~Q(InConstants(...))`.
    The values must be plain lowercase words (`word_literal`; a `TextChoices` member is one):
    anything else is refused, so no input can reach the text."""

    lookup_name = "in_constants"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, params = self.process_lhs(compiler, connection)
        values = self.rhs or []
        literals = [word_literal(str(v)) if isinstance(v, str) else None for v in values]
        if not literals or None in literals:
            raise ValueError("InConstants takes a non-empty list of plain words")
        if len(literals) == 1:  # written as an index's condition writes it, so SQLite matches the two
            return f"{lhs} = {literals[0]}", list(params)
        return f"{lhs} IN ({', '.join(literals)})", list(params)
