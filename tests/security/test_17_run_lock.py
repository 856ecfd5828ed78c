# ruff: noqa: E501  (the tables read best one row per line)
"""Check 17 — the run lock serves the person: no caller holds it longer than the operator allows.

- **Asking for a long lease.** An agent's `operator_run_start` with every long `stale_after_s` (a
  day, an hour, just over the cap, as text) gets the operator's cap (`OPERATOR_RUN_MAX_STALE_MINUTES`,
  15 minutes unless set), is told so, and the next start takes the lock over once the capped
  threshold has passed without a heartbeat. The cap follows the setting.
- **Holding on while alive.** A holder that keeps sending heartbeats is ended by the person from the
  admin ("End this run"): the lock is free at once, the end is recorded (who, when, why; the admin's
  history), and the old holder's later heartbeats and finish change nothing and tell it to stop.
  Only a person may end a run; a page shown twice, a finished run, bad input — never a 5xx.
- **A killed worker.** A real `manage.py operator_execute` process kept alive by its background
  heartbeat through a brain call longer than its threshold is SIGKILLed: its run is recovered by
  the next start within the short threshold of the operator's workers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.db import transaction
from django.test import Client
from django.utils import timezone

from intents.lifecycle import ActionInput, record_intent
from operator_site.refusals import Refusal
from runs.keepalive import WORKER_STALE_AFTER_S, KeepAlive
from runs.lock import end_run, finish_run, heartbeat, start_run
from runs.models import Run
from tests.brain_server import running_brain
from tests.fixtures import ROOT, asgi_http, call, database_url_of_this_run, orm

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

LONG_ASKS = [86_400, 3_600, 901, 1_800, "86400", 86_400.0]


def _start_later(principal: Any, seconds: float) -> Any:
    try:
        return start_run(principal=principal, kind="next", now=timezone.now() + timedelta(seconds=seconds))
    except Refusal as refusal:
        return refusal


@pytest.mark.parametrize("cap_minutes", [15, 2])
async def test_a_long_stale_after_is_capped_and_the_lock_is_recovered_in_time(
    principals, scorecard, no_rate_limit, settings, cap_minutes: int
) -> None:
    settings.OPERATOR_RUN_MAX_STALE_MINUTES = cap_minutes
    cap = cap_minutes * 60
    agent, other = principals["full_agent"], principals["other_human"]
    found = []
    async with asgi_http(agent.token) as http:
        for asked in LONG_ASKS:
            answer = await call(http, "operator_run_start", {"kind": "hog", "stale_after_s": asked})
            if not answer.get("ok"):
                found.append(f"{asked!r}: {answer}")
                continue
            granted = answer["run"]["stale_after_s"]
            capped = answer.get("stale_after_capped") or {}
            if granted != cap or capped.get("granted") != cap or capped.get("asked") != int(asked):
                found.append(f"{asked!r}: granted {granted}, {capped}")
            run_id = answer["run_id"]
            # Before the capped threshold: still held. After it: the next start takes over.
            early = await orm(_start_later, other.principal, cap - 5)
            late = await orm(_start_later, other.principal, cap + 1)
            if not isinstance(early, Refusal) or early.code != "already_running":
                found.append(f"{asked!r}: a start before the cap was not refused: {early}")
            if isinstance(late, Refusal) or [r.id for r in late.recovered] != [run_id]:
                found.append(f"{asked!r}: a start after the cap did not recover run {run_id}: {late}")
                continue
            await orm(
                lambda late=late: finish_run(
                    principal=other.principal, run_id=late.run.id, token=late.token, status="ok"
                )
            )
    scorecard(
        17,
        f"lock-holding: long stale_after_s capped at {cap_minutes} min, recovered in time",
        cases=len(LONG_ASKS),
        bypasses=len(found),
        misses=found,
    )
    assert found == []


async def test_a_too_long_or_malformed_stale_after_is_refused_not_stored(principals, no_rate_limit) -> None:
    agent = principals["full_agent"]
    async with asgi_http(agent.token) as http:
        for asked in (86_401, 10**30, -1, 29, True, "a day", 1.5):
            answer = await call(http, "operator_run_start", {"stale_after_s": asked})
            assert answer["error"] == "invalid_arguments", (asked, answer)
    assert await orm(Run.objects.count) == 0


def _end(client: Client, run_id: int, reason: str = "") -> Any:
    return client.post(f"/admin/runs/run/{run_id}/end/", {"reason": reason})


def test_the_person_ends_a_run_held_alive_and_the_old_holder_is_refused(principals, scorecard) -> None:
    agent, owner = principals["full_agent"], principals["owner"]
    held = start_run(principal=agent.principal, kind="hog", stale_after_s=900)
    heartbeat(principal=agent.principal, run_id=held.run.id, token=held.token)  # alive
    client = Client()
    client.force_login(owner.principal.user)
    found = []

    page = client.get(f"/admin/runs/run/{held.run.id}/end/")
    if (
        page.status_code != 200
        or b"End this run" not in page.content
        or Run.objects.get(pk=held.run.id).status != "running"
    ):
        found.append(f"GET: {page.status_code}, or it changed the run")
    if b"End this run" not in client.get(f"/admin/runs/run/{held.run.id}/change/").content:
        found.append("no 'End this run' on the run's page")
    response = _end(client, held.run.id, "stuck for hours; ending it")
    run = Run.objects.get(pk=held.run.id)
    if response.status_code != 302 or run.status != "cancelled" or run.ended_by_id != owner.principal.id:
        found.append(f"POST: HTTP {response.status_code}, run {run.status} ended by {run.ended_by_id}")
    if (
        "stuck for hours" not in run.end_reason
        or not LogEntry.objects.filter(object_id=str(run.pk), change_message__contains="Ended").exists()
    ):
        found.append(f"not recorded: {run.end_reason!r}")
    beats = run.heartbeats
    # The old holder: its heartbeat and finish change nothing and tell it to stop.
    for action in ("heartbeat", "finish"):
        try:
            if action == "heartbeat":
                heartbeat(principal=agent.principal, run_id=run.pk, token=held.token)
            else:
                finish_run(principal=agent.principal, run_id=run.pk, token=held.token, status="ok")
            found.append(f"the old holder's {action} was accepted")
        except Refusal as refusal:
            if refusal.code != "run_ended" or refusal.extra.get("stale") is not True:
                found.append(f"{action}: {refusal.code} {refusal.extra}")
    after = Run.objects.get(pk=run.pk)
    if (after.status, after.heartbeats, after.ended_by_id) != ("cancelled", beats, owner.principal.id):
        found.append("the old holder changed the ended run")
    # The lock is free at once.
    try:
        start_run(principal=principal_of(principals, "other_human"), kind="next")
    except Refusal as refusal:
        found.append(f"the lock was not freed: {refusal.code}")
    # A second POST (a double click, a stale tab) changes nothing.
    again = _end(client, held.run.id, "again")
    if again.status_code != 409 or Run.objects.get(pk=run.pk).end_reason != after.end_reason:
        found.append(f"second POST: HTTP {again.status_code}")
    scorecard(
        17,
        "lock-holding: a live holder ended by the person (admin), old token refused",
        cases=7,
        bypasses=len(found),
        misses=found,
    )
    assert found == []


def principal_of(principals: Any, name: str) -> Any:
    return principals[name].principal


def test_over_mcp_the_old_holder_is_told_to_stop(principals) -> None:
    """The same through the tools: after the person ended the run, operator_run_heartbeat and
    operator_run_finish answer `stale: true` (stop), and nothing changes."""
    from tests.security.helpers import run_tool

    agent = principals["full_agent"].principal
    start = run_tool(agent, "operator_run_start", {"kind": "hog"})
    end_run(principal=principal_of(principals, "owner"), run_id=start["run_id"], reason="enough")
    for tool, extra in (("operator_run_heartbeat", {}), ("operator_run_finish", {"status": "ok"})):
        answer = run_tool(agent, tool, {"run_id": start["run_id"], "token": start["token"], **extra})
        assert (answer["ok"], answer["error"], answer["stale"]) == (False, "run_ended", True), answer
        assert "ended by owner" in answer["reason"]


def test_only_a_person_can_end_a_run_and_no_input_makes_a_5xx(
    principals, scorecard, django_user_model
) -> None:
    agent, owner = principals["full_agent"], principals["owner"]
    held = start_run(principal=agent.principal, kind="hog")
    helper = django_user_model.objects.create_user(
        "helper", password="pw-helper-123", is_staff=True, is_superuser=True
    )
    found = []
    attempts = 0
    # A staff login not linked to a human principal, and anonymous: refused, nothing changes.
    for login in (helper, None):
        client = Client()
        if login is not None:
            client.force_login(login)
        attempts += 1
        response = _end(client, held.run.id, "x")
        if response.status_code not in (302, 403) or Run.objects.get(pk=held.run.id).status != "running":
            found.append(
                f"{login}: HTTP {response.status_code}, run {Run.objects.get(pk=held.run.id).status}"
            )
        if login is None and "/login/" not in response.get("Location", ""):
            found.append("anonymous was not sent to the login page")
    # The service refuses any principal but an active human.
    for principal in (agent.principal, principal_of(principals, "morning_runner")):
        attempts += 1
        try:
            end_run(principal=principal, run_id=held.run.id)
            found.append(f"{principal.name} ended a run")
        except Refusal as refusal:
            if refusal.code != "not_human":
                found.append(f"{principal.name}: {refusal.code}")
    # Bad input from the person: 400 / 404, never a 5xx, nothing changed.
    client = Client()
    client.force_login(owner.principal.user)
    bad = [
        (held.run.id, "r" * 201),
        (held.run.id, "nul\x00byte"),
        (held.run.id, "x" * 100_000),
        (10**30, "x"),
        (2**63, "x"),
        (999_999, "x"),
    ]
    for run_id, reason in bad:
        attempts += 1
        response = client.post(f"/admin/runs/run/{run_id}/end/", {"reason": reason})
        if response.status_code >= 500 or response.status_code not in (400, 404):
            found.append(f"run {run_id}, reason {str(reason)[:20]!r}: HTTP {response.status_code}")
    for method in ("put", "delete"):
        attempts += 1
        if getattr(client, method)(f"/admin/runs/run/{held.run.id}/end/").status_code != 405:
            found.append(f"{method}: not 405")
    if Run.objects.get(pk=held.run.id).status != "running":
        found.append("a refused attempt changed the run")
    # A finished run: there is nothing to end (409).
    finish_run(principal=agent.principal, run_id=held.run.id, token=held.token, status="ok")
    attempts += 1
    if _end(client, held.run.id, "late").status_code != 409:
        found.append("ending a finished run was not refused")
    scorecard(
        17,
        "lock-holding: only a person ends a run; bad input never a 5xx",
        cases=attempts,
        bypasses=len(found),
        misses=found,
    )
    assert found == []


def _one_off(token: str) -> str:
    return token[:-1] + ("B" if token.endswith("A") else "A")


def test_no_tool_lets_an_agent_end_or_steal_anothers_run(principals, scorecard) -> None:
    from tests.security.helpers import run_tool

    holder, thief = principals["full_agent"].principal, principals["morning_runner"].principal
    start = run_tool(holder, "operator_run_start", {"kind": "held"})
    found = []
    attempts = [
        (
            "operator_run_finish",
            {"run_id": start["run_id"], "token": "run_" + "x" * 43, "status": "cancelled"},
        ),
        (
            "operator_run_finish",
            # One character off (a 32-byte token's last character is one of 16: never the same one).
            {"run_id": start["run_id"], "token": _one_off(start["token"]), "status": "stale"},
        ),
        ("operator_run_heartbeat", {"run_id": start["run_id"], "token": "run_guess_guess"}),
        ("operator_run_start", {"kind": "steal", "stale_after_s": 30}),
    ]
    full = principals["full_agent"].principal
    for tool, arguments in attempts:
        answer = run_tool(full if tool == "operator_run_start" else thief, tool, arguments)
        if answer.get("ok"):
            found.append(f"{tool}: {answer}")
    if Run.objects.get(pk=start["run_id"]).status != "running" or Run.objects.count() != 1:
        found.append("the held run changed or a second run started")
    scorecard(
        17,
        "lock-holding: no tool ends or steals another's run",
        cases=len(attempts),
        bypasses=len(found),
        misses=found,
    )
    assert found == []


def test_keepalive_beats_in_the_background_and_stops_when_the_run_is_ended(principals) -> None:
    agent = principals["full_agent"].principal
    started = start_run(principal=agent, kind="worker", stale_after_s=30)
    with KeepAlive(started, agent, every_s=0.2, progress="working") as alive:
        deadline = time.monotonic() + 20
        while alive.beats < 3:
            assert time.monotonic() < deadline, "no background heartbeat"
            time.sleep(0.05)
        assert Run.objects.get(pk=started.run.id).heartbeats >= 3
        end_run(principal=principal_of(principals, "owner"), run_id=started.run.id, reason="stop")
        while alive.lost is None:
            assert time.monotonic() < deadline, "the keepalive did not notice the end"
            time.sleep(0.05)
    assert alive.lost.code == "run_ended"


def _subprocess_env(brain_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url_of_this_run(),
        "BRAIN_URL": brain_url,
        "BRAIN_TOKEN": "brain-token",
        "BRAIN_TIMEOUT_S": "60",
        "OPERATOR_NO_VENV": "1",
    }


def test_a_killed_executor_gives_the_lock_back_within_its_short_threshold(
    principals, scorecard, settings
) -> None:
    """A real executor process in a brain call longer than its threshold (30 s) stays alive by its
    background heartbeat; SIGKILLed, its run is recovered by the next start 30 s after its last
    heartbeat — not after the 15 minutes a run used to get, nor the day an agent could ask for."""
    agent = principals["full_agent"].principal
    with running_brain(stall_s=120) as stalling:
        settings.BRAIN_URL = stalling.url
        with transaction.atomic():
            record_intent(principal=agent, action=ActionInput(type="note", title="slow note"))
        process = subprocess.Popen(
            [sys.executable, "manage.py", "operator_execute", "--stale-after", "30", "--timeout", "90"],
            cwd=ROOT,
            env=_subprocess_env(stalling.url),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        found = []
        try:
            deadline = time.monotonic() + 90
            while True:  # past its 30 s threshold, inside one brain call
                run = Run.objects.filter(kind="executor").first()
                if (
                    run is not None
                    and stalling.calls
                    and (timezone.now() - run.started_at).total_seconds() > 36
                ):
                    break
                assert process.poll() is None, "the executor exited"
                assert time.monotonic() < deadline, "the executor did not start its brain call"
                time.sleep(0.5)
            alive_for = (timezone.now() - run.started_at).total_seconds()
            if run.status != "running" or run.overdue_s(timezone.now()) > 0 or run.heartbeats < 3:
                found.append(
                    f"the live worker's run looked dead: {run.status}, {run.heartbeats} beats, last {run.last_heartbeat_at}"
                )
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=20)
    dead = Run.objects.get(kind="executor")
    if dead.status != "running":
        found.append(f"the killed run is {dead.status}")
    other = principals["other_human"].principal
    early = dead.last_heartbeat_at + timedelta(seconds=25)
    try:
        start_run(principal=other, kind="too-early", now=early)
        found.append("a start within the threshold took over a run that was alive then")
    except Refusal as refusal:
        if refusal.code != "already_running":
            found.append(refusal.code)
    late = start_run(principal=other, kind="after", now=dead.last_heartbeat_at + timedelta(seconds=31))
    if [r.id for r in late.recovered] != [dead.id]:
        found.append("the killed worker's run was not recovered 31 s after its last heartbeat")
    if WORKER_STALE_AFTER_S > 120:
        found.append(f"the workers' default threshold is {WORKER_STALE_AFTER_S} s")
    scorecard(
        17,
        f"lock-holding: a killed executor (alive {alive_for:.0f} s in a stalled call) recovered after 30 s",
        cases=3,
        bypasses=len(found),
        misses=found,
    )
    assert found == []
