"""The run lock under real concurrency: threads with their own database connections, and two uvicorn
processes driving /mcp. PostgreSQL is where the guarantee must hold across processes and hosts.

Overlap check: a worker counts itself "inside" only after its start was committed and answered, and
leaves before it sends its finish. If the database let two runs be `running` at once, two workers
would be inside together; the checker records the largest number ever inside and the exact sequence
of enters and leaves.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any

import anyio
import httpx2
import pytest
from django.db import connection
from django.utils import timezone

from operator_site.refusals import Refusal
from runs.lock import StartedRun, finish_run, heartbeat, start_run
from runs.models import Run
from runs.tests.helpers import attempt
from tests.fixtures import call, orm, start_uvicorn, stop_uvicorn


@dataclass
class OverlapChecker:
    """Who is inside the critical section the run lock guards, and whether two ever were."""

    inside: int = 0
    most_inside: int = 0
    sequence: list[tuple[str, int]] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self, run_id: int) -> None:
        with self.lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
            self.sequence.append(("enter", run_id))

    def leave(self, run_id: int) -> None:
        with self.lock:
            self.inside -= 1
            self.sequence.append(("leave", run_id))

    def count(self, outcome: str) -> None:
        with self.lock:
            self.outcomes[outcome] += 1

    def fail(self, message: str) -> None:
        with self.lock:
            self.errors.append(message)

    def assert_never_overlapped(self, attempts: int) -> None:
        assert self.errors == []
        assert self.most_inside == 1, f"{self.most_inside} runs were running at once"
        # Strictly alternating enter/leave of the same run: no interleaving, ever.
        for i in range(0, len(self.sequence), 2):
            (a, run_a), (b, run_b) = self.sequence[i], self.sequence[i + 1]
            assert (a, b, run_a) == ("enter", "leave", run_b), self.sequence[i : i + 2]
        assert sum(self.outcomes.values()) == attempts
        assert set(self.outcomes) <= {"started", "already_running"}, self.outcomes
        assert self.outcomes["started"] >= 2, "no contention was exercised"


def _worker(principal: Any, attempts: int, barrier: threading.Barrier, checker: OverlapChecker) -> None:
    try:
        barrier.wait()
        for _ in range(attempts):
            started = attempt(start_run, principal=principal, kind="race", stale_after_s=900)
            if isinstance(started, Refusal):
                checker.count(started.code)
                time.sleep(random.uniform(0, 0.003))
                continue
            checker.count("started")
            run_id, token = started.run.id, started.token
            checker.enter(run_id)
            beat = attempt(heartbeat, principal=principal, run_id=run_id, token=token)
            if isinstance(beat, Refusal):
                checker.fail(f"heartbeat of a held run refused: {beat.code}")
            time.sleep(random.uniform(0.001, 0.004))
            checker.leave(run_id)
            done = attempt(finish_run, principal=principal, run_id=run_id, token=token, status="ok")
            if isinstance(done, Refusal):
                checker.fail(f"finish of a held run refused: {done.code}")
    except Exception as exc:  # a crash in a thread must fail the test, not vanish
        checker.fail(repr(exc))
    finally:
        connection.close()


def _hammer(principals: list[Any], attempts: int) -> OverlapChecker:
    checker = OverlapChecker()
    barrier = threading.Barrier(len(principals))
    threads = [threading.Thread(target=_worker, args=(p, attempts, barrier, checker)) for p in principals]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    checker.assert_never_overlapped(len(principals) * attempts)
    runs = list(Run.objects.values_list("status", flat=True))
    assert len(runs) == checker.outcomes["started"]
    assert set(runs) == {"ok"}
    return checker


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_six_workers_forty_attempts_never_two_running_on_postgres(make_principal) -> None:
    principals = [make_principal(f"worker-{i}").principal for i in range(6)]
    _hammer(principals, attempts=40)


@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_never_overlap_on_the_default_database(make_principal) -> None:
    """The same check, smaller, on whatever database this run uses (SQLite by default)."""
    principals = [make_principal(f"worker-{i}").principal for i in range(4)]
    _hammer(principals, attempts=15)


# --- takeover of a paused holder -------------------------------------------------------------------------
def _all_at_once(actions: list[Callable[[], Any]]) -> list[Any]:
    """Run each action on its own thread (its own database connection), released together by a
    barrier; returns what each returned (or raised)."""
    results: list[Any] = [None] * len(actions)
    barrier = threading.Barrier(len(actions))

    def one(i: int) -> None:
        try:
            barrier.wait()
            results[i] = actions[i]()
        except Exception as exc:
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(actions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return results


def _contend(principals: list[Any], now: Any) -> list[Any]:
    """Every contender makes exactly ONE start attempt at `now`, all at once."""
    return _all_at_once(
        [partial(attempt, start_run, principal=p, kind="contender", now=now) for p in principals]
    )


def _row(run_id: int) -> dict[str, Any]:
    return Run.objects.filter(pk=run_id).values().get()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_paused_holder_is_taken_over_within_one_attempt_and_its_late_writes_change_nothing(
    make_principal,
) -> None:
    holder = make_principal("holder").principal
    contenders = [make_principal(f"contender-{i}").principal for i in range(5)]
    t0 = timezone.now()
    started_event, resume = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def hold() -> None:
        """The holder: starts, beats once, then pauses (alive, connected, silent) until resumed."""
        try:
            seen["started"] = started = start_run(principal=holder, kind="long", stale_after_s=30, now=t0)
            attempt(
                heartbeat,
                principal=holder,
                run_id=started.run.id,
                token=started.token,
                now=t0 + timedelta(seconds=5),
            )
            started_event.set()
            resume.wait(60)
            late = t0 + timedelta(seconds=50)
            seen["beat"] = attempt(
                heartbeat, principal=holder, run_id=started.run.id, token=started.token, now=late
            )
            seen["finish"] = attempt(
                finish_run,
                principal=holder,
                run_id=started.run.id,
                token=started.token,
                status="ok",
                summary="finished late",
                now=late,
            )
        except Exception as exc:
            seen["error"] = exc
            started_event.set()
        finally:
            connection.close()

    holder_thread = threading.Thread(target=hold)
    holder_thread.start()
    assert started_event.wait(30) and "error" not in seen
    held = seen["started"].run

    # 15 s after its last heartbeat (threshold 30 s): every contender is refused, naming the holder.
    early = _contend(contenders, t0 + timedelta(seconds=20))
    assert all(isinstance(r, Refusal) and r.code == "already_running" for r in early), early
    assert {r.extra["running"]["id"] for r in early} == {held.id}

    # 31 s after its last heartbeat: one attempt each, and exactly one of them takes over.
    late = _contend(contenders, t0 + timedelta(seconds=36))
    winners = [r for r in late if isinstance(r, StartedRun)]
    losers = [r for r in late if isinstance(r, Refusal)]
    assert len(winners) == 1, late
    assert len(losers) == len(contenders) - 1
    new = winners[0]
    assert [r.id for r in new.recovered] == [held.id]
    assert {r.extra["running"]["id"] for r in losers} == {new.run.id}

    old_before, new_before = _row(held.id), _row(new.run.id)
    assert old_before["status"] == "stale" and old_before["taken_over_by_id"] == new.run.id

    resume.set()  # the holder wakes up and carries on as if nothing happened
    holder_thread.join(30)
    assert "error" not in seen
    beat, finish = seen["beat"], seen["finish"]
    assert isinstance(beat, Refusal) and beat.code == "run_stale" and beat.extra["stale"] is True
    assert isinstance(finish, Refusal) and finish.code == "run_stale"
    assert _row(held.id) == old_before
    assert _row(new.run.id) == new_before
    assert list(Run.objects.filter(status="running").values_list("id", flat=True)) == [new.run.id]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_late_heartbeat_racing_a_takeover_never_lets_both_win(make_principal) -> None:
    """The holder's late heartbeat and five takeover attempts land at the same instant, 20 times:
    either the heartbeat wins and nobody takes over, or one contender takes over and the heartbeat
    answers stale. Never both."""
    holder = make_principal("holder").principal
    contenders = [make_principal(f"contender-{i}").principal for i in range(5)]
    base = timezone.now()
    outcomes = Counter()
    for round_no in range(20):
        t = base + timedelta(hours=round_no)
        held = start_run(principal=holder, kind="held", stale_after_s=30, now=t)
        late = t + timedelta(seconds=40)
        results = _all_at_once(
            [
                partial(
                    attempt,
                    heartbeat,
                    principal=holder,
                    run_id=held.run.id,
                    token=held.token,
                    now=late,
                ),
                *[partial(attempt, start_run, principal=p, now=late) for p in contenders],
            ]
        )
        beat, starts = results[0], results[1:]
        takers = [r for r in starts if isinstance(r, StartedRun)]
        assert all(isinstance(r, StartedRun | Refusal) for r in starts), starts
        if isinstance(beat, Run):
            assert takers == [], "a takeover succeeded although the heartbeat landed"
            assert _row(held.run.id)["status"] == "running"
            outcomes["heartbeat won"] += 1
            token, run_id, by = held.token, held.run.id, holder
        else:
            assert isinstance(beat, Refusal) and beat.code == "run_stale", beat
            assert len(takers) == 1, starts
            assert _row(held.run.id)["status"] == "stale"
            outcomes["takeover won"] += 1
            token, run_id, by = takers[0].token, takers[0].run.id, takers[0].run.holder
        assert Run.objects.filter(status="running").count() == 1
        finish_run(principal=by, run_id=run_id, token=token, status="ok", now=late)
    assert sum(outcomes.values()) == 20


# --- two uvicorn processes driving /mcp --------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.postgres
@pytest.mark.socket
@pytest.mark.django_db(transaction=True)
async def test_two_uvicorn_processes_never_run_two_at_once(make_principal) -> None:
    holders = await orm(lambda: [make_principal(f"agent-{i}") for i in range(6)])
    servers = [start_uvicorn(), start_uvicorn()]
    checker = OverlapChecker()
    attempts = 40
    try:
        clients = [
            httpx2.AsyncClient(
                base_url=servers[i % 2].url, headers={"Authorization": f"Bearer {h.token}"}, timeout=60
            )
            for i, h in enumerate(holders)
        ]
        # Each agent also talks to the *other* process: heartbeat and finish cross processes.
        others = [
            httpx2.AsyncClient(
                base_url=servers[(i + 1) % 2].url, headers={"Authorization": f"Bearer {h.token}"}, timeout=60
            )
            for i, h in enumerate(holders)
        ]
        go = anyio.Event()

        async def agent(i: int) -> None:
            await go.wait()
            for _ in range(attempts):
                started = await call(
                    clients[i], "operator_run_start", {"kind": "mcp-race", "stale_after_s": 900}
                )
                if not started["ok"]:
                    checker.count(started["error"])
                    await anyio.sleep(random.uniform(0, 0.003))
                    continue
                checker.count("started")
                run_id, token = started["run_id"], started["token"]
                checker.enter(run_id)
                beat = await call(others[i], "operator_run_heartbeat", {"run_id": run_id, "token": token})
                if not beat["ok"]:
                    checker.fail(f"heartbeat refused: {beat}")
                await anyio.sleep(random.uniform(0.001, 0.004))
                checker.leave(run_id)
                done = await call(
                    others[i], "operator_run_finish", {"run_id": run_id, "token": token, "status": "ok"}
                )
                if not done["ok"]:
                    checker.fail(f"finish refused: {done}")

        async with anyio.create_task_group() as tg:
            for i in range(len(holders)):
                tg.start_soon(agent, i)
            go.set()
        for client in clients + others:
            await client.aclose()
    finally:
        for server in servers:
            stop_uvicorn(server)
    checker.assert_never_overlapped(len(holders) * attempts)
    statuses = await orm(lambda: list(Run.objects.values_list("status", flat=True)))
    assert len(statuses) == checker.outcomes["started"] and set(statuses) == {"ok"}
