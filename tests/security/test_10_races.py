# ruff: noqa: E501  (race set-ups read best on one line)
"""Check 10 — races, on PostgreSQL (where READ COMMITTED would let a lost update through and where
several processes and hosts share one database). Real threads, each with its own connection, and
real uvicorn processes.

- Lost update on the world model, 8 writers x 100 read-modify-write attempts through the tool with
  the version check: every successful write is counted in the value (losses 0), one version per
  success, the lineage straight. A deliberately naive control (the same read-modify-write on the
  belief row without the lineage) runs next and MUST lose updates: proof the harness sees a loss.
- Idempotency: 8 identical `operator_record_action_intent` calls at once, 30 rounds, on threads and
  across two uvicorn processes: one row, one question, one notice per round (duplicates 0).
- The single-running lock: 6 workers x 40 start attempts with an overlap checker, on threads and
  across two processes (start on one, heartbeat and finish on the other): overlaps 0.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest

from beliefs import services as beliefs_services
from beliefs.models import Belief
from intents.models import Decision, Intent
from operator_site.models import Notification
from runs.models import Run
from tests.fixtures import SEED_HEADERS, start_uvicorn, stop_uvicorn
from tests.security.helpers import (
    envelope_of,
    invariant_violations,
    message_of,
    run_threads,
    run_tool,
    tools_call,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITERS, ATTEMPTS = 8, 100
ROUNDS = 30
LOCKERS, LOCK_ATTEMPTS = 6, 40


def _read(key: str) -> tuple[int, int]:
    snapshot = beliefs_services.world_model_snapshot(kind="note")
    notes = {b["key"]: b for b in snapshot["beliefs"]["note"]}
    return snapshot["version"], int(notes[key]["value"])


# --- lost update ---------------------------------------------------------------------------------------------
def test_no_lost_update_on_the_world_model_and_the_naive_control_loses(make_principal, scorecard) -> None:
    writers = [make_principal(f"writer-{i}").principal for i in range(WRITERS)]
    for key in ("counter", "naive"):
        assert run_tool(
            writers[0],
            "operator_update_world_model",
            {"changes": [{"op": "add", "kind": "note", "key": key, "value": "0"}]},
        )["ok"]
    outcomes: Counter = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(WRITERS)

    def guarded_writer(i: int) -> None:
        barrier.wait(60)
        for _ in range(ATTEMPTS):
            version, value = _read("counter")
            change = {"op": "update", "kind": "note", "key": "counter", "value": str(value + 1)}
            answer = run_tool(
                writers[i], "operator_update_world_model", {"changes": [change], "expected_version": version}
            )
            with lock:
                outcomes["ok" if answer["ok"] else answer["error"]] += 1
            if not answer["ok"]:
                assert answer.get("retry") is True, answer

    assert run_threads(WRITERS, guarded_writer) == []
    successes = outcomes["ok"]
    final = int(Belief.objects.get(kind="note", key="counter").value)
    lost = successes - final
    problems = invariant_violations()
    versions_of_counter = beliefs_services.WORLD_MODEL.history("note/counter").count() - 1

    # The control: the same read-modify-write, on the row itself, without the lineage's check.
    row = Belief.objects.get(kind="note", key="naive")
    barrier_c = threading.Barrier(WRITERS)

    def naive(i: int) -> None:
        barrier_c.wait(60)
        for _ in range(ATTEMPTS):
            value = int(Belief.objects.get(pk=row.pk).value)
            time.sleep(random.uniform(0, 0.0005))
            Belief.objects.filter(pk=row.pk).update(value=str(value + 1))

    assert run_threads(WRITERS, naive) == []
    control_lost = WRITERS * ATTEMPTS - int(Belief.objects.get(pk=row.pk).value)
    scorecard(
        10,
        "lost updates on the world model, 8 x 100 (naive control must lose)",
        cases=WRITERS * ATTEMPTS,
        bypasses=lost + len(problems) + int(control_lost == 0),
        successes=successes,
        retries=WRITERS * ATTEMPTS - successes,
        lost=lost,
        control_lost=control_lost,
        outcomes=dict(outcomes),
    )
    assert sum(outcomes.values()) == WRITERS * ATTEMPTS
    assert set(outcomes) <= {"ok", "version_conflict"}, outcomes
    assert successes >= ATTEMPTS, "every round has a winner"
    assert lost == 0 and final == successes
    assert versions_of_counter == successes
    assert problems == []
    assert control_lost > 0, "the naive control lost nothing: this harness could not see a lost update"


# --- idempotency --------------------------------------------------------------------------------------------
def _idempotency_figures(rounds: list[list[dict[str, Any]]]) -> tuple[int, list[str]]:
    duplicates = 0
    problems = []
    for r, answers in enumerate(rounds):
        ids = {a.get("id") for a in answers}
        created = sum(1 for a in answers if a.get("created") is True)
        if len(ids) != 1 or created != 1:
            duplicates += max(len(ids) - 1, 0) + abs(created - 1)
            problems.append(f"round {r}: ids {ids}, created {created}")
    return duplicates, problems


def _rows_per_title(prefix: str) -> tuple[Counter, Counter, Counter]:
    intents = Counter(Intent.objects.filter(title__startswith=prefix).values_list("title", flat=True))
    decisions = Counter(
        Decision.objects.filter(intent__title__startswith=prefix).values_list("intent__title", flat=True)
    )
    notices = Counter(
        Notification.objects.filter(kind="approval_request", title__contains=prefix).values_list(
            "title", flat=True
        )
    )
    return intents, decisions, notices


def test_identical_intents_at_once_make_one_row_on_threads(make_principal, scorecard) -> None:
    agents = [make_principal(f"twin-{i}").principal for i in range(WRITERS)]
    rounds: list[list[dict[str, Any]]] = [[] for _ in range(ROUNDS)]
    lock = threading.Lock()
    barrier = threading.Barrier(WRITERS)

    def worker(i: int) -> None:
        for r in range(ROUNDS):
            action = {"type": "spend", "title": f"threads round {r}", "amount_cents": 4900}
            barrier.wait(60)
            answer = run_tool(agents[i], "operator_record_action_intent", {"action": action})
            with lock:
                rounds[r].append(answer)

    assert run_threads(WRITERS, worker) == []
    duplicates, problems = _idempotency_figures(rounds)
    intents, decisions, notices = _rows_per_title("threads round ")
    extra_rows = sum(c - 1 for c in [*intents.values(), *decisions.values(), *notices.values()] if c > 1)
    scorecard(
        10,
        "idempotency, 8 identical calls x 30 rounds (threads)",
        cases=WRITERS * ROUNDS,
        bypasses=duplicates + extra_rows,
        problems=problems,
    )
    assert duplicates == 0 and extra_rows == 0, problems
    assert len(intents) == len(decisions) == len(notices) == ROUNDS


async def _call(http: httpx2.AsyncClient, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    response = await http.post("/mcp", content=tools_call(name, arguments), headers=SEED_HEADERS)
    assert response.status_code == 200, response.text
    body, _ = envelope_of(message_of(response))
    return body


@pytest.mark.socket
def test_identical_intents_at_once_make_one_row_across_two_processes(make_principal, scorecard) -> None:
    agents = [make_principal(f"proc-twin-{i}") for i in range(WRITERS)]
    servers = [start_uvicorn(), start_uvicorn()]
    rounds: list[list[dict[str, Any]]] = [[] for _ in range(ROUNDS)]
    try:

        async def drive() -> None:
            clients = [
                httpx2.AsyncClient(
                    base_url=servers[i % 2].url, headers={"Authorization": f"Bearer {a.token}"}, timeout=60
                )
                for i, a in enumerate(agents)
            ]
            try:
                for r in range(ROUNDS):
                    action = {"type": "spend", "title": f"processes round {r}", "amount_cents": 4900}
                    rounds[r] = list(
                        await asyncio.gather(
                            *(_call(c, "operator_record_action_intent", {"action": action}) for c in clients)
                        )
                    )
            finally:
                for c in clients:
                    await c.aclose()

        asyncio.run(drive())
    finally:
        for server in servers:
            stop_uvicorn(server)
    duplicates, problems = _idempotency_figures(rounds)
    intents, decisions, notices = _rows_per_title("processes round ")
    extra_rows = sum(c - 1 for c in [*intents.values(), *decisions.values(), *notices.values()] if c > 1)
    scorecard(
        10,
        "idempotency, 8 identical calls x 30 rounds (two uvicorn processes)",
        cases=WRITERS * ROUNDS,
        bypasses=duplicates + extra_rows,
        problems=problems,
    )
    assert duplicates == 0 and extra_rows == 0, problems
    assert len(intents) == len(decisions) == len(notices) == ROUNDS


# --- the single-running lock ------------------------------------------------------------------------------------
@dataclass
class Overlap:
    inside: int = 0
    most: int = 0
    overlaps: int = 0
    outcomes: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self) -> None:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
            if self.inside > 1:
                self.overlaps += 1

    def leave(self) -> None:
        with self.lock:
            self.inside -= 1

    def count(self, outcome: str) -> None:
        with self.lock:
            self.outcomes[outcome] += 1


def _lock_figures(checker: Overlap, scorecard: Any, title: str) -> None:
    runs = list(Run.objects.values_list("status", flat=True))
    scorecard(
        10,
        title,
        cases=LOCKERS * LOCK_ATTEMPTS,
        bypasses=checker.overlaps + len(checker.errors),
        most_inside=checker.most,
        outcomes=dict(checker.outcomes),
        errors=checker.errors[:10],
    )
    assert checker.errors == []
    assert checker.most == 1 and checker.overlaps == 0
    assert sum(checker.outcomes.values()) == LOCKERS * LOCK_ATTEMPTS
    assert checker.outcomes["started"] >= 2 and checker.outcomes["already_running"] >= 1, checker.outcomes
    assert len(runs) == checker.outcomes["started"] and set(runs) == {"ok"}


def test_the_run_lock_never_overlaps_on_threads(make_principal, scorecard) -> None:
    principals = [make_principal(f"locker-{i}").principal for i in range(LOCKERS)]
    checker = Overlap()
    barrier = threading.Barrier(LOCKERS)

    def worker(i: int) -> None:
        barrier.wait(60)
        for _ in range(LOCK_ATTEMPTS):
            started = run_tool(principals[i], "operator_run_start", {"kind": "race", "stale_after_s": 900})
            if not started["ok"]:
                checker.count(started["error"])
                time.sleep(random.uniform(0, 0.003))
                continue
            checker.count("started")
            checker.enter()
            time.sleep(random.uniform(0.001, 0.004))
            checker.leave()
            done = run_tool(
                principals[i],
                "operator_run_finish",
                {"run_id": started["run_id"], "token": started["token"], "status": "ok"},
            )
            if not done["ok"]:
                checker.errors.append(f"finish refused: {done['error']}")

    assert run_threads(LOCKERS, worker) == []
    _lock_figures(checker, scorecard, "run lock overlap, 6 x 40 (threads)")


@pytest.mark.socket
def test_the_run_lock_never_overlaps_across_two_processes(make_principal, scorecard) -> None:
    holders = [make_principal(f"proc-locker-{i}") for i in range(LOCKERS)]
    servers = [start_uvicorn(), start_uvicorn()]
    checker = Overlap()
    try:

        async def agent(holder: Any) -> None:
            auth = {"Authorization": f"Bearer {holder.token}"}
            async with (
                httpx2.AsyncClient(base_url=servers[0].url, headers=auth, timeout=60) as a,
                httpx2.AsyncClient(base_url=servers[1].url, headers=auth, timeout=60) as b,
            ):
                for _ in range(LOCK_ATTEMPTS):
                    started = await _call(a, "operator_run_start", {"kind": "race"})
                    if not started["ok"]:
                        checker.count(started["error"])
                        await asyncio.sleep(random.uniform(0, 0.003))
                        continue
                    checker.count("started")
                    checker.enter()
                    beat = await _call(
                        b, "operator_run_heartbeat", {"run_id": started["run_id"], "token": started["token"]}
                    )
                    if not beat["ok"]:
                        checker.errors.append(f"heartbeat refused: {beat['error']}")
                    await asyncio.sleep(random.uniform(0.001, 0.004))
                    checker.leave()
                    done = await _call(
                        b,
                        "operator_run_finish",
                        {"run_id": started["run_id"], "token": started["token"], "status": "ok"},
                    )
                    if not done["ok"]:
                        checker.errors.append(f"finish refused: {done['error']}")

        async def drive() -> None:
            await asyncio.gather(*(agent(h) for h in holders))

        asyncio.run(drive())
    finally:
        for server in servers:
            stop_uvicorn(server)
    _lock_figures(checker, scorecard, "run lock overlap, 6 x 40 (two uvicorn processes)")
