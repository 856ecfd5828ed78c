"""Round trips per tool, pinned on both databases (CI runs this file on SQLite and on PostgreSQL).

Each statement the database sees is a round trip on PostgreSQL (on SQLite a call into the
library). These tests count the statements of a call's one unit of work — the bearer check with
the rate count, then the tool with its audit row — so a change that adds one shows up here, and in
docs/performance.md. BEGIN and COMMIT of a write's transaction are not statements Django logs: on
PostgreSQL a write pays BEGIN's round trip on top of what is counted here, and its COMMIT travels
with the audit row (sql/flights.py); tests/test_flights.py counts the round trips on the wire.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from operator_site.face import registry
from operator_site.face.dispatch import ToolCall, _run_in_transaction, canonical_digest
from operator_site.face.ratelimit import authenticate_and_admit
from tests.test_reads import some_of_everything

pytestmark = pytest.mark.django_db(transaction=True)

PG = "postgresql"


def statements(fn: Any, *args: Any) -> tuple[Any, list[str]]:
    """What `fn` sent to the database, without BEGIN and COMMIT (SQLite's Django logs them,
    PostgreSQL's psycopg sends them unlogged; the module docstring says what they cost)."""
    with CaptureQueriesContext(connection) as seen:
        result = fn(*args)
    sql = [q["sql"] for q in seen.captured_queries]
    return result, [q for q in sql if not re.fullmatch(r"BEGIN( \w+)?|COMMIT", q)]


def tool_statements(principal: Any, name: str, arguments: dict[str, Any]) -> list[str]:
    """The statements of the tool's unit of work (and its audit row), as the dispatcher runs it."""
    spec = registry.get(name)
    args = spec.args.model_validate(arguments)
    if spec.takes_actor:
        args.actor = principal.name
    call = ToolCall(principal, spec)
    result, sql = statements(
        _run_in_transaction, spec, call, args, time.perf_counter(), canonical_digest(arguments), None
    )
    assert result.is_error is not True and '"ok": false' not in result.content[0].text, result
    return sql


def test_the_bearer_check_and_the_rate_count(agent, settings) -> None:
    settings.OPERATOR_RATE_LIMIT = 1000
    authenticate_and_admit(agent.token)  # the first call of a minute also refreshes last_used_at
    (principal, verdict), sql = statements(authenticate_and_admit, agent.token)
    assert principal is not None and verdict is not None
    # PostgreSQL: one statement (a data-modifying CTE); SQLite: the lookup and the upsert.
    assert len(sql) == (1 if connection.vendor == PG else 2), sql


def test_the_bearer_check_without_a_rate_limit(agent, settings) -> None:
    settings.OPERATOR_RATE_LIMIT = 0
    authenticate_and_admit(agent.token)
    _, sql = statements(authenticate_and_admit, agent.token)
    assert len(sql) == 1, sql


# (tool, arguments, statements on SQLite, statements on PostgreSQL)
CASES = [
    # One query and the audit row (on PostgreSQL sent with its commit as one message, not waiting
    # for the WAL flush).
    ("operator_list_directives", {}, 2, 2),
    # The board's ranking, then every list and count in one statement, then the audit row. SQLite
    # (no round trips): a statement per list (14 on an empty board) and one for the counts.
    ("operator_context_packet", {}, 1 + 14 + 1 + 1, 3),
    # Today's operator day, the entry, the audit row; on PostgreSQL the day's lookup and the entry
    # are one statement (sql.insert_under).
    ("operator_record_progress", {"summary": "s", "outcome": "done"}, 3, 2),
    # The queue (PostgreSQL's advisory lock) and, in a statement of its own, the version with the
    # belief's pre-image (on PostgreSQL one message: one round trip); the version claim with its
    # change row and the belief (PostgreSQL: one statement; SQLite: three); the audit row.
    (
        "operator_update_world_model",
        {"changes": [{"op": "add", "kind": "note", "key": "k", "value": "v"}]},
        None,
        None,
    ),
    (
        "operator_record_action_intent",
        {"action": {"type": "spend", "title": "Plan renewal", "amount_cents": 4900}},
        None,
        None,
    ),
]
PINNED = {
    # Measured when the seam went in (issue 19); a change here is a change in round trips. The
    # world-model write: 7 and 8 until the base and its pre-images were read in one statement
    # after the lock, and the claim carried the version's writes (docs/performance.md, "The
    # world-model write"): no second pre-image read, the lock and the read one message, the claim,
    # the change row and the belief one statement on PostgreSQL.
    ("operator_update_world_model", "sqlite"): 5,
    ("operator_update_world_model", PG): 3,
    # The intent: its history row and its notice go with the audit row and COMMIT on PostgreSQL
    # (sql.insert_with_commit), one message: 5 until then; its decision is written with it, in one
    # statement (insert_unless_conflict's child): 3 until then.
    ("operator_record_action_intent", "sqlite"): 5,
    ("operator_record_action_intent", PG): 2,
}


@pytest.mark.parametrize(("tool", "arguments", "on_sqlite", "on_pg"), CASES, ids=[c[0] for c in CASES])
def test_statements_per_tool(
    agent, settings, tool: str, arguments: dict[str, Any], on_sqlite: Any, on_pg: Any
) -> None:
    settings.OPERATOR_DELIVERY = "off"  # a notice is delivered after the commit, not in the call
    tool_statements(agent.principal, tool, arguments)  # warm: the first call may open the day, etc.
    again = {**arguments}
    if tool == "operator_update_world_model":
        again = {"changes": [{"op": "add", "kind": "note", "key": "k2", "value": "v"}]}
    if tool == "operator_record_action_intent":
        again = {"action": {"type": "spend", "title": "Plan renewal 2", "amount_cents": 4900}}
    sql = tool_statements(agent.principal, tool, again)
    expected = on_pg if connection.vendor == PG else on_sqlite
    if expected is None:
        expected = PINNED[(tool, connection.vendor)]
    assert len(sql) == expected, "\n".join(sql)


def test_the_packet_over_a_full_operator_asks_a_fixed_number_of_statements(agent, owner) -> None:
    some_of_everything(agent.principal, owner.principal)
    sql = tool_statements(agent.principal, "operator_context_packet", {})
    # SQLite: the board, a statement per list (15 with the board's tasks), the counts, the audit row.
    assert len(sql) == (3 if connection.vendor == PG else 1 + 15 + 1 + 1), "\n".join(sql)


@pytest.mark.anyio
async def test_inline_units_of_work_reuse_the_loop_threads_one_connection(
    agent, monkeypatch, settings
) -> None:
    """Inline mode (SQLite's default; `OPERATOR_DB_INLINE=true` elsewhere) runs each unit of work on
    the event-loop thread: every request there uses the loop thread's one persistent connection
    (Django would otherwise open one per request's context). Forced on, so it runs on both."""
    from operator_site.face import db as face_db
    from tests.fixtures import asgi_http, call

    settings.OPERATOR_DB_INLINE = "true"
    assert face_db.runs_inline()
    seen = set()
    try:
        async with asgi_http(agent.token) as http:
            assert (await call(http, "operator_list_directives", {}))["ok"] is True
            # The tests run with DATABASE_CONN_MAX_AGE=0 (tests/plugin.py); the service keeps 300 s.
            monkeypatch.setitem(face_db._loop.connection.settings_dict, "CONN_MAX_AGE", 300)
            for _ in range(3):
                assert (await call(http, "operator_list_directives", {}))["ok"] is True
                raw = face_db._loop.connection.connection
                assert raw is not None
                seen.add(id(raw))
    finally:
        # The kept connection must not outlive the test (PostgreSQL refuses to drop a test
        # database a session still uses).
        kept = getattr(face_db._loop, "connection", None)
        if kept is not None:
            kept.close()
    assert len(seen) == 1
