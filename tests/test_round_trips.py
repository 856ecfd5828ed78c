"""Round trips per tool, pinned on both databases (CI runs this file on SQLite and on PostgreSQL):
every one of the 24 tools, the benchmark's five in `CASES`, the other nineteen in one scenario.

Each statement the database sees is a round trip on PostgreSQL (on SQLite a call into the
library). These tests count the statements of a call's one unit of work — the bearer check with
the rate count, then the tool with its audit row — so a change that adds one shows up here, and in
docs/performance.md. BEGIN and COMMIT of a write's transaction are not statements Django logs: on
PostgreSQL a write pays BEGIN's round trip on top of what is counted here, and its COMMIT travels
with the audit row (sql/flights.py); tests/test_flights.py counts the round trips on the wire.
"""

from __future__ import annotations

import json
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


def answer_and_statements(
    principal: Any, name: str, arguments: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The answer of a successful call and the statements of its unit of work (and its audit row),
    as the dispatcher runs it."""
    spec = registry.get(name)
    args = spec.args.model_validate(arguments)
    if spec.takes_actor:
        args.actor = principal.name
    call = ToolCall(principal, spec)
    result, sql = statements(
        _run_in_transaction, spec, call, args, time.perf_counter(), canonical_digest(arguments), None
    )
    assert result.is_error is not True and '"ok": false' not in result.content[0].text, result
    return json.loads(result.content[0].text), sql


def tool_statements(principal: Any, name: str, arguments: dict[str, Any]) -> list[str]:
    """The statements of a successful call's unit of work (and its audit row)."""
    return answer_and_statements(principal, name, arguments)[1]


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


# The other nineteen tools, each in a representative call of a scenario that builds what the next
# call needs (a decision for its update, a run for its heartbeat, a version for its revert): the
# statements of the call's unit of work with its audit row, (SQLite, PostgreSQL). Measured when
# pinned (2026-12-06, docs/performance.md, "Round trips of every tool"): none of these is on an
# agent's hot path, and the largest are the person's goal-model writes, whose statements grow with
# the number of changes (a version, each change's row and its rank, the notice). A change here is a
# change in round trips: say why in that section.
SCENARIO_PINS: dict[str, tuple[int, int]] = {
    "operator_set_directive": (4, 4),
    "operator_clear_directive": (3, 3),
    # The decision read again with its intent, which the answer shows (11 when a plain refresh
    # dropped the intent and the answer loaded it on its own).
    "operator_update_decision": (10, 10),
    "operator_update_action_intent": (8, 8),
    "operator_run_start": (9, 9),
    # The fenced update, then the run with its holder and day (6 and 7 until the update came first
    # and the run was read once, with what its answer names, after it).
    "operator_run_heartbeat": (3, 3),
    "operator_run_finish": (3, 3),
    "operator_record_observation": (3, 3),
    "operator_tick status": (17, 17),
    # PostgreSQL opens the day and writes the check-in's progress entry in one statement.
    "operator_tick check-in": (10, 9),
    "operator_tick night": (15, 15),
    "operator_record_instruction": (2, 2),
    "operator_user_world_model": (4, 4),
    "operator_revert_world_model": (14, 14),
    # Three changes (a goal, a priority, a project) with the person's confirmation.
    "operator_reconcile_goal_model": (42, 42),
    "operator_apply_goal_change": (32, 32),
    "operator_revert_goal_model": (30, 30),
    "operator_update_task": (7, 7),
    # PostgreSQL takes the hash chain's advisory lock (SQLite's write lock already serialises).
    "operator_log_decision": (5, 6),
    "operator_state": (7, 7),
    "operator_history": (15, 15),
}


def test_every_other_tool_asks_a_pinned_number_of_statements(agent, owner, settings) -> None:
    settings.OPERATOR_DELIVERY = "off"  # a notice is delivered after the commit, not in the call
    seen: dict[str, list[str]] = {}  # the statements of each pinned call, by its label

    def call(holder: Any, name: str, arguments: dict[str, Any], pin: str | None = "") -> dict[str, Any]:
        """A successful call; its statements kept under its label (the tool's name, and `pin` when
        one tool is pinned in several calls), unless `pin` is None (a call that only prepares)."""
        answer, sql = answer_and_statements(holder.principal, name, arguments)
        if pin is not None:
            seen[f"{name} {pin}".strip()] = sql
        return answer

    a, o = agent, owner
    # Directives.
    call(a, "operator_set_directive", {"kind": "topic_mute", "topic": "news", "minutes": 30})
    call(a, "operator_clear_directive", {"all": True})
    # An intent awaiting approval, its decision updated; a note cancelled.
    spend = {"action": {"type": "spend", "title": "Renew the plan", "amount_cents": 1200}}
    recorded = call(a, "operator_record_action_intent", spend, pin=None)
    call(a, "operator_update_decision", {"id": recorded["decision_id"], "status": "parked"})
    note = call(a, "operator_record_action_intent", {"action": {"type": "note", "title": "Jot"}}, pin=None)
    call(a, "operator_update_action_intent", {"id": note["id"], "to": "cancelled"})
    # A run: started, a heartbeat, finished.
    started = call(a, "operator_run_start", {"kind": "shape", "stale_after_s": 60})
    lease = {"run_id": started["run_id"], "token": started["token"]}
    call(a, "operator_run_heartbeat", lease)
    call(a, "operator_run_finish", {**lease, "status": "ok"})
    # The day's record and the ticks.
    call(a, "operator_record_progress", {"summary": "did it", "outcome": "done"}, pin=None)
    call(a, "operator_record_observation", {"kind": "world", "summary": "rain", "data": {"mm": 3}})
    for mode in ("status", "check-in", "night"):
        call(a, "operator_tick", {"mode": mode}, pin=mode)
    # The person's words, the world model read and reverted.
    call(o, "operator_record_instruction", {"text": "Call me Sam.", "kind": "instruction"})
    tea = {"changes": [{"op": "add", "kind": "preference", "key": "tea", "value": "green"}]}
    call(o, "operator_update_world_model", tea, pin=None)
    call(o, "operator_user_world_model", {})
    call(o, "operator_revert_world_model", {})
    # The goal model: reconciled, changed, reverted; a task and a logged decision.
    words = "I want to run a marathon. Health first. I want to learn Italian."
    call(o, "operator_record_instruction", {"text": words, "kind": "instruction"}, pin=None)
    new_goal = {"entity": "goal", "op": "add", "fields": {"title": "Run a marathon", "importance": 1}}
    new_priority = {"entity": "priority", "op": "add", "fields": {"name": "Health first", "position": 1}}
    new_project = {"entity": "project", "op": "add", "fields": {"title": "Plan", "goal": "Run a marathon"}}
    reconcile = {
        "changes": [new_goal, new_priority, new_project],
        "confirmedInConversation": True,
        "confirmationQuote": "I want to run a marathon. Health first.",
    }
    call(o, "operator_reconcile_goal_model", reconcile)
    italian = {
        "action": "add",
        "title": "Learn Italian",
        "confirmedInConversation": True,
        "confirmationQuote": "I want to learn Italian.",
    }
    call(o, "operator_apply_goal_change", italian)
    call(o, "operator_revert_goal_model", {})
    call(o, "operator_update_task", {"key": "shoes", "patch": {"title": "Buy shoes"}})
    decision = {"title": "Shoes", "decision": "buy", "rationale": "worn out", "alternatives": ["wait"]}
    call(o, "operator_log_decision", decision)
    # The reads of everything.
    call(o, "operator_state", {})
    call(o, "operator_history", {})

    at = 1 if connection.vendor == PG else 0
    counts = {label: len(sql) for label, sql in seen.items()}
    pinned = {label: pins[at] for label, pins in SCENARIO_PINS.items()}
    moved = [label for label in seen if counts[label] != pinned.get(label)]
    assert counts == pinned, "\n\n".join(
        f"{label}: {counts[label]} (pinned {pinned.get(label)})\n  " + "\n  ".join(seen[label])
        for label in moved
    )


def test_every_tool_has_its_statements_pinned() -> None:
    pinned = {tool for tool, *_ in CASES} | {label.split()[0] for label in SCENARIO_PINS}
    assert pinned == set(registry.names()), set(registry.names()) ^ pinned
