# ruff: noqa: E501  (the tables read best one row per line)
"""Check 16 — faults and poisoned inputs: no single input stops the machine.

- **Poisoned rows, per worker kind.** Each worker — the executor, the morning tick's sweeps, the
  tick command's steps after the tick, the observe step, notice delivery and release, the approval
  expiry — is given work in which ONE item raises (any exception: the issue's note whose `due`
  overflows in a time zone east of UTC, a handler bug, a claim that fails, a sweep that fails...).
  That item is failed or skipped with a recorded reason (never the exception's text), and every other
  item is done.
- **Non-finite numbers.** NaN, Infinity, -Infinity and 1e400 anywhere in a body are a JSON-RPC parse
  error (-32700: RFC 8259 has no such numbers), nothing written; as text in a number field, or
  inside JSON sent in a string, they are `invalid_arguments` with the call's audit row.
- **Range at the door.** Every integer property of every tool beyond the database's range, every
  date-time that cannot be written in UTC and in the operator's zone (east and west of UTC), dates
  at the ends of the calendar, unstorable text inside JSON in a string: `invalid_arguments` naming the
  field, an audit row for every call, never `internal_error`, never database text.
- **Unexpected failures.** A tool that raises (whatever it raises, with SQL in its message) answers
  `internal_error` with an id that is also in the log, no exception text; its audit row is written.
- **Rows written below the door** (a damaged or hand-edited database). A world- or goal-model change
  row whose image is not an object (an array, a string, a number, a boolean, a change of nothing, an
  object its readers cannot read), names no entity of the model, or holds null where the previous
  version left an object; a version's evidence that is not an object: the reads as of a version
  answer `damaged_row` naming the row, every page that shows it says "damaged row #N", every revert
  that needs it refuses with nothing written. Every server-set timestamp at an end of the calendar
  the operator's zone cannot write (9999 east of UTC, year 1 west of it): every admin page answers.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.core.management import CommandError, call_command
from django.db import DataError, IntegrityError, OperationalError, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from intents import directives, executor, handlers, lifecycle
from intents.models import Intent, IntentStatus
from operator_site import notifications
from operator_site.calendar_edge import EDGE_NOTE_ID
from operator_site.cross_domain import ticks
from operator_site.face import registry
from operator_site.models import AuditEvent, Notification, Principal
from operator_site.refusals import Refusal
from operator_site.revert_links import revert_token
from runs import observe as observe_module
from runs.lock import start_run
from runs.models import Observation, Run
from runs.observe import Probe, observe
from tests.brain_server import running_brain
from tests.fixtures import asgi_http, orm
from tests.security.helpers import envelope_of, message_of, no_traceback, post, run_tool, tools_call

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

EAST = "Pacific/Kiritimati"  # UTC+14: the furthest east
WEST = "Etc/GMT+12"  # UTC-12: the furthest west
POISON_DUE = datetime(9999, 12, 31, 23, 30, tzinfo=UTC)  # the issue's note
DATABASE_WORDS = (
    "SELECT",
    "INSERT",
    "psycopg",
    "sqlite",
    "syntax error",
    "constraint",
    "Traceback",
    "violates",
)


@pytest.fixture
def zone(settings: Any) -> Any:
    """Set the operator's time zone (Django's too: pages render in it)."""

    def set_zone(name: str) -> None:
        settings.OPERATOR_TIME_ZONE = name
        settings.TIME_ZONE = name

    return set_zone


@pytest.fixture
def brain(settings: Any) -> Iterator[Any]:
    with running_brain() as b:
        settings.BRAIN_URL, settings.BRAIN_TOKEN = b.url, "brain-token"
        yield b


def _record(principal: Any, **action: Any) -> Intent:
    with transaction.atomic():
        intent, _ = lifecycle.record_intent(principal=principal, action=lifecycle.ActionInput(**action))
    return intent


def _leaks(text: str) -> list[str]:
    return [w for w in DATABASE_WORDS if w.lower() in text.lower()]


# =====================================================================================================
# Poisoned rows, per worker kind
# =====================================================================================================
def test_the_issues_note_whose_due_overflows_east_of_utc_stops_nothing(
    principals, scorecard, zone, brain, client: Client
) -> None:
    """The issue's case, on the worker and on the pages: a queued note due 9999-12-31T23:30Z with the
    operator's zone at UTC+14. (Such a row cannot be recorded any more — the door refuses it — so it
    is written straight into the table, as a row stored before the fix would be.)"""
    zone(EAST)
    agent = principals["full_agent"].principal
    poisoned = _record(agent, type="note", title="poisoned note", body="x")
    Intent.objects.filter(pk=poisoned.pk).update(due=POISON_DUE)
    with pytest.raises(OverflowError):  # control: the row really is poisoned in this zone
        POISON_DUE.astimezone(ZoneInfo(EAST))
    newer = [_record(agent, type="reminder", title=f"newer reminder {n}") for n in range(3)]

    report = executor.run_executor(timeout_s=20)

    misses = []
    if report.run_status != "ok":
        misses.append(f"the pass finished {report.run_status}")
    done = {o.intent_id: o.status for o in report.outcomes}
    if any(done.get(i.pk) != "executed" for i in newer):
        misses.append(f"newer intents not executed: {done}")
    if Intent.objects.get(pk=poisoned.pk).status not in {"executed", "failed"}:
        misses.append("the poisoned note was left claimable")
    # The pages that showed it: the intent's admin page and the approval page.
    client.force_login(principals["owner"].principal.user)
    for url in (
        f"/admin/intents/intent/{poisoned.pk}/change/",
        f"/admin/intents/intent/{poisoned.pk}/decide/",
    ):
        response = client.get(url)
        if response.status_code != 200:
            misses.append(f"{url}: HTTP {response.status_code}")
    pending = _record(agent, type="email", title="ask", recipient="a@example.com")
    Intent.objects.filter(pk=pending.pk).update(due=POISON_DUE)
    if client.get(f"/admin/intents/intent/{pending.pk}/decide/").status_code != 200:
        misses.append("the decide page of a pending intent with the poisoned due")
    scorecard(
        16,
        "poisoned rows: the issue's note (due overflows at UTC+14)",
        cases=6,
        bypasses=len(misses),
        misses=misses,
    )
    assert misses == []


def test_executor_one_intent_raising_anywhere_fails_alone(
    principals, scorecard, brain, monkeypatch, caplog
) -> None:
    """Three ways one intent can raise — building its call, carrying it out, claiming it — among
    healthy intents: the healthy ones are executed, the raising ones failed (or, for a claim, left as
    they were) with a recorded reason that names an error id, never the exception's text."""
    agent = principals["full_agent"].principal
    build_raises = _record(agent, type="draft", title="build raises", body="b")
    mark_raises = _record(agent, type="note", title="attempt raises", body="m")
    claim_raises = _record(agent, type="note", title="claim raises", body="c")
    healthy = [_record(agent, type="reminder", title=f"healthy {n}") for n in range(3)]

    real_handler_for, real_mark, real_transition = (
        executor.handler_for,
        executor._mark_attempt,
        executor.transition_intent,
    )

    def handler_for(action_type: str) -> Any:
        handler = real_handler_for(action_type)
        if action_type == "draft":

            def build(intent: Intent) -> dict[str, Any]:
                raise KeyError("SELECT secret FROM vault -- a handler bug")

            return handlers.Handler(handler.tool, build, handler.does)
        return handler

    def mark_attempt(claim: Any, **kwargs: Any) -> bool:
        if claim.intent.pk == mark_raises.pk:
            raise OperationalError('relation "vault" does not exist: INSERT INTO vault')
        return real_mark(claim, **kwargs)

    def transition(*, intent_id: int, **kwargs: Any) -> Any:
        if intent_id == claim_raises.pk and kwargs.get("to") == IntentStatus.EXECUTING:
            raise IntegrityError('duplicate key value violates unique constraint "x"')
        return real_transition(intent_id=intent_id, **kwargs)

    monkeypatch.setattr(executor, "handler_for", handler_for)
    monkeypatch.setattr(executor, "_mark_attempt", mark_attempt)
    monkeypatch.setattr(executor, "transition_intent", transition)
    caplog.set_level(logging.ERROR, logger="operator.executor")

    report = executor.run_executor(timeout_s=20)

    misses = []
    statuses = {
        i.pk: Intent.objects.get(pk=i.pk) for i in (build_raises, mark_raises, claim_raises, *healthy)
    }
    if any(statuses[i.pk].status != "executed" for i in healthy):
        misses.append(f"healthy: {[statuses[i.pk].status for i in healthy]}")
    for raised in (build_raises, mark_raises):
        row = statuses[raised.pk]
        result = row.execution_result or {}
        if row.status != "failed" or result.get("error") != "internal_error":
            misses.append(f"{raised.title}: {row.status} {result}")
        elif result["error_id"] not in caplog.text or _leaks(json.dumps(result)):
            misses.append(f"{raised.title}: the reason does not match the log, or leaks: {result}")
        elif result.get("called") is not False:
            misses.append(f"{raised.title}: says the brain was called")
    if statuses[claim_raises.pk].status != "queued":
        misses.append(f"claim raises: left {statuses[claim_raises.pk].status}")
    if report.run_status != "ok" or len(brain.calls) != len(healthy):
        misses.append(f"run {report.run_status}, {len(brain.calls)} brain calls")
    scorecard(
        16,
        "poisoned rows: the executor (build, attempt, claim raise)",
        cases=3 + len(healthy),
        bypasses=len(misses),
        misses=misses,
    )
    assert misses == []


SWEEPS = {
    # step name in failed_steps: (module, attribute) to make raise
    "recover_stale_runs": (ticks, "recover_stale_runs"),
    "expire_approvals": (ticks, "expire_pending"),
    "list_lapsed_directives": (ticks, "_lapsed_directives"),
    "release_held_notices": (ticks, "release_held"),
    "packet": (ticks.reads, "context_packet"),
}


def _morning_work(agent: Any, now: datetime) -> dict[str, Any]:
    """One item of work for every sweep of the morning tick."""
    stale = start_run(principal=agent, kind="dead", stale_after_s=30, now=now - timedelta(hours=1))
    expiring = _record(agent, type="email", title="expiring", recipient="x@example.com")
    Intent.objects.filter(pk=expiring.pk).update(expires_at=now - timedelta(minutes=1))
    held = Notification.objects.create(
        kind="approval_request", title="held", state="held", held_reason="quiet"
    )
    lapsed, _ = directives.set_directive(
        principal=agent, kind="quiet", topic=None, minutes=1, reason="r", now=now - timedelta(seconds=61)
    )
    return {"stale": stale.run.pk, "expiring": expiring.pk, "held": held.pk, "lapsed": lapsed.pk}


@pytest.mark.parametrize("failing", list(SWEEPS))
def test_morning_tick_one_sweep_raising_leaves_the_others_done(
    principals, scorecard, monkeypatch, settings, failing: str
) -> None:
    settings.OPERATOR_DELIVERY = "off"
    agent = principals["full_agent"].principal
    now = timezone.now()
    work = _morning_work(agent, now)

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("SELECT * FROM poisoned")

    module, name = SWEEPS[failing]
    monkeypatch.setattr(module, name, boom)
    with transaction.atomic():
        answer = ticks.run_tick(principal=Principal.objects.service(ticks.TICK_PRINCIPAL), mode="morning")

    misses = []
    if [f["step"] for f in answer["failed_steps"]] != [failing] or _leaks(json.dumps(answer["failed_steps"])):
        misses.append(f"failed_steps: {answer['failed_steps']}")
    effects = {
        "recover_stale_runs": Run.objects.get(pk=work["stale"]).status == "stale",
        "expire_approvals": Intent.objects.get(pk=work["expiring"]).status == "expired",
        "release_held_notices": Notification.objects.get(pk=work["held"]).state == "pending",
        "packet": answer["packet"] is not None,
        "list_lapsed_directives": [d["id"] for d in answer["swept"]["directives_lapsed"]["items"]]
        == [work["lapsed"]],
    }
    for step, done in effects.items():
        if step != failing and not done:
            misses.append(f"{step} not done while {failing} failed")
    if not answer["tick"]["id"]:
        misses.append("the tick was not recorded")
    scorecard(
        16, f"poisoned rows: morning tick, {failing} raises", cases=1, bypasses=len(misses), misses=misses
    )
    assert misses == []


def test_expiry_one_poisoned_intent_does_not_stop_the_sweep(principals, scorecard, monkeypatch) -> None:
    agent = principals["full_agent"].principal
    now = timezone.now()
    rows = [
        _record(agent, type="email", title=f"expiring {n}", recipient=f"{n}@example.com") for n in range(3)
    ]
    Intent.objects.filter(pk__in=[r.pk for r in rows]).update(expires_at=now - timedelta(minutes=1))
    real_move = lifecycle.move_intent

    def move(intent: Intent, *args: Any, **kwargs: Any) -> Any:
        if intent.pk == rows[1].pk:
            raise ValueError("poisoned row")
        return real_move(intent, *args, **kwargs)

    monkeypatch.setattr(lifecycle, "move_intent", move)
    expired = lifecycle.expire_pending(now)
    statuses = [Intent.objects.get(pk=r.pk).status for r in rows]
    misses = (
        []
        if (expired, statuses) == ([rows[0].pk, rows[2].pk], ["expired", "pending_approval", "expired"])
        else [f"{expired} {statuses}"]
    )
    scorecard(16, "poisoned rows: approval expiry", cases=3, bypasses=len(misses), misses=misses)
    assert misses == []


def _poison(table: str, column: str, json_text: str) -> None:
    """Write a JSON value below the door, as a damaged or hand-edited database would hold it."""
    from django.db import connection

    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = %s{cast}", [json_text])
        assert cursor.rowcount >= 1


def test_stored_json_of_another_shape_stops_no_read(principals, scorecard) -> None:
    """A tick's report or a day's summary that is not an object, an observation holding a number past
    a double's range (SQLite's JSON_VALID and PostgreSQL's jsonb both take 1e999; the door never
    does): every read that shows them answers, as do the ticks that read them."""
    agent = principals["full_agent"].principal
    with transaction.atomic():
        assert run_tool(agent, "operator_tick", {"mode": "morning"})["ok"]
    with transaction.atomic():
        assert run_tool(agent, "operator_tick", {"mode": "night"})["ok"]
    assert run_tool(
        agent, "operator_record_observation", {"kind": "world", "summary": "s", "data": {"x": 1}}
    )["ok"]
    misses = []
    cases = 0
    for table, column, value in [
        ("runs_tick", "report", '"x"'),
        ("runs_tick", "report", '{"headline": ["not", "text"]}'),
        ("runs_operatorday", "summary", "[1, 2]"),
        ("runs_observation", "data", '{"x": 1e999}'),
    ]:
        _poison(table, column, value)
        for tool, arguments in [
            ("operator_tick", {"mode": "status"}),
            ("operator_history", {}),
            ("operator_context_packet", {}),
            ("operator_state", {}),
        ]:
            cases += 1
            answer = run_tool(agent, tool, arguments)
            if not answer.get("ok", True) or answer.get("error"):
                misses.append(f"{table}.{column}={value} {tool}: {answer.get('error')}")
        cases += 1
        try:
            call_command("operator_tick", "check-in", stdout=io.StringIO())
        except CommandError as failed:
            misses.append(f"{table}.{column}={value} check-in tick: {failed}")
    scorecard(
        16,
        "poisoned rows: stored JSON of another shape, read by ticks and reads",
        cases=cases,
        bypasses=len(misses),
        misses=misses,
    )
    assert misses == []


@pytest.mark.parametrize("failing", ["deliver_notices", "observe"])
def test_tick_command_one_step_after_the_tick_raising_leaves_the_other_done(
    principals, scorecard, monkeypatch, settings, brain, capsys, failing: str
) -> None:
    from operator_site.cross_domain.management.commands import operator_tick as command

    settings.OPERATOR_OBSERVE_PROBES = [
        {"name": "up", "tool": "actions_shell_run", "arguments": {"command": "uptime"}}
    ]
    settings.OPERATOR_DELIVERY = "off"
    Notification.objects.create(kind="note", title="due notice")

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("INSERT INTO nowhere")

    if failing == "deliver_notices":
        monkeypatch.setattr(command, "deliver_due", boom)
    else:
        monkeypatch.setattr(observe_module, "observe_step", boom)
    with pytest.raises(CommandError) as raised:
        call_command("operator_tick", "morning", "--observe", "--json")
    answer = json.loads(capsys.readouterr().out)
    misses = []
    if raised.value.returncode != 1 or answer["run"]["status"] != "error":
        misses.append(f"exit {raised.value.returncode}, run {answer['run']}")
    if [f["step"] for f in answer.get("failed_steps", [])] != [failing] or _leaks(json.dumps(answer)):
        misses.append(f"failed_steps: {answer.get('failed_steps')}")
    other_done = (
        Observation.objects.filter(source="brain:actions_shell_run").exists()
        if failing == "deliver_notices"
        else Notification.objects.filter(title="due notice", state="delivered").exists()
    )
    if not other_done:
        misses.append("the other step did not run")
    if answer["tick"]["tick"]["id"] is None:
        misses.append("the tick itself was not recorded")
    scorecard(
        16, f"poisoned rows: tick command, {failing} raises", cases=1, bypasses=len(misses), misses=misses
    )
    assert misses == []


def test_observe_one_probe_raising_leaves_the_others_observed(
    principals, scorecard, brain, monkeypatch, caplog
) -> None:
    probes = [
        Probe("first", "actions_shell_run", {"command": "uptime"}),
        Probe("poisoned", "machines_command_exec", {"command": "df"}),
        Probe("last", "actions_workspace_run", {"command": "git status"}),
    ]
    real_call = observe_module.call_brain

    def call_brain(caller: str, tool: str, *args: Any, **kwargs: Any) -> Any:
        if tool == "machines_command_exec":
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "SELECT garbage")
        return real_call(caller, tool, *args, **kwargs)

    monkeypatch.setattr(observe_module, "call_brain", call_brain)
    caplog.set_level(logging.ERROR, logger="operator.observe")
    report = observe(probes=probes, timeout_s=20)
    outcomes = {p.name: p for p in report.probes}
    misses = []
    if (outcomes["first"].outcome, outcomes["last"].outcome) != ("observed", "observed"):
        misses.append(f"healthy probes: {outcomes}")
    bad = outcomes["poisoned"]
    if bad.outcome != "error" or bad.error != "internal_error" or bad.observation_id is None:
        misses.append(f"poisoned probe: {bad}")
    else:
        row = Observation.objects.get(pk=bad.observation_id)
        if (
            row.kind != "self"
            or row.data["error_id"] not in caplog.text
            or _leaks(row.summary + json.dumps(row.data))
        ):
            misses.append(f"its observation: {row.summary} {row.data}")
    if report.run_status != "error" or [c.tool for c in brain.calls] != [
        "actions_shell_run",
        "actions_workspace_run",
    ]:
        misses.append(f"run {report.run_status}, calls {[c.tool for c in brain.calls]}")
    scorecard(16, "poisoned rows: observe (one probe raises)", cases=3, bypasses=len(misses), misses=misses)
    assert misses == []


def test_delivery_one_notice_raising_leaves_the_others_delivered(
    scorecard, settings, monkeypatch, caplog, mailoutbox
) -> None:
    settings.OPERATOR_NOTIFY_CAP_PER_HOUR = 0
    notices = [Notification.objects.create(kind="note", title=f"notice {n}") for n in range(3)]
    held = [
        Notification.objects.create(kind="note", title=f"held {n}", state="held", held_reason="quiet")
        for n in range(3)
    ]
    real_hold = notifications.hold_reason

    def hold_reason(notice: Notification, now: datetime, judges: Any = None) -> Any:
        if notice.pk in (notices[1].pk, held[1].pk):
            raise RecursionError("SELECT deeply nested")
        return real_hold(notice, now, judges)

    monkeypatch.setattr(notifications, "hold_reason", hold_reason)
    caplog.set_level(logging.ERROR, logger="operator.notifications")
    report = notifications.deliver_due()
    rows = {n.pk: Notification.objects.get(pk=n.pk) for n in (*notices, *held)}
    misses = []
    if sorted(report.released) != sorted([held[0].pk, held[2].pk]):
        misses.append(f"released {report.released}")
    if rows[notices[0].pk].state != "delivered" or rows[notices[2].pk].state != "delivered":
        misses.append("the healthy notices were not delivered")
    bad = rows[notices[1].pk]
    if (
        bad.state != "pending"
        or bad.attempts != 1
        or bad.next_attempt_at <= timezone.now()
        or notices[1].pk not in report.failed
    ):
        misses.append(f"the poisoned notice: {bad.state} {bad.attempts} {bad.next_attempt_at}")
    if _leaks(bad.last_error) or bad.last_error.split("error id ")[1].split()[0] not in caplog.text:
        misses.append(f"its recorded reason: {bad.last_error}")
    if rows[held[1].pk].state != "held":
        misses.append("the poisoned held notice moved")
    # The poison gone, the notice goes out on its retry.
    monkeypatch.setattr(notifications, "hold_reason", real_hold)
    notifications.deliver_due(now=timezone.now() + timedelta(hours=1))
    if Notification.objects.get(pk=bad.pk).state != "delivered":
        misses.append("the notice was not delivered on its retry")
    scorecard(16, "poisoned rows: notice delivery and release", cases=6, bypasses=len(misses), misses=misses)
    assert misses == []


# =====================================================================================================
# Non-finite numbers
# =====================================================================================================
def _raw_call(name: str, arguments_json: str, extra: str = "") -> bytes:
    head = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' + name + '","arguments":'
    return (head + arguments_json + extra + "}}").encode()


NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1E999"]
# Where a non-finite number hides in a body: (tool, arguments JSON with {} for the number, extra).
PLACES = [
    (
        "operator_update_world_model",
        '{"changes":[{"op":"add","kind":"note","key":"k","value":"v","confidence":{}}]}',
        "",
    ),
    ("operator_record_observation", '{"kind":"world","summary":"s","data":{"x":[1,{}]}}', ""),
    ("operator_record_observation", '{"kind":"world","summary":"s","tainted":{}}', ""),
    ("operator_record_instruction", '{"text":"t","actor":{}}', ""),
    ("operator_state", '{"limit":{}}', ""),
    ("operator_list_directives", "{}", ',"_meta":{"progressToken":{}}'),
]


async def test_non_finite_numbers_in_a_body_are_a_parse_error(principals, scorecard, no_rate_limit) -> None:
    owner = principals["owner"]
    cases = misses = 0
    found: list[str] = []
    async with asgi_http(owner.token) as http:
        for number in NON_FINITE:
            bodies = [
                _raw_call(t, a.replace("{}", number) if a != "{}" else a, e.replace("{}", number))
                for t, a, e in PLACES
            ]
            bodies.append(('{"jsonrpc":"2.0","id":' + number + ',"method":"tools/list"}').encode())
            for body in bodies:
                cases += 1
                response = await post(http, body)
                message = message_of(response) or {}
                if (
                    response.status_code != 400
                    or message.get("error", {}).get("code") != -32700
                    or not no_traceback(response.text)
                ):
                    found.append(f"{body[:120]!r}: HTTP {response.status_code} {response.text[:200]}")
    rows = await orm(lambda: (AuditEvent.objects.count(), Observation.objects.count()))
    if rows != (0, 0):
        found.append(f"rows written: audit {rows[0]}, observations {rows[1]}")
    misses = len(found)
    scorecard(
        16,
        "non-finite numbers in the body → -32700, nothing written",
        cases=cases,
        bypasses=misses,
        misses=found,
    )
    assert found == []


# Non-finite numbers that do not come as JSON numbers: as text in a number field, or in JSON sent
# inside a string (the SDK unwraps it): invalid_arguments, each with its audit row.
TEXT_NUMBERS: list[tuple[str, dict[str, Any], str]] = [
    *(("operator_update_world_model", {"changes": [{"op": "add", "kind": "note", "key": "k", "value": "v", "confidence": t}]}, "changes") for t in ("NaN", "Infinity", "-Infinity", "1e400", "nan", "inf")),
    ("operator_record_observation", {"kind": "world", "summary": "s", "data": "[NaN]"}, "data"),
    ("operator_record_observation", {"kind": "world", "summary": "s", "data": '{"x": Infinity}'}, "data"),
    ("operator_record_observation", {"kind": "world", "summary": "s", "tainted": "[-Infinity]"}, "tainted"),
    ("operator_update_world_model", {"changes": '[{"op":"add","kind":"note","key":"k","value":"v","confidence":NaN}]'}, "changes"),
    ("operator_reconcile_goal_model", {"changes": '[{"entity":"project","op":"add","fields":{"title":"t","x":Infinity}}]'}, "changes"),
    ("operator_record_instruction", {"text": "t", "actor": "[NaN]"}, "actor"),
]  # fmt: skip


async def _audited_refusals(
    principals: Any, cases: list[tuple[str, dict[str, Any], str]], code: str = "invalid_arguments"
) -> list[str]:
    owner = principals["owner"]
    found: list[str] = []
    async with asgi_http(owner.token) as http:
        for tool, arguments, field in cases:
            before = await orm(AuditEvent.objects.count)
            response = await post(http, tools_call(tool, arguments))
            message = message_of(response)
            if response.status_code != 200 or not message or "result" not in message:
                found.append(f"{tool} {field}: HTTP {response.status_code} {response.text[:200]}")
                continue
            body, is_error = envelope_of(message)
            if body.get("error") != code or not is_error:
                found.append(
                    f"{tool} {field}={json.dumps(arguments)[:80]}: {body.get('error')} {body.get('reason', '')[:150]}"
                )
            elif code == "invalid_arguments" and not any(
                f["field"].split(".")[0] == field for f in body["fields"]
            ):
                found.append(f"{tool}: names {body['fields']}, not {field}")
            if _leaks(response.text):
                found.append(f"{tool}: database words in the answer: {_leaks(response.text)}")
            audited = await orm(
                lambda: list(AuditEvent.objects.order_by("-id").values_list("tool", "error_code")[:1])
            )
            if await orm(AuditEvent.objects.count) != before + 1 or audited[0] != (tool, code):
                found.append(f"{tool} {field}: no audit row ({audited})")
    return found


async def test_non_finite_numbers_as_text_or_inside_json_text_are_refused_by_name(
    principals, scorecard, no_rate_limit
) -> None:
    found = await _audited_refusals(principals, TEXT_NUMBERS)
    scorecard(
        16,
        "non-finite numbers as text / JSON in a string → invalid_arguments, audited",
        cases=len(TEXT_NUMBERS),
        bypasses=len(found),
        misses=found,
    )
    assert found == []


# =====================================================================================================
# Range at the door
# =====================================================================================================
def _integer_properties() -> list[tuple[str, str, dict[str, Any]]]:
    """Every integer property of every tool (top level), with the tool's first example."""
    out = []
    for spec in registry.all_tools():
        schema = spec.mcp_tool.input_schema
        for prop, prop_schema in schema.get("properties", {}).items():
            options = prop_schema.get("anyOf", [prop_schema])
            if any(o.get("type") == "integer" for o in options):
                out.append((spec.name, prop, dict(spec.examples[0])))
    return out


def _range_cases() -> list[tuple[str, dict[str, Any], str]]:
    cases: list[tuple[str, dict[str, Any], str]] = []
    for tool, prop, example in _integer_properties():
        for value in (2**63, -(2**63) - 1, 10**30):
            cases.append((tool, {**example, prop: value}, prop))
    nested_ints = [
        ("operator_record_action_intent", {"action": {"type": "spend", "title": "t", "amount_cents": 2**63}}, "action"),
        ("operator_reconcile_goal_model", {"changes": [{"entity": "goal", "op": "add", "fields": {"title": "G", "importance": 2**64}}]}, "changes"),
        ("operator_record_instruction", {"text": "t", "refs": [2**63]}, "refs"),
        ("operator_record_observation", {"kind": "world", "summary": "s", "data": {"n": -(2**70)}}, "data"),
    ]  # fmt: skip
    cases += nested_ints
    dues = [
        "9999-12-31T23:30:00Z",  # the issue's value
        "9999-12-31T23:59:59+00:00",
        "9999-12-31T10:00:00-14:00",
        "9999-12-31T00:00:00Z",
        "9999-12-31T23:00",  # no offset: in the operator's zone
        "0001-01-01T00:00:00Z",
        "0001-01-01T05:00:00+14:00",
        "0001-01-01",
        "0001-01-01T10:00",
    ]
    cases += [
        (
            "operator_record_action_intent",
            {"action": {"type": "note", "title": f"due {d}", "due": d}},
            "action",
        )
        for d in dues
    ]
    for tool in ("operator_context_packet", "operator_tick"):
        extra = {"mode": "status"} if tool == "operator_tick" else {}
        cases += [(tool, {**extra, "date": d}, "date") for d in ("0001-01-01", "9999-12-31")]
    long = "k" * 20_001
    cases += [
        ("operator_update_task", {"key": long, "patch": {"title": "t"}}, "key"),
        (
            "operator_log_decision",
            {"title": "t", "decision": "d", "rationale": "r", "alternatives": [long]},
            "alternatives",
        ),
        ("operator_record_instruction", {"text": "t", "refs": [long]}, "refs"),
    ]
    # Unstorable text that only appears once JSON sent inside a string is unwrapped.
    cases += [
        (
            "operator_update_world_model",
            {"changes": '[{"op":"add","kind":"note","key":"k","value":"a\\u0000b"}]'},
            "changes",
        ),
        (
            "operator_update_world_model",
            {"changes": '[{"op":"add","kind":"note","key":"k","value":"a\\ud800b"}]'},
            "changes",
        ),
        ("operator_record_observation", {"kind": "world", "summary": "s", "data": '{"x":"\\udfff"}'}, "data"),
        ("operator_record_observation", {"kind": "world", "summary": "s", "data": '{"a\\u0000":1}'}, "data"),
        ("operator_record_instruction", {"text": "t", "actor": '{"name":"\\u0000"}'}, "actor"),
    ]
    return cases


@pytest.mark.parametrize("zone_name", [EAST, WEST, "UTC"])
async def test_values_out_of_range_are_refused_by_name_and_audited(
    principals, scorecard, no_rate_limit, settings, zone_name: str
) -> None:
    settings.OPERATOR_TIME_ZONE = settings.TIME_ZONE = zone_name
    cases = _range_cases()
    found = await _audited_refusals(principals, cases)
    scorecard(
        16,
        f"range at the door ({zone_name}): integers, date-times, dates, text → invalid_arguments, audited",
        cases=len(cases),
        bypasses=len(found),
        misses=found,
    )
    assert found == []


@pytest.mark.parametrize("zone_name", [EAST, WEST])
async def test_in_range_extremes_are_accepted_and_render_everywhere(
    principals, scorecard, settings, zone_name: str
) -> None:
    """The control: the door is not too tight — the last and first instants it accepts are
    recorded, and the worker and the pages that show them in the operator's zone work."""
    settings.OPERATOR_TIME_ZONE = settings.TIME_ZONE = zone_name
    owner = principals["owner"]
    found = []
    async with asgi_http(owner.token) as http:
        for due in ("9999-12-30T23:59:59Z", "0001-01-02T00:00:00Z", "9999-12-30T00:00"):
            response = await post(
                http,
                tools_call(
                    "operator_record_action_intent",
                    {"action": {"type": "note", "title": f"edge {due}", "due": due}},
                ),
            )
            body, is_error = envelope_of(message_of(response))
            if is_error or body.get("status") != "queued":
                found.append(f"{due}: {body}")
    rows = await orm(
        lambda: list(Intent.objects.filter(title__startswith="edge").values_list("pk", flat=True))
    )

    def pages() -> list[str]:
        client = Client()
        client.force_login(owner.principal.user)
        bad = []
        for pk in rows:
            intent = Intent.objects.get(pk=pk)
            handlers._as_markdown(intent)
            lifecycle.describe_intent(intent)
            for url in (f"/admin/intents/intent/{pk}/change/", f"/admin/intents/intent/{pk}/decide/"):
                if client.get(url).status_code != 200:
                    bad.append(url)
        return bad

    found += await orm(pages)
    scorecard(
        16,
        f"range at the door ({zone_name}): the extremes it accepts work everywhere",
        cases=3,
        bypasses=len(found),
        misses=found,
    )
    assert found == [] and len(rows) == 3


# =====================================================================================================
# Unexpected failures: internal_error with an id, never database text, always audited
# =====================================================================================================
FAILURES = [
    (RuntimeError, "boom: SELECT * FROM operator_site_principal", "internal_error"),
    (KeyError, "INSERT INTO x VALUES ('secret')", "internal_error"),
    (IntegrityError, 'duplicate key value violates unique constraint "secret_idx"', "internal_error"),
    (DataError, "value too long for type character varying(64): 'secret'", "invalid_value"),
    (OperationalError, "server closed the connection unexpectedly (SELECT 1)", "database_unavailable"),
    (UnicodeEncodeError, None, "internal_error"),
    (OverflowError, "date value out of range", "internal_error"),
]


async def test_a_tool_that_raises_answers_by_id_and_is_audited(
    principals, scorecard, monkeypatch, caplog
) -> None:
    owner = principals["owner"]
    spec = registry.get("operator_list_directives")
    found = []
    caplog.set_level(logging.ERROR, logger="operator.face")
    async with asgi_http(owner.token) as http:
        for kind, text, code in FAILURES:

            def fn(call: Any, args: Any, kind: Any = kind, text: Any = text) -> Any:
                if kind is UnicodeEncodeError:
                    raise UnicodeEncodeError("utf-8", "\ud800 SELECT secret", 0, 1, "surrogates not allowed")
                raise kind(text)

            monkeypatch.setitem(registry._REGISTRY, spec.name, dataclasses.replace(spec, fn=fn))
            before = await orm(AuditEvent.objects.count)
            response = await post(http, tools_call("operator_list_directives", {}))
            message = message_of(response)
            if response.status_code != 200 or not message or "result" not in message:
                found.append(f"{kind.__name__}: HTTP {response.status_code} {response.text[:200]}")
                continue
            body, is_error = envelope_of(message)
            if body.get("error") != code or not is_error:
                found.append(f"{kind.__name__}: {body}")
            if _leaks(response.text) or "secret" in response.text:
                found.append(f"{kind.__name__}: leaks {response.text[:300]}")
            if code == "internal_error" and body.get("error_id") not in caplog.text:
                found.append(f"{kind.__name__}: error id {body.get('error_id')} not in the log")
            if code == "database_unavailable" and body.get("retry") is not True:
                found.append(f"{kind.__name__}: not retryable")
            if code != "database_unavailable" and body.get("retry"):
                found.append(f"{kind.__name__}: invites a retry of a call that will fail the same way")
            last = await orm(
                lambda: list(AuditEvent.objects.order_by("-id").values_list("tool", "error_code")[:1])
            )
            if await orm(AuditEvent.objects.count) != before + 1 or last[0] != (
                "operator_list_directives",
                code,
            ):
                found.append(f"{kind.__name__}: audit {last}")
    scorecard(
        16,
        "unexpected failures → internal_error by id, no database text, audited",
        cases=len(FAILURES),
        bypasses=len(found),
        misses=found,
    )
    assert found == []


async def test_every_call_that_reaches_dispatch_is_audited_whatever_it_carries(
    principals, scorecard, no_rate_limit
) -> None:
    """Calls whose audit row itself used to be unstorable (a NUL in the claimed actor or in an
    unknown tool's name: PostgreSQL refuses it) or too big: refused, and audited all the same."""
    owner = principals["owner"]
    calls = [
        ("operator_record_instruction", {"text": "t", "actor": "a\x00b"}, "invalid_arguments"),
        ("operator_record_instruction", {"text": "t", "actor": {"k\x00": 1}}, "invalid_arguments"),
        ("operator_list_directives", {"actor": "x"}, "invalid_arguments"),
        ("operator_record_instruction", {"text": "t", "actor": "a" * 600_000}, ""),
        ("operator_\x00nul", {"actor": "a\x00"}, "unknown_tool"),
        ("operator_" + "x" * 5000, {}, "unknown_tool"),
    ]
    found = []
    async with asgi_http(owner.token) as http:
        for tool, arguments, code in calls:
            before = await orm(AuditEvent.objects.count)
            response = await post(http, tools_call(tool, arguments))
            if response.status_code != 200 or not no_traceback(response.text) or _leaks(response.text):
                found.append(f"{tool[:30]!r}: HTTP {response.status_code} {response.text[:200]}")
            last = await orm(
                lambda: list(AuditEvent.objects.order_by("-id").values_list("error_code", flat=True)[:1])
            )
            if await orm(AuditEvent.objects.count) != before + 1 or last != [code]:
                found.append(
                    f"{tool[:30]!r}: audit rows {before} -> {await orm(AuditEvent.objects.count)}, {last}"
                )
    scorecard(
        16,
        "every call that reaches dispatch is audited, whatever it carries",
        cases=len(calls),
        bypasses=len(found),
        misses=found,
    )
    assert found == []


# =====================================================================================================
# Change rows written below the door: a stored image that is not an object
# =====================================================================================================
_sentences = iter(range(10_000))


def _poison_row(table: str, column: str, row_id: int, json_text: str, key: str = "id") -> None:
    """Write one JSON value into one row (its `key` is `row_id`), below the door (as a damaged or
    hand-edited database holds it): SQL null for "null", else the JSON text as stored."""
    from django.db import connection

    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    value = None if json_text == "null" else json_text
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = %s{cast} WHERE {key} = %s", [value, row_id])
        assert cursor.rowcount == 1


def _quoted(owner: Any, agent: Any, tool: str, sentence: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A high-stakes write by an agent on the person's own fresh words (so it has a safety notice)."""
    from beliefs import services as beliefs

    beliefs.record_instruction(principal=owner, text=sentence)
    answer = run_tool(
        agent, tool, {**arguments, "confirmedInConversation": True, "confirmationQuote": sentence}
    )
    assert answer["ok"], answer
    return answer


def _two_world_versions(owner: Any, agent: Any) -> Any:
    """v1 adds identity/name, v2 updates it: the lineage, its change rows, the belief."""
    from beliefs.models import Belief
    from beliefs.services import WORLD_MODEL

    for n, op in enumerate(("add", "update")):
        value = f"Ann Example{next(_sentences)}"
        change = {"op": op, "kind": "identity", "key": "name", "value": value}
        _quoted(owner, agent, "operator_update_world_model", f"My name is {value}.", {"changes": [change]})
        assert WORLD_MODEL.current_version() == n + 1
    return WORLD_MODEL, Belief.objects.get(kind="identity", key="name").pk, "identity/name", "beliefs/belief"


def _two_goal_versions(owner: Any, agent: Any) -> Any:
    """v1 adds a goal (its row and the ranking's), v2 adds another (its row, and the ranking's again)."""
    from goals.goal_model import GOAL_MODEL
    from goals.models import Goal

    for n in range(2):
        title = f"Run marathon number {next(_sentences)}"
        _quoted(
            owner,
            agent,
            "operator_apply_goal_change",
            f"Please add a new goal: {title}.",
            {"action": "add", "title": title},
        )
        assert GOAL_MODEL.current_version() == n + 1
    first = Goal.objects.order_by("id").first()
    return GOAL_MODEL, first.pk, "ranking/goals", "goals/goal"


def _model_state(lineage: Any) -> Any:
    """Everything a revert could write: versions, change rows, the live rows, the notices."""
    from beliefs.models import Belief
    from goals.models import Goal

    return (
        lineage.current_version(),
        lineage.change_model.objects.count(),
        sorted(Belief.objects.values_list("kind", "key", "value", "status")),
        sorted(Goal.everything.values_list("id", "title", "status", "importance", "present")),
        Notification.objects.count(),
    )


# (json stored, what the marker says it is): not an object, and the null of a change of nothing.
DAMAGED_IMAGES = [
    ("[1, 2]", "an array"),
    ('"x"', "a string"),
    ("7", "a number"),
    ("true", "a boolean"),
    ("null", "neither its before nor its after image"),
    ('{"value": ["not", "text"]}', 'has no "'),  # an object its readers cannot read
]


@pytest.mark.parametrize("model", ["world_model", "goal_model"])
@pytest.mark.parametrize(("stored", "said"), DAMAGED_IMAGES, ids=[d[0] for d in DAMAGED_IMAGES])
def test_a_change_image_that_is_not_an_object_stops_no_read_no_page_and_no_revert(
    principals, scorecard, model: str, stored: str, said: str
) -> None:
    """Two versions of each model change one entity (a belief; the goal ranking, as each version adds
    a goal): version 1's row holds `stored` as its after image (its before image is null: an
    addition), version 2's row holds it as its before image, which an undo of v2 would put back
    ("null": both images of both rows, a change of nothing, as a null alone means "absent"). Every
    reader of stored images reads past them: the reads answer a `damaged_row` refusal naming the row
    (never `internal_error`), every admin page that shows them answers and says "damaged row #N",
    every revert that needs them refuses with nothing written, and one that needs none still works."""
    from goals import goal_model as goals_read

    owner, agent = principals["owner"].principal, principals["full_agent"].principal
    build = _two_world_versions if model == "world_model" else _two_goal_versions
    lineage, item_pk, entity, item_admin = build(owner, agent)
    table = lineage.change_model._meta.db_table
    v1_row = lineage.change_model.objects.get(version=1, entity=entity).pk
    v2_row = lineage.change_model.objects.get(version=2, entity=entity).pk
    _poison_row(table, "after", v1_row, stored)  # its before is null: an addition
    _poison_row(table, "before", v2_row, stored)
    if stored == "null":  # a null where an object is expected: both rows a change of nothing
        _poison_row(table, "after", v2_row, stored)
    revert_tool = f"operator_revert_{model}"
    misses: list[str] = []
    cases = 0

    def refused(what: str, answer: dict[str, Any], row: int) -> None:
        nonlocal cases
        cases += 1
        if answer.get("error") != "damaged_row" or f"damaged row #{row}" not in answer.get("reason", ""):
            misses.append(f"{what}: {answer.get('error')} {str(answer.get('reason'))[:200]}")

    # The reads as of a version (the world model's tool; the goal model has no such tool: its
    # snapshot service). As of v1 needs v1's after image; as of v2, v2's (whole, but for "null").
    for number, row in ((1, v1_row), (2, v2_row if stored == "null" else None)):
        if model == "world_model":
            answer = run_tool(agent, "operator_user_world_model", {"as_of_version": number})
        else:
            try:
                answer = goals_read.goal_model_snapshot(as_of_version=number)
            except Refusal as refusal:
                answer = refusal.as_result()
            except Exception as failed:  # what the tool would answer internal_error for: a miss
                answer = {"error": f"raised {type(failed).__name__}: {failed}"}
        if row is not None:
            refused(f"as of version {number}", answer, row)
        else:
            cases += 1
            if not answer.get("ok"):
                misses.append(f"as of version {number} (its images are whole): {answer}")

    # Reverts that need a damaged image: refused, nothing written (the tool, to a version, the admin).
    before = _model_state(lineage)
    refused("undo the last change (v2)", run_tool(owner, revert_tool, {}), v2_row)
    refused("revert to version 1", run_tool(owner, revert_tool, {"to_version": 1}), v1_row)
    client = Client(raise_request_exception=False)  # a failing page is a miss, counted with the rest
    client.force_login(owner.user)
    versions = f"/admin/{lineage.version_model._meta.app_label}/{lineage.version_model._meta.model_name}"
    cases += 1
    response = client.post(f"{versions}/2/undo/", {"expected_version": 2})
    if response.status_code != 409 or f"damaged row #{v2_row}" not in response.content.decode():
        misses.append(f"admin POST undo v2: HTTP {response.status_code}")
    cases += 1
    if _model_state(lineage) != before:
        misses.append("a refused revert wrote something")

    # Every page that shows them: the notices of both versions, their one-tap links, the versions'
    # pages and their undo / restore pages, the item's history, the dashboard.
    pages = {
        "/admin/": None,
        f"/admin/{item_admin}/{item_pk}/change/": v1_row if model == "world_model" else None,
    }
    for number, row in ((1, v1_row), (2, v2_row)):
        notice = Notification.objects.get(subject_kind=model, subject_id=number)
        pages[f"/admin/operator_site/notification/{notice.pk}/change/"] = row
        pages[reverse("revert-link", kwargs={"token": revert_token(notice)})] = row if number == 2 else None
        pages[f"{versions}/{number}/change/"] = row
        pages[f"{versions}/{number}/undo/"] = row if number == 2 else None
    pages[f"{versions}/1/restore/"] = v1_row
    pages[f"{versions}/"] = None
    for url, row in pages.items():
        cases += 1
        response = client.get(url)
        text = response.content.decode()
        if response.status_code != 200:
            misses.append(f"GET {url}: HTTP {response.status_code}")
        elif row is not None and f"damaged row #{row}" not in text:
            misses.append(f"GET {url}: does not say damaged row #{row}")
        elif row is not None and said not in text.replace("&quot;", '"'):
            misses.append(f"GET {url}: does not say what is wrong ({said})")

    # A revert that needs none of them still works: back to the empty model (version 0).
    cases += 1
    answer = run_tool(owner, revert_tool, {"to_version": 0})
    if not answer.get("ok"):
        misses.append(f"revert to version 0 (needs no damaged image): {answer}")
    scorecard(
        16,
        f"poisoned rows: a {model.replace('_', '-')} change image {stored} (reads, pages, reverts)",
        cases=cases,
        bypasses=len(misses),
        misses=misses,
    )
    assert misses == []


@pytest.mark.parametrize("model", ["world_model", "goal_model"])
def test_a_null_pre_image_where_the_previous_version_left_an_object_refuses_the_undo(
    principals, scorecard, model: str
) -> None:
    """Version 2's row holds null as its before image ("absent"), where version 1 left an object: on
    its own the row reads as an addition, so only the undo can tell (it would remove what v1 wrote).
    The undo refuses, naming the row, with nothing written; going back to version 1 as a whole does
    not read that image and still works."""
    owner, agent = principals["owner"].principal, principals["full_agent"].principal
    lineage, _, entity, _ = (_two_world_versions if model == "world_model" else _two_goal_versions)(
        owner, agent
    )
    row = lineage.change_model.objects.get(version=2, entity=entity).pk
    _poison_row(lineage.change_model._meta.db_table, "before", row, "null")
    client = Client(raise_request_exception=False)
    client.force_login(owner.user)
    opts = lineage.version_model._meta
    misses = []
    before = _model_state(lineage)
    answer = run_tool(owner, f"operator_revert_{model}", {})
    if answer.get("error") != "damaged_row" or f"damaged row #{row}" not in answer["reason"]:
        misses.append(f"undo v2: {answer.get('error')} {str(answer.get('reason'))[:150]}")
    response = client.post(f"/admin/{opts.app_label}/{opts.model_name}/2/undo/", {"expected_version": 2})
    if response.status_code != 409 or f"damaged row #{row}" not in response.content.decode():
        misses.append(f"admin POST undo v2: HTTP {response.status_code}")
    if _model_state(lineage) != before:
        misses.append("a refused undo wrote something")
    answer = run_tool(owner, f"operator_revert_{model}", {"to_version": 1})
    if not answer.get("ok"):
        misses.append(f"revert to version 1 (does not read that image): {answer}")
    scorecard(
        16,
        f"poisoned rows: a {model.replace('_', '-')} null pre-image where an object was left (undo)",
        cases=4,
        bypasses=len(misses),
        misses=misses,
    )
    assert misses == []


def test_a_goal_ranking_naming_a_goal_absent_then_refuses_the_read_as_of_it(principals, scorecard) -> None:
    """Version 2's ranking names goal #99, which no version wrote: each row reads (an object with an
    order of ids), but the goal model as of version 2 cannot be shown, so the read refuses naming the
    ranking's row rather than failing."""
    from goals import goal_model as goals_read

    owner, agent = principals["owner"].principal, principals["full_agent"].principal
    lineage = _two_goal_versions(owner, agent)[0]
    row = lineage.change_model.objects.get(version=2, entity="ranking/goals")
    order = [*row.after["order"], 99]
    _poison_row(lineage.change_model._meta.db_table, "after", row.pk, json.dumps({"order": order}))
    try:
        answer = goals_read.goal_model_snapshot(as_of_version=2)
    except Refusal as refusal:
        answer = refusal.as_result()
    except Exception as failed:  # what a read would answer internal_error for: a miss
        answer = {"error": f"raised {type(failed).__name__}"}
    misses = []
    if answer.get("error") != "damaged_row" or f"damaged row #{row.pk}" not in answer.get("reason", ""):
        misses.append(f"as of version 2: {answer.get('error')} {str(answer.get('reason'))[:150]}")
    if not goals_read.goal_model_snapshot(as_of_version=1).get("ok"):
        misses.append("as of version 1 (whole) did not read")
    scorecard(
        16,
        "poisoned rows: a goal ranking naming a goal absent at its version (the read as of it)",
        cases=2,
        bypasses=len(misses),
        misses=misses,
    )
    assert misses == []


def test_a_goal_model_change_row_naming_no_entity_of_the_model_stops_nothing(principals, scorecard) -> None:
    """A goal-model change row whose entity is not one of the model's ("bogus/x", in place of
    v2's goal): its pages say it is damaged, and every revert that would read it refuses, naming it."""
    owner, agent = principals["owner"].principal, principals["full_agent"].principal
    lineage, _, _, _ = _two_goal_versions(owner, agent)
    row = lineage.change_model.objects.filter(version=2).exclude(entity="ranking/goals").get()
    from django.db import connection

    with connection.cursor() as cursor:  # below the door: the model is append-only
        table = lineage.change_model._meta.db_table
        cursor.execute(f"UPDATE {table} SET entity = %s WHERE id = %s", ["bogus/x", row.pk])
    client = Client(raise_request_exception=False)
    client.force_login(owner.user)
    notice = Notification.objects.get(subject_kind="goal_model", subject_id=2)
    misses = []
    pages = [
        f"/admin/operator_site/notification/{notice.pk}/change/",
        "/admin/goals/goalmodelversion/2/change/",
        "/admin/goals/goalmodelversion/2/undo/",
        "/admin/goals/goalmodelversion/1/restore/",
        reverse("revert-link", kwargs={"token": revert_token(notice)}),
    ]
    for url in pages:
        response = client.get(url)
        if response.status_code != 200 or f"damaged row #{row.pk}" not in response.content.decode():
            misses.append(f"GET {url}: HTTP {response.status_code}, says damaged: no")
    before = _model_state(lineage)
    for arguments in ({}, {"to_version": 1}):
        answer = run_tool(owner, "operator_revert_goal_model", arguments)
        if answer.get("error") != "damaged_row" or f"damaged row #{row.pk}" not in answer["reason"]:
            misses.append(f"revert {arguments}: {answer.get('error')} {str(answer.get('reason'))[:150]}")
    if _model_state(lineage) != before:
        misses.append("a refused revert wrote something")
    scorecard(
        16,
        "poisoned rows: a goal-model change row naming no entity of the model (pages, reverts)",
        cases=len(pages) + 3,
        bypasses=len(misses),
        misses=misses,
    )
    assert misses == []


@pytest.mark.parametrize("model", ["world_model", "goal_model"])
def test_a_versions_evidence_that_is_not_an_object_is_shown_as_damaged(
    principals, scorecard, model: str
) -> None:
    """A version's recorded evidence (the person's words it quoted) holding an array: the notice's
    page and the version's page say the evidence is damaged, rather than that none was needed."""
    owner, agent = principals["owner"].principal, principals["full_agent"].principal
    lineage = (_two_world_versions if model == "world_model" else _two_goal_versions)(owner, agent)[0]
    _poison_row(lineage.version_model._meta.db_table, "evidence", 2, "[1, 2]", key="number")
    client = Client(raise_request_exception=False)
    client.force_login(owner.user)
    notice = Notification.objects.get(subject_kind=model, subject_id=2)
    opts = lineage.version_model._meta
    misses = []
    for url in (
        f"/admin/operator_site/notification/{notice.pk}/change/",
        f"/admin/{opts.app_label}/{opts.model_name}/2/change/",
    ):
        response = client.get(url)
        text = response.content.decode()
        if response.status_code != 200 or "damaged" not in text or "No quote was needed" in text:
            misses.append(f"GET {url}: HTTP {response.status_code}, says the evidence is damaged: no")
    scorecard(
        16,
        f"poisoned rows: a {model.replace('_', '-')} version's evidence that is not an object (pages)",
        cases=2,
        bypasses=len(misses),
        misses=misses,
    )
    assert misses == []


# =====================================================================================================
# Server-set timestamps written below the door: at an end of the calendar
# =====================================================================================================
# An instant the operator's zone cannot write: year 10000 east of UTC, year 0 west of it.
CALENDAR_EDGES = [
    (EAST, datetime(9999, 12, 31, 23, 0, tzinfo=UTC)),
    (WEST, datetime(1, 1, 1, 0, 30, tzinfo=UTC)),
]
OPERATOR_APPS = ("operator_site", "beliefs", "goals", "intents", "runs")


def _rows_of_every_kind(owner: Any, agent: Any) -> None:
    """At least one row of every table the admin shows, each with its server-set timestamps (two
    of most, so a list spans years once one is damaged), through the tools."""
    _two_world_versions(owner, agent)
    _two_goal_versions(owner, agent)
    calls = [
        ("operator_reconcile_goal_model", {"changes": [{"entity": "project", "op": "add", "fields": {"title": "Shed"}}]}),
        ("operator_update_task", {"key": "t1", "patch": {"title": "Paint the shed", "status": "doing"}}),
        ("operator_update_task", {"key": "t2", "patch": {"title": "Buy paint"}}),
        ("operator_log_decision", {"title": "Paint", "decision": "Blue", "rationale": "Sky"}),
        ("operator_set_directive", {"kind": "quiet", "minutes": 60, "reason": "focus"}),
        ("operator_record_action_intent", {"action": {"type": "email", "title": "Ask Bo", "recipient": "bo@example.com"}}),
        ("operator_record_action_intent", {"action": {"type": "email", "title": "Ask Al", "recipient": "al@example.com"}}),
        ("operator_record_action_intent", {"action": {"type": "note", "title": "A note", "body": "b"}}),
        ("operator_record_progress", {"summary": "Painted", "outcome": "done"}),
        ("operator_record_observation", {"kind": "world", "summary": "Rain", "data": {"mm": 3}}),
        ("operator_record_observation", {"kind": "world", "summary": "Sun", "data": {"mm": 0}}),
    ]  # fmt: skip
    for tool, arguments in calls:
        with transaction.atomic():
            answer = run_tool(agent, tool, arguments)
        assert answer.get("ok", True) and not answer.get("error"), (tool, answer)
    with transaction.atomic():
        assert run_tool(agent, "operator_tick", {"mode": "morning"})["ok"]  # today's day, open
    started = run_tool(agent, "operator_run_start", {"kind": "paint"})
    run_tool(agent, "operator_run_heartbeat", {"run_id": started["run_id"], "token": started["token"]})


def _to_the_edge(instant: datetime) -> dict[Any, list[int]]:
    """Every server-set timestamp (every date-time column of every table of the operator) of the newest
    row of each table set to `instant`, one column at a time: a column a CHECK constraint keeps in
    order with another (a run's end after its start, say) is left as it is. The rows it damaged."""
    from django.apps import apps
    from django.db import models

    damaged: dict[Any, list[int]] = {}
    for model in apps.get_models():
        if model._meta.app_label not in OPERATOR_APPS:
            continue
        newest = model._base_manager.order_by("-pk").values_list("pk", flat=True).first()
        for field in model._meta.concrete_fields:
            if newest is None or not isinstance(field, models.DateTimeField):
                continue
            try:
                with transaction.atomic():
                    model._base_manager.filter(pk=newest).update(**{field.name: instant})
            except IntegrityError:
                continue
            damaged.setdefault(model, [newest])
    return damaged


def _admin_urls(damaged: dict[Any, list[int]]) -> list[str]:
    """The dashboard; every list of the operator's admin; the pages of every damaged row (its change
    page, and the admin's own pages taking its id: decide, undo, restore, end a run...)."""
    from django.contrib import admin

    urls = ["/admin/"]
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        if opts.app_label not in OPERATOR_APPS:
            continue
        changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        urls.append(changelist)
        for pk in damaged.get(model, []):
            urls.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[pk]))
            for pattern in model_admin.get_urls():
                route = getattr(pattern.pattern, "_route", "")
                if pattern.name and route.count("<") == 1 and route.startswith("<int:"):
                    urls.append(changelist + re.sub(r"<int:\w+>", str(pk), route))
    return urls


@pytest.mark.parametrize(
    ("zone_name", "instant"), CALENDAR_EDGES, ids=["9999 east of UTC", "0001 west of UTC"]
)
def test_a_server_set_timestamp_at_an_end_of_the_calendar_stops_no_page(
    principals, scorecard, zone, settings, zone_name: str, instant: datetime
) -> None:
    """Rows of every table, the newest of each with every server-set timestamp at an end of the
    calendar that the operator's zone cannot write (as only a damaged or hand-edited database holds:
    the services set them to now). The person's whole admin answers: the dashboard, every list (the
    date drill-down included), every damaged row's pages; and the reads that show them answer too."""
    settings.OPERATOR_DELIVERY = "off"
    owner, agent = principals["owner"].principal, principals["full_agent"].principal
    _rows_of_every_kind(owner, agent)
    zone(zone_name)
    with pytest.raises(OverflowError):  # control: the instant really cannot be written in this zone
        instant.astimezone(ZoneInfo(zone_name))
    client = Client(raise_request_exception=False)  # a failing page is a miss, counted with the rest
    client.force_login(owner.user)
    misses = []
    # Control: before the damage no page says a date is in UTC.
    controls = _admin_urls({})
    for url in controls:
        if EDGE_NOTE_ID in client.get(url).content.decode():
            misses.append(f"GET {url}: says a date is at an end of the calendar before any is")
    damaged = _to_the_edge(instant)
    urls = _admin_urls(damaged)
    # The year the page writes such an instant with (in UTC: the zone's own would be 10000 or 0).
    edge_year = f"{instant.year:04d}"
    shown_in_utc = 0
    for url in urls:
        response = client.get(url)
        if response.status_code >= 500:
            misses.append(f"GET {url}: HTTP {response.status_code}")
            continue
        page = response.content.decode()
        if edge_year in page:
            shown_in_utc += 1
            if EDGE_NOTE_ID not in page or "shown in UTC" not in page or zone_name not in page:
                misses.append(f"GET {url}: shows a {edge_year} date without saying it is in UTC")
    if shown_in_utc < len(damaged):  # each damaged row's own page shows its date, at least
        misses.append(f"only {shown_in_utc} pages show a {edge_year} date, for {len(damaged)} damaged tables")
    reads = [
        ("operator_context_packet", {}),
        ("operator_state", {}),
        ("operator_history", {}),
        ("operator_list_directives", {}),
        ("operator_user_world_model", {}),
        ("operator_tick", {"mode": "status"}),  # its window starts at the last tick, damaged too
    ]
    for tool, arguments in reads:
        answer = run_tool(agent, tool, arguments)
        if answer.get("error") == "internal_error" or answer.get("ok") is False:
            misses.append(f"{tool}: {answer.get('error')} {str(answer.get('reason'))[:120]}")
    scorecard(
        16,
        f"poisoned rows: server-set timestamps at {instant.date().isoformat()} UTC in {zone_name} (every admin page, the reads; a page showing one says it is in UTC, none before the damage)",
        cases=len(controls) + len(urls) + len(reads),
        bypasses=len(misses),
        misses=misses,
        damaged_tables=sorted(m._meta.db_table for m in damaged),
    )
    assert misses == []
