"""`manage.py operator_tick MODE`: a tick wrapped in a run (start, heartbeat, finish) that cron or a
systemd timer can call safely — exit codes included, checked on real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from operator_site.cross_domain import ticks
from operator_site.cross_domain.management.commands import operator_tick as command
from operator_site.cross_domain.tests.test_ticks import row_counts
from operator_site.models import Principal
from operator_site.refusals import Refusal
from runs.lock import finish_run, start_run
from runs.models import Observation, OperatorDay, ProgressEntry, Run, Tick
from tests.fixtures import ROOT, database_url_of_this_run

pytestmark = pytest.mark.django_db


def run_command(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command("operator_tick", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_a_morning_tick_runs_under_its_own_run(db) -> None:
    answer = run_command("morning")
    run = Run.objects.get()
    assert answer["ok"] is True and answer["run"]["status"] == "ok"
    assert (run.kind, run.status, run.holder.name) == ("tick:morning", "ok", ticks.TICK_PRINCIPAL)
    assert run.heartbeats == 2  # one fencing the tick, one after it
    assert run.summary.startswith("morning: day")
    tick = Tick.objects.get()
    assert (tick.mode, tick.run) == ("morning", run)
    assert answer["tick"]["packet"]["ok"] is True
    assert answer["delivery"] == {"delivered": [], "held": [], "released": [], "failed": []}


def test_a_check_in_links_its_progress_to_the_run(db) -> None:
    answer = run_command("check-in")
    run = Run.objects.get()
    entry = ProgressEntry.objects.get()
    assert (entry.run, entry.tick) == (run, "check-in")
    assert answer["tick"]["progress"]["run_id"] == run.id


def test_a_repeated_night_changes_nothing_but_its_run(db) -> None:
    run_command("night")
    day = OperatorDay.objects.get()
    summary = day.summary
    again = run_command("night")
    assert again["tick"]["already_closed"] is True
    assert OperatorDay.objects.get().summary == summary
    assert Tick.objects.filter(mode="night").count() == 1
    assert list(Run.objects.order_by("id").values_list("status", flat=True)) == ["ok", "ok"]


def test_status_takes_no_run_and_writes_nothing(agent) -> None:
    held = start_run(principal=agent.principal, kind="busy")
    before = row_counts()
    answer = run_command("status")
    assert row_counts() == before
    assert answer["wrote"] is False and answer["runs"]["running"]["id"] == held.run.id
    assert not Principal.objects.filter(name=ticks.TICK_PRINCIPAL).exists()  # not even created


def test_a_held_lock_exits_75_and_does_nothing(agent) -> None:
    held = start_run(principal=agent.principal, kind="inbox-triage")
    before = {k: v for k, v in row_counts().items() if k != "operator_site.Principal"}
    with pytest.raises(CommandError) as failed:
        call_command("operator_tick", "morning", stdout=StringIO())
    assert failed.value.returncode == command.EXIT_LOCK_HELD == 75
    message = str(failed.value)
    assert f"run {held.run.id} (inbox-triage, held by scout" in message and "Nothing was done" in message
    assert {k: v for k, v in row_counts().items() if k != "operator_site.Principal"} == before


def test_a_stale_holder_is_taken_over_by_the_tick(agent) -> None:
    dead = start_run(
        principal=agent.principal, kind="dead", stale_after_s=30, now=timezone.now() - timedelta(minutes=5)
    )
    answer = run_command("check-in")
    assert answer["run"]["status"] == "ok"
    assert Run.objects.get(pk=dead.run.id).status == "stale"


def test_a_refused_tick_finishes_its_run_as_error_and_exits_1(db) -> None:
    tomorrow = (timezone.localdate() + timedelta(days=1)).isoformat()
    with pytest.raises(CommandError) as failed:
        call_command("operator_tick", "night", "--date", tomorrow, stdout=StringIO())
    assert failed.value.returncode == 1
    run = Run.objects.get()
    assert run.status == "error" and "date_in_future" in run.summary
    assert OperatorDay.objects.filter(date=tomorrow).count() == 0 and Tick.objects.count() == 0


def test_a_tick_whose_run_was_taken_over_commits_nothing(db) -> None:
    principal = Principal.objects.service(ticks.TICK_PRINCIPAL)
    started = command.start_tick_run(principal, "check-in", 900)
    # Another host marked it stale and took the lock over before the tick's transaction began.
    Run.objects.filter(pk=started.run.id).update(
        status="stale", ended_at=timezone.now(), end_reason="taken over in the test"
    )
    before = row_counts()
    with pytest.raises(Refusal) as refused:
        command.fenced_tick(started, principal, "check-in", None)
    assert refused.value.code == "run_stale"
    assert row_counts() == before
    answer = command.Command().tick_then_finish(started, principal, "check-in", None, False)
    assert answer["ok"] is False and answer["run"]["status"] == "stale"
    assert Run.objects.get(pk=started.run.id).status == "stale"  # not overwritten by a finish
    assert ProgressEntry.objects.count() == 0 and Tick.objects.count() == 0


def test_observe_without_a_brain_is_reported_and_the_tick_still_counts(db, settings) -> None:
    settings.BRAIN_URL = ""
    answer = run_command("check-in", "--observe")
    assert answer["observe"]["status"] == "brain_not_configured"
    assert answer["run"]["status"] == "ok" and "observe: brain_not_configured" in answer["run"]["summary"]
    assert Observation.objects.count() == 0
    with pytest.raises(CommandError) as refused:
        call_command("operator_tick", "night", "--observe", stdout=StringIO())
    assert refused.value.returncode == 2


# --- real processes: what cron and systemd see -----------------------------------------------------------
def manage(*args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DATABASE_URL": database_url_of_this_run(),
        "OPERATOR_NO_VENV": "1",
        "OPERATOR_DELIVERY": "off",
    }
    return subprocess.run(
        [sys.executable, "manage.py", "operator_tick", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.django_db(transaction=True)
def test_exit_codes_of_the_real_command(agent) -> None:
    status = manage("status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["wrote"] is False

    morning = manage("morning", "--json")
    assert morning.returncode == 0, morning.stderr
    assert json.loads(morning.stdout)["run"]["status"] == "ok"

    held = start_run(principal=agent.principal, kind="inbox-triage")
    locked = manage("check-in")
    assert locked.returncode == 75, (locked.returncode, locked.stderr)
    assert "another run holds the lock" in locked.stderr and f"run {held.run.id}" in locked.stderr
    assert locked.stdout == ""

    bad_mode = manage("lunch")
    assert bad_mode.returncode == 2 and "invalid choice" in bad_mode.stderr, bad_mode.stderr
    bad_date = manage("night", "--date", "yesterday")
    assert bad_date.returncode == 2, bad_date.stderr

    finish_run(principal=agent.principal, run_id=held.run.id, token=held.token, status="ok")
    future = manage("night", "--date", (timezone.localdate() + timedelta(days=2)).isoformat())
    assert future.returncode == 1 and "date_in_future" in future.stderr, (future.returncode, future.stderr)
    night = manage("night")
    assert night.returncode == 0, night.stderr
    assert list(Tick.objects.order_by("id").values_list("mode", flat=True)) == ["morning", "night"]


# --- what a person reads: a short summary by default, JSON with --json -------------------------------------
def test_a_tick_prints_a_short_summary_by_default(db, settings) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    out = StringIO()
    call_command("operator_tick", "morning", stdout=out)
    text = out.getvalue()
    run = Run.objects.get()
    lines = text.strip().splitlines()
    assert lines[0] == f"operator_tick morning: ok (run {run.id})"
    assert run.summary in text and "notices: none due" in text
    assert len(lines) <= 8 and "{" not in text  # not the ~240 lines of JSON


def test_the_status_summary_names_the_lock_holder(agent) -> None:
    held = start_run(principal=agent.principal, kind="inbox-triage")
    out = StringIO()
    call_command("operator_tick", "status", stdout=out)
    text = out.getvalue()
    assert text.startswith("operator_tick status: ") and "nothing was written" in text
    assert f"run lock: held by run {held.run.id} (inbox-triage, scout" in text


def test_the_summary_says_console_e_mail_was_not_sent() -> None:
    from operator_site.mail import NOT_SENT  # noqa: F401 - the wording lives there

    answer = {"mode": "morning", "run_id": 3, "run": {"status": "ok"}, "delivery": {"delivered": [1, 2]}}
    from django.test import override_settings

    with override_settings(EMAIL_BACKEND="operator_site.mail.ConsoleBackend"):
        assert "notices: 2 printed to the console, not sent" in command.tick_summary(answer)
    with override_settings(EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend"):
        assert "notices: 2 delivered" in command.tick_summary(answer)
