"""The run lock: one running run, stale recovery, the dead-man's switch and fencing — through the
services (with an explicit clock) and through /mcp."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from operator_site.models import AuditEvent
from operator_site.refusals import Refusal
from runs.lock import (
    _mark_stale,
    finish_run,
    heartbeat,
    recover_stale_runs,
    run_status,
    running_run,
    start_run,
    token_digest,
)
from runs.models import OperatorDay, Run
from runs.tests.helpers import attempt
from tests.fixtures import asgi_http, call, orm

pytestmark = pytest.mark.django_db


def _start(holder, now, stale_after_s=60, kind="work"):
    return start_run(principal=holder.principal, kind=kind, stale_after_s=stale_after_s, now=now)


# --- the lock ---------------------------------------------------------------------------------------------
def test_start_returns_id_and_token_and_keeps_only_the_tokens_digest(agent, t0) -> None:
    started = _start(agent, t0)
    run = Run.objects.get()
    assert started.run.id == run.id
    assert started.token.startswith("run_") and len(started.token) > 40
    assert run.token_digest == token_digest(started.token)
    assert started.token not in str(Run.objects.filter(pk=run.pk).values().get())
    assert (run.status, run.holder_id, run.kind, run.stale_after_s) == (
        "running",
        agent.principal.id,
        "work",
        60,
    )
    assert run.started_at == run.last_heartbeat_at == t0
    assert started.recovered == []
    assert run.day.date == timezone.localdate(t0)


def test_a_second_start_is_refused_with_the_running_runs_details(agent, relief, t0) -> None:
    first = _start(agent, t0, kind="inbox")
    refused = attempt(start_run, principal=relief.principal, kind="other", now=t0 + timedelta(seconds=20))
    assert isinstance(refused, Refusal)
    assert refused.code == "already_running"
    running = refused.extra["running"]
    assert running == {
        "id": first.run.id,
        "kind": "inbox",
        "holder": agent.name,
        "started": t0,
        "last_heartbeat": t0,
        "stale_after_s": 60,
        "stale_in_s": 40,
    }
    assert refused.extra["retry_after_s"] == 40
    assert str(first.run.id) in refused.reason
    assert list(Run.objects.values_list("id", "status")) == [(first.run.id, "running")]


def test_the_database_itself_refuses_a_second_running_row(agent, t0) -> None:
    """The lock is the partial unique index, not the service's pre-check."""
    first = _start(agent, t0)
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(
            holder=agent.principal, last_heartbeat_at=t0, token_digest="x" * 64, day=first.run.day
        )
    # Finished runs do not count: any number of them may exist beside the running one.
    for status in ("ok", "stale", "error"):
        Run.objects.create(
            holder=agent.principal,
            status=status,
            ended_at=t0,
            last_heartbeat_at=t0,
            token_digest="y" * 64,
            day=first.run.day,
        )
    assert Run.objects.filter(status="running").count() == 1


@pytest.mark.parametrize(
    ("stale_after_s", "ok"), [(29, False), (30, True), (900, True), (86_400, True), (86_401, False)]
)
def test_stale_after_bounds(agent, t0, stale_after_s: int, ok: bool) -> None:
    """30..86,400 s is accepted; above the operator's cap (OPERATOR_RUN_MAX_STALE_MINUTES, default 15)
    the run gets the cap, and the start says what was asked."""
    result = attempt(start_run, principal=agent.principal, stale_after_s=stale_after_s, now=t0)
    if ok:
        assert result.run.stale_after_s == min(stale_after_s, 900)
        assert result.asked_stale_after_s == (stale_after_s if stale_after_s > 900 else None)
    else:
        assert isinstance(result, Refusal) and result.code == "out_of_range"
        assert Run.objects.count() == 0


@pytest.mark.parametrize(
    ("kwargs", "code"), [({"note": "x" * 501}, "too_large"), ({"kind": "a\x00"}, "invalid_text")]
)
def test_bad_start_text_is_refused(agent, kwargs: dict, code: str) -> None:
    refused = attempt(start_run, principal=agent.principal, **kwargs)
    assert isinstance(refused, Refusal) and refused.code == code
    assert Run.objects.count() == 0


def test_defaults_kind_and_threshold(agent) -> None:
    run = start_run(principal=agent.principal).run
    assert (run.kind, run.stale_after_s) == ("run", 900)


def test_finishing_releases_the_lock(agent, relief, t0) -> None:
    first = _start(agent, t0)
    finish_run(principal=agent.principal, run_id=first.run.id, token=first.token, status="ok", now=t0)
    second = _start(relief, t0 + timedelta(seconds=1))
    assert second.recovered == []
    assert Run.objects.get(pk=first.run.pk).status == "ok"


# --- stale recovery ---------------------------------------------------------------------------------------
def test_a_silent_holder_is_marked_stale_and_taken_over(agent, relief, t0) -> None:
    held = _start(agent, t0, stale_after_s=60)
    # Within the threshold (and exactly at it): refused.
    for offset in (30, 60):
        refused = attempt(start_run, principal=relief.principal, now=t0 + timedelta(seconds=offset))
        assert isinstance(refused, Refusal) and refused.code == "already_running"
    # Older than the threshold: the next start takes over, and says so.
    taker = _start(relief, t0 + timedelta(seconds=61), kind="relief")
    assert [r.id for r in taker.recovered] == [held.run.id]
    old = Run.objects.get(pk=held.run.pk)
    assert old.status == "stale"
    assert old.ended_at == t0 + timedelta(seconds=61)
    assert old.ended_by_id == relief.principal.id
    assert old.taken_over_by_id == taker.run.id
    assert "no heartbeat for 61 s" in old.end_reason
    assert Run.objects.get(status="running").id == taker.run.id


def test_heartbeats_keep_a_run_alive_past_its_original_threshold(agent, relief, t0) -> None:
    held = _start(agent, t0, stale_after_s=60)
    for minute in range(1, 6):
        now = t0 + timedelta(seconds=50 * minute)
        heartbeat(principal=agent.principal, run_id=held.run.id, token=held.token, now=now)
        refused = attempt(start_run, principal=relief.principal, now=now + timedelta(seconds=45))
        assert isinstance(refused, Refusal) and refused.code == "already_running"
    assert Run.objects.get(pk=held.run.pk).heartbeats == 5


def test_a_late_heartbeat_before_anyone_took_over_keeps_the_run(agent, relief, t0) -> None:
    """Overdue but not replaced: the holder is alive and nobody took its place, so the lease renews."""
    held = _start(agent, t0, stale_after_s=60)
    run = heartbeat(
        principal=agent.principal, run_id=held.run.id, token=held.token, now=t0 + timedelta(seconds=100)
    )
    assert run.status == "running"
    refused = attempt(start_run, principal=relief.principal, now=t0 + timedelta(seconds=150))
    assert isinstance(refused, Refusal) and refused.code == "already_running"


def test_stale_marking_loses_to_a_heartbeat_that_landed_first(agent, t0) -> None:
    """The takeover is a conditional update: a snapshot that looked overdue is not enough."""
    held = _start(agent, t0, stale_after_s=60)
    snapshot = Run.objects.get(pk=held.run.pk)  # last heartbeat t0
    heartbeat(principal=agent.principal, run_id=held.run.id, token=held.token, now=t0 + timedelta(seconds=59))
    marked = _mark_stale(snapshot, principal=None, now=t0 + timedelta(seconds=70), reason="test")
    assert marked is False
    assert Run.objects.get(pk=held.run.pk).status == "running"


def test_recover_stale_runs_marks_only_overdue_runs(agent, t0) -> None:
    assert recover_stale_runs(principal=None, now=t0) == []
    held = _start(agent, t0, stale_after_s=60)
    assert recover_stale_runs(principal=None, now=t0 + timedelta(seconds=60)) == []
    recovered = recover_stale_runs(principal=None, now=t0 + timedelta(seconds=61))
    assert [r.id for r in recovered] == [held.run.id]
    assert recovered[0].status == "stale" and recovered[0].ended_by_id is None
    assert "marked stale by the operator" in recovered[0].end_reason
    assert recover_stale_runs(principal=None, now=t0 + timedelta(seconds=120)) == []


# --- the dead-man's switch and fencing ---------------------------------------------------------------------
def test_heartbeat_refreshes_the_lease_and_keeps_the_latest_progress(agent, t0) -> None:
    held = _start(agent, t0)
    heartbeat(principal=agent.principal, run_id=held.run.id, token=held.token, progress="3 of 9", now=t0)
    run = heartbeat(
        principal=agent.principal, run_id=held.run.id, token=held.token, now=t0 + timedelta(seconds=5)
    )
    assert (run.heartbeats, run.progress, run.last_heartbeat_at) == (2, "3 of 9", t0 + timedelta(seconds=5))


def test_a_wrong_token_or_an_unknown_run_is_refused_and_changes_nothing(agent, t0, row_of) -> None:
    held = _start(agent, t0)
    other = token_digest("run_not-this-one")
    before = row_of(held.run)
    for fn, extra in ((heartbeat, {}), (finish_run, {"status": "ok"})):
        wrong = attempt(fn, principal=agent.principal, run_id=held.run.id, token="run_not-this-one", **extra)
        assert isinstance(wrong, Refusal) and wrong.code == "wrong_token"
        assert "stale" not in wrong.extra  # says nothing about a run it does not hold
        missing = attempt(fn, principal=agent.principal, run_id=held.run.id + 99, token=held.token, **extra)
        assert isinstance(missing, Refusal) and missing.code == "not_found"
    assert row_of(held.run) == before
    assert other != before["token_digest"]


def test_a_heartbeat_on_a_stale_run_says_stop_and_changes_nothing(agent, relief, t0, row_of) -> None:
    held = _start(agent, t0, stale_after_s=60)
    taker = _start(relief, t0 + timedelta(seconds=61))
    before, taker_before = row_of(held.run), row_of(taker.run)
    late = attempt(
        heartbeat,
        principal=agent.principal,
        run_id=held.run.id,
        token=held.token,
        progress="still going",
        now=t0 + timedelta(seconds=62),
    )
    assert isinstance(late, Refusal)
    assert late.as_result()["ok"] is False
    assert late.code == "run_stale"
    assert late.extra["stale"] is True
    assert late.extra["taken_over_by"] == taker.run.id
    assert "Stop" in late.reason
    assert row_of(held.run) == before
    assert row_of(taker.run) == taker_before


def test_a_finish_after_takeover_changes_nothing_and_says_why(agent, relief, t0, row_of) -> None:
    held = _start(agent, t0, stale_after_s=60)
    taker = _start(relief, t0 + timedelta(seconds=61))
    before, taker_before = row_of(held.run), row_of(taker.run)
    for status in ("ok", "error", "cancelled"):
        late = attempt(
            finish_run,
            principal=agent.principal,
            run_id=held.run.id,
            token=held.token,
            status=status,
            summary="done at last",
            now=t0 + timedelta(seconds=90),
        )
        assert isinstance(late, Refusal) and late.code == "run_stale"
        assert f"taken over by run {taker.run.id}" in late.reason
    assert row_of(held.run) == before
    assert row_of(taker.run) == taker_before
    # The taker's own token still works; the old holder's token never works on the new run.
    wrong = attempt(heartbeat, principal=agent.principal, run_id=taker.run.id, token=held.token)
    assert isinstance(wrong, Refusal) and wrong.code == "wrong_token"
    heartbeat(
        principal=relief.principal, run_id=taker.run.id, token=taker.token, now=t0 + timedelta(seconds=91)
    )


def test_a_run_finishes_once(agent, t0, row_of) -> None:
    held = _start(agent, t0)
    done = finish_run(
        principal=agent.principal,
        run_id=held.run.id,
        token=held.token,
        status="ok",
        summary="all good",
        now=t0,
    )
    assert (done.status, done.summary, done.ended_at, done.ended_by_id) == (
        "ok",
        "all good",
        t0,
        agent.principal.id,
    )
    before = row_of(held.run)
    again = attempt(
        finish_run, principal=agent.principal, run_id=held.run.id, token=held.token, status="error"
    )
    assert isinstance(again, Refusal) and again.code == "already_finished"
    assert "already finished as ok" in again.reason
    beat = attempt(heartbeat, principal=agent.principal, run_id=held.run.id, token=held.token)
    assert isinstance(beat, Refusal) and beat.extra["stale"] is True and beat.extra["status"] == "ok"
    assert row_of(held.run) == before


@pytest.mark.parametrize("status", ["ok", "error", "skipped", "cancelled", "stale"])
def test_every_finish_status_closes_the_run(agent, t0, status: str) -> None:
    held = _start(agent, t0)
    run = finish_run(principal=agent.principal, run_id=held.run.id, token=held.token, status=status)
    assert run.status == status and run.ended_at is not None
    assert running_run() is None


def test_run_status_reports_the_holder_and_the_last_finished_run(agent, t0) -> None:
    assert run_status(t0) == {"running": None, "last_finished": None}
    first = _start(agent, t0)
    finish_run(principal=agent.principal, run_id=first.run.id, token=first.token, status="skipped")
    second = _start(agent, t0 + timedelta(seconds=5))
    status = run_status(t0 + timedelta(seconds=100))
    assert status["running"]["id"] == second.run.id
    assert status["running"]["overdue"] is True
    assert status["last_finished"]["id"] == first.run.id
    assert status["last_finished"]["status"] == "skipped"
    assert second.run.token_digest not in str(status) and second.token not in str(status)


# --- through /mcp ------------------------------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_start_heartbeat_finish_over_mcp(agent, relief) -> None:
    async with asgi_http(agent.token) as http, asgi_http(relief.token) as other:
        started = await call(
            http, "operator_run_start", {"kind": "triage", "stale_after_s": 120, "note": "inbox"}
        )
        assert started["ok"] is True
        assert started["heartbeat_every_s"] == 40
        assert started["run"]["holder"] == agent.name and started["run"]["status"] == "running"
        assert started["recovered"] == []
        run_id, token = started["run_id"], started["token"]

        refused = await call(other, "operator_run_start", {})
        assert refused["ok"] is False and refused["error"] == "already_running"
        assert {"id", "kind", "holder", "started", "last_heartbeat"} <= set(refused["running"])
        assert (refused["running"]["id"], refused["running"]["holder"]) == (run_id, agent.name)

        beat = await call(
            http, "operator_run_heartbeat", {"run_id": run_id, "token": token, "progress": "half"}
        )
        assert (beat["ok"], beat["stale"], beat["status"]) == (True, False, "running")

        wrong = await call(other, "operator_run_heartbeat", {"run_id": run_id, "token": "run_guessing-game"})
        assert wrong["ok"] is False and wrong["error"] == "wrong_token"

        done = await call(http, "operator_run_finish", {"run_id": run_id, "token": token, "status": "ok"})
        assert done["ok"] is True and done["run"]["status"] == "ok" and done["run"]["progress"] == "half"

        again = await call(http, "operator_run_finish", {"run_id": run_id, "token": token, "status": "ok"})
        assert again["ok"] is False and again["error"] == "already_finished"

        after = await call(http, "operator_run_heartbeat", {"run_id": run_id, "token": token})
        assert after["ok"] is False and after["stale"] is True

    outcomes = await orm(
        lambda: list(AuditEvent.objects.order_by("id").values_list("tool", "outcome", "error_code"))
    )
    assert outcomes == [
        ("operator_run_start", "ok", ""),
        ("operator_run_start", "refused", "already_running"),
        ("operator_run_heartbeat", "ok", ""),
        ("operator_run_heartbeat", "refused", "wrong_token"),
        ("operator_run_finish", "ok", ""),
        ("operator_run_finish", "refused", "already_finished"),
        ("operator_run_heartbeat", "refused", "already_finished"),
    ]


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_takeover_over_mcp_and_the_old_holders_late_writes(agent, relief) -> None:
    async with asgi_http(agent.token) as http, asgi_http(relief.token) as other:
        started = await call(http, "operator_run_start", {"stale_after_s": 30})
        run_id, token = started["run_id"], started["token"]
        # The holder goes silent for 31 seconds (its last heartbeat moves into the past).
        await orm(
            lambda: Run.objects.filter(pk=run_id).update(
                last_heartbeat_at=timezone.now() - timedelta(seconds=31)
            )
        )
        taken = await call(other, "operator_run_start", {"kind": "relief"})
        assert taken["ok"] is True
        assert [r["id"] for r in taken["recovered"]] == [run_id]
        assert taken["recovered"][0]["status"] == "stale"
        assert taken["recovered"][0]["taken_over_by"] == taken["run_id"]

        late_beat = await call(http, "operator_run_heartbeat", {"run_id": run_id, "token": token})
        assert late_beat == {**late_beat, "ok": False, "error": "run_stale", "stale": True}
        assert late_beat["taken_over_by"] == taken["run_id"]
        late_finish = await call(
            http, "operator_run_finish", {"run_id": run_id, "token": token, "status": "ok"}
        )
        assert late_finish["ok"] is False and late_finish["error"] == "run_stale"

    rows = await orm(lambda: dict(Run.objects.values_list("id", "status")))
    assert rows == {run_id: "stale", taken["run_id"]: "running"}


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("operator_run_start", {"stale_after_s": 29}),
        ("operator_run_start", {"stale_after_s": 86_401}),
        ("operator_run_start", {"kind": "x" * 65}),
        ("operator_run_start", {"holder": "someone-else"}),
        ("operator_run_heartbeat", {"run_id": 1}),
        ("operator_run_heartbeat", {"run_id": 0, "token": "run_0123456789"}),
        ("operator_run_finish", {"run_id": 1, "token": "run_0123456789", "status": "done"}),
        ("operator_run_finish", {"run_id": 1, "token": "run_0123456789"}),
    ],
)
async def test_bad_run_arguments_are_refused_over_mcp_and_nothing_is_written(agent, tool, arguments) -> None:
    async with asgi_http(agent.token) as http:
        answer = await call(http, tool, arguments)
    assert answer["ok"] is False and answer["error"] == "invalid_arguments"
    assert await orm(Run.objects.count) == 0
    assert await orm(OperatorDay.objects.count) == 0
