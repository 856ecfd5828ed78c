"""Snapshot reads: a read that runs several queries (the packet, operator_state, operator_history)
sees one snapshot of the database, on PostgreSQL (a read-only REPEATABLE READ transaction) as on
SQLite (a transaction), so its counts and its lists agree while others write.

Two kinds of proof:

- **deterministic** (PostgreSQL): a write is committed by another connection *between two queries
  of one read* (a hook inside the read starts a thread that writes and commits, and waits for it).
  Read as the dispatcher reads it, the write is invisible to the whole read — lists and counts
  agree. The control reads the same way without the snapshot (each statement its own snapshot, as
  before) and shows the disagreement the snapshot prevents, so the check can fail.
- **concurrent** (both databases): a writer thread records intents (each with its open question,
  in one transaction) and progress entries while the reader reads all three tools, many times;
  every read's counts and lists must agree.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import pytest
from django.db import connection

from goals.models import Task
from goals.services import update_task
from intents.lifecycle import ActionInput, record_intent
from operator_site import sql
from operator_site.cross_domain.reads import days, packet, paged_state
from operator_site.face import dispatch
from runs.records import record_progress
from tests.security.helpers import run_tool

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 10  # the packet lists 10 approvals and 10 decisions: the tests stay below it


def _intent(principal: Any, n: int) -> None:
    record_intent(
        principal=principal,
        action=ActionInput(type="email", title=f"snapshot intent {n}", recipient=f"r{n}@example.com"),
    )


def _progress(principal: Any, n: int) -> None:
    record_progress(principal=principal, summary=f"snapshot progress {n}", outcome="done")


def _committed_elsewhere(write: Callable[[], None]) -> None:
    """Run `write` on another thread (its own connection, autocommit: committed when it returns)."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            write()
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and not errors, errors


# --- what "agree" means for each read ---------------------------------------------------------------
def packet_disagreements(packet: dict[str, Any]) -> list[str]:
    """Sections below their list cap must list exactly what they count; and every intent awaiting
    approval has its open question (written in one transaction), so the two lists have one length."""
    problems = []
    for name in ("awaiting_approval", "pending_decisions", "recent_progress"):
        section = packet[name]
        below_cap = not section["total_is_lower_bound"] and section["total"] <= LIMIT - 2
        if below_cap and (section["shown"] != section["total"] or len(section["items"]) != section["total"]):
            problems.append(f"{name}: {len(section['items'])} listed, {section['total']} counted")
    listed = [task for lane in packet["tasks"]["lanes"] for task in lane["tasks"]]
    closed = [task["key"] for task in listed if task["status"] not in Task.OPEN_STATUSES]
    if closed or len(listed) > packet["tasks"]["total"]:
        problems.append(
            f"{len(listed)} open tasks listed ({closed} not open), {packet['tasks']['total']} counted"
        )
    approvals, decisions = packet["awaiting_approval"], packet["pending_decisions"]
    if len(approvals["items"]) != len(decisions["items"]) and approvals["total"] < LIMIT - 2:
        problems.append(f"{len(approvals['items'])} intents listed, {len(decisions['items'])} questions")
    return problems


def state_disagreements(state: dict[str, Any]) -> list[str]:
    """Every intent listed has its decision listed (one transaction wrote both), and back."""
    sections = state["sections"]
    intents = {i["id"] for i in sections["intents"]["items"]}
    asked = {d["intent_id"] for d in sections["decisions"]["items"] if d.get("intent_id")}
    return [] if intents == asked else [f"intents {sorted(intents)} vs questions about {sorted(asked)}"]


def history_disagreements(history: dict[str, Any]) -> list[str]:
    problems = []
    for day in history["dates"]:
        for name in ("progress", "intents_created"):
            section = day[name]
            if len(section["recent"]) > section["count"] or (
                section["count"] <= 3 and len(section["recent"]) != section["count"]
            ):
                listed = len(section["recent"])
                problems.append(f"{day['date']} {name}: {listed} listed, {section['count']} counted")
    return problems


READS: dict[str, tuple[dict[str, Any], Callable[[dict[str, Any]], list[str]]]] = {
    "operator_context_packet": ({}, packet_disagreements),
    "operator_state": ({"sections": ["decisions", "audit", "intents"], "limit": 50}, state_disagreements),
    "operator_history": ({"days": 2}, history_disagreements),
}


# --- deterministic: a write committed between two queries of one read ----------------------------------
def _hook(monkeypatch: pytest.MonkeyPatch, agent: Any, tool: str) -> None:
    """For the read `tool`, a hook placed between two of its queries that commits a write elsewhere
    (once)."""

    def once(write: Callable[[], None]) -> Callable[[], None]:
        done: list[bool] = []

        def fire() -> None:
            if not done:
                done.append(True)
                _committed_elsewhere(write)

        return fire

    fires = {
        # The packet: after the board's ranking, before its one statement of lists and counts.
        "operator_context_packet": once(
            lambda: (_task(agent, "done"), _intent(agent, 90), _progress(agent, 90))
        ),
        # operator_state: after the decisions page, before the intents page (rendering a decision).
        "operator_state": once(lambda: _intent(agent, 91)),
        # operator_history: after the progress counts, before the progress items.
        "operator_history": once(lambda: (_progress(agent, 92), _intent(agent, 92))),
    }
    fire = fires[tool]
    real_board, real_decision_dict, real_top_per = packet._board, paged_state.decision_dict, days._top_per
    calls = {"top_per": 0}

    def board(*args: Any, **kwargs: Any) -> Any:
        shown = real_board(*args, **kwargs)
        fire()
        return shown

    def decision_dict(*args: Any, **kwargs: Any) -> Any:
        fire()
        return real_decision_dict(*args, **kwargs)

    def top_per(*args: Any, **kwargs: Any) -> Any:
        calls["top_per"] += 1
        if calls["top_per"] == 2:  # the progress items (after the progress counts)
            fire()
        return real_top_per(*args, **kwargs)

    patched = {
        "operator_context_packet": (packet, "_board", board),
        "operator_state": (paged_state, "decision_dict", decision_dict),
        "operator_history": (days, "_top_per", top_per),
    }
    monkeypatch.setattr(*patched[tool])


def _task(principal: Any, status: str) -> None:
    update_task(principal=principal, key="snapshot-task", patch={"title": "snapshot task", "status": status})


def _seed(agent: Any) -> None:
    _task(agent, "todo")
    for n in range(2):
        _intent(agent, n)
        _progress(agent, n)


@pytest.mark.postgres
@pytest.mark.parametrize("tool", list(READS))
def test_a_write_between_two_queries_of_a_read_is_invisible_to_the_whole_read(
    make_principal: Any, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    agent = make_principal("snapshot-agent")
    _seed(agent.principal)
    arguments, disagreements = READS[tool]
    _hook(monkeypatch, agent.principal, tool)
    answer = run_tool(agent.principal, tool, arguments)
    assert answer.get("ok") is True, answer
    assert disagreements(answer) == []


@pytest.mark.postgres
@pytest.mark.parametrize("tool", list(READS))
def test_control_without_the_snapshot_the_same_read_disagrees(
    make_principal: Any, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    """The check can fail: read statement by statement (the unit of a read before), the write lands
    between two queries and the counts and lists disagree."""
    agent = make_principal("snapshot-agent")
    _seed(agent.principal)
    arguments, disagreements = READS[tool]
    _hook(monkeypatch, agent.principal, tool)
    monkeypatch.setattr(dispatch, "_unit", lambda spec: nullcontext())
    monkeypatch.setattr(dispatch, "_audit_after", lambda spec: False)
    answer = run_tool(agent.principal, tool, arguments)
    assert answer.get("ok") is True, answer
    assert disagreements(answer) != []


@pytest.mark.postgres
def test_the_snapshot_is_read_only_and_the_connection_is_left_as_it_was(make_principal: Any) -> None:
    agent = make_principal("snapshot-agent")
    with sql.read_snapshot(), connection.cursor() as cursor:
        cursor.execute("SHOW transaction_isolation")
        assert cursor.fetchone()[0] == "repeatable read"
        cursor.execute("SHOW transaction_read_only")
        assert cursor.fetchone()[0] == "on"
    assert connection.connection.isolation_level is None and connection.connection.read_only is None
    _intent(agent.principal, 1)  # the connection writes again, at its usual isolation


# --- concurrent: a writer while reading, many times -------------------------------------------------------
def test_counts_and_lists_agree_while_another_connection_writes(make_principal: Any) -> None:
    agent = make_principal("snapshot-agent")
    stop = threading.Event()
    written = {"n": 0}

    def writer() -> None:
        try:
            n = 100
            while not stop.is_set() and written["n"] < LIMIT - 3:
                _intent(agent.principal, n)
                _progress(agent.principal, n)
                written["n"] += 1
                n += 1
                time.sleep(0.01)
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    problems: list[str] = []
    reads_done = 0
    try:
        deadline = time.monotonic() + 20
        while thread.is_alive() and time.monotonic() < deadline:
            for tool, (arguments, disagreements) in READS.items():
                answer = run_tool(agent.principal, tool, arguments)
                assert answer.get("ok") is True, answer
                problems += [f"{tool}: {p}" for p in disagreements(answer)]
                reads_done += 1
    finally:
        stop.set()
        thread.join(30)
        connection.close()
    assert written["n"] > 0 and reads_done >= 3
    assert problems == []
