"""The database seam: every statement written by hand, behind a name.

Outside this module the code speaks the ORM; whatever SQL text the project executes itself lives
here, one named function per statement, each compared with the ORM's answer on both databases by
tests/test_sql.py. Why by hand at all: the statements on the hot path of every call (the bearer
check with its rate count, the audit row, a write's one-row lookups and inserts) cost several times
their SQL in ORM compilation, and some things the ORM cannot say (`INSERT … ON CONFLICT (key) DO
NOTHING` with a named arbiter, an upsert that answers its count, an advisory lock, a read-only
snapshot). docs/performance.md has the figures.

Rules kept here: identifiers come from the models' metadata and every value is a parameter; the
models' own fields prepare values (`get_db_prep_save`, `get_db_prep_value`) and convert results
(the ORM's converters), so a row read here is the row the ORM reads. Only public APIs of Django and
psycopg are used.
"""

from __future__ import annotations

from operator_site.sql.bearer import (
    count_request,
    principal_and_count,
)
from operator_site.sql.compiled import (
    Param,
    compiled,
    memo,
    tuples,
)
from operator_site.sql.figures import (
    Breakdown,
    capped_figures,
)
from operator_site.sql.flights import (
    insert_with_commit,
    write_transaction,
)
from operator_site.sql.literals import InConstants
from operator_site.sql.locks import (
    advisory_xact_lock,
    instances,
    lock_key,
    max_value,
    ping,
    probe,
    take_budget_slot,
    update_returning,
)
from operator_site.sql.many import (
    Rows,
    read_many,
)
from operator_site.sql.rows import (
    create_row,
    insert_async_commit,
    insert_row,
    insert_under,
    insert_unless_conflict,
    row_where,
    rows_where,
)
from operator_site.sql.snapshots import (
    export_snapshot,
    insert_raw,
    read_snapshot,
    reset_sequences,
)
from operator_site.sql.versions import (
    Update,
    insert_claiming,
    insert_rows,
    read_after_lock,
    update_rows,
)

__all__ = [
    "Breakdown",
    "InConstants",
    "Param",
    "Rows",
    "Update",
    "advisory_xact_lock",
    "capped_figures",
    "compiled",
    "count_request",
    "create_row",
    "export_snapshot",
    "insert_async_commit",
    "insert_claiming",
    "insert_raw",
    "insert_row",
    "insert_rows",
    "insert_under",
    "insert_unless_conflict",
    "insert_with_commit",
    "instances",
    "lock_key",
    "max_value",
    "memo",
    "ping",
    "principal_and_count",
    "probe",
    "read_after_lock",
    "read_many",
    "read_snapshot",
    "reset_sequences",
    "row_where",
    "rows_where",
    "take_budget_slot",
    "tuples",
    "update_returning",
    "update_rows",
    "write_transaction",
]
