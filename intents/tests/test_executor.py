"""The executor, against the real test brain on loopback (tests/brain_server.py): each handler's
happy path, only BRAIN_TOKEN downstream, the idempotency key, refusals before any connection, the
deadline releasing the claim (stall, drip-feed), expired-lease reclaim, a real crash and a real
SIGTERM mid-call, statuses that are never executed, the single-running lock, and executors racing
for the same intents (real threads; PostgreSQL in CI, SQLite too) with every handler running exactly
once per intent, counted by the calls the brain received."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

import pytest
import uvicorn
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.utils import timezone

from intents import approval, executor, handlers
from intents.answers import intent_dict
from intents.lifecycle import expire_pending, transition_intent
from intents.models import Intent, IntentEvent
from operator_site import powers
from operator_site.models import Principal
from operator_site.refusals import Refusal
from runs.lock import start_run
from runs.models import Run
from tests import brain_server
from tests.brain_server import OUTSIDE_EVERY_LIST, DripFeedServer, ListeningSocket, running_brain
from tests.fixtures import ROOT, database_url_of_this_run, wait_until

BRAIN_TOKEN = "brain-secret-token"


# --- the test brain, with a tap on each request's `_meta` (the idempotency key travels there) --------
@dataclass
class MeteredBrain(brain_server.TestBrain):
    metas: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _tapped(brain: MeteredBrain) -> Any:
    inner = brain_server._build_app(brain)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        chunks: list[bytes] = []

        async def tap() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    with contextlib.suppress(ValueError):
                        payload = json.loads(b"".join(chunks) or b"null")
                        if isinstance(payload, dict) and payload.get("method") == "tools/call":
                            params = payload.get("params") or {}
                            brain.metas.append((params.get("name"), params.get("_meta") or {}))
            return message

        await inner(scope, tap, send)

    return app


@contextlib.contextmanager
def metered_brain(stall_s: float = 0.0) -> Iterator[MeteredBrain]:
    brain = MeteredBrain(port=brain_server._free_port(), stall_s=stall_s)
    server = uvicorn.Server(
        uvicorn.Config(_tapped(brain), host="127.0.0.1", port=brain.port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "test brain did not start"
        time.sleep(0.02)
    try:
        yield brain
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def brain(settings: Any) -> Iterator[MeteredBrain]:
    with metered_brain() as b:
        settings.BRAIN_URL, settings.BRAIN_TOKEN = b.url, BRAIN_TOKEN
        yield b


@pytest.fixture
def person(owner: Any) -> Any:
    return owner.principal.user


@pytest.fixture
def make_intent(agent: Any, person: Any, record: Callable[..., Any]) -> Callable[..., Intent]:
    """Record an intent as the agent; approve it as the person when the gate asks for approval."""

    def make(approve: bool = True, **action: Any) -> Intent:
        action.setdefault("amount_cents", None)
        intent, _ = record(agent, **action)
        if approve and intent.status == "pending_approval":
            intent = approval.approve_intent(intent, by=person, seen=intent.payload_digest, via="admin")
        return intent

    return make


def fresh(intent: Intent) -> Intent:
    return Intent.objects.get(pk=intent.pk)


def events(intent: Intent) -> list[tuple[str, str, str]]:
    return list(
        IntentEvent.objects.filter(intent=intent)
        .values_list("event", "from_status", "to_status")
        .order_by("id")
    )


# =====================================================================================================
# Happy paths, one per handler
# =====================================================================================================
HAPPY = [
    # (action, tool, expected arguments (subset))
    ({"type": "note", "title": "Buy milk later", "body": "semi-skimmed"}, "files_write", {"path": "note"}),
    ({"type": "reminder", "title": "Call the dentist"}, "files_write", {"path": "reminder"}),
    ({"type": "draft", "title": "Reply to Ana", "body": "Dear Ana,"}, "files_write", {"path": "draft"}),
    (
        {"type": "file_write", "title": "notes/plan.md", "body": "# Plan"},
        "files_write",
        {"path": "notes/plan.md"},
    ),
    ({"type": "workspace_action", "title": "Run tests", "body": "make test"}, "actions_workspace_run", {}),
    ({"type": "file_search", "title": "Find the lease", "body": "lease 2026"}, "files_search", {}),
    ({"type": "memory_recall", "title": "What did Ana say about Lisbon"}, "memory_recall", {}),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("action", "tool", "expected"), HAPPY, ids=[a["type"] for a, _, _ in HAPPY])
def test_each_handler_executes_once_through_the_executor_allowlist(
    brain: MeteredBrain, make_intent: Callable[..., Intent], action: dict, tool: str, expected: dict
) -> None:
    intent = make_intent(**action)
    assert intent.status in {"queued", "approved"}

    report = executor.run_executor(timeout_s=20)

    done = fresh(intent)
    assert done.status == "executed", done.execution_result
    assert [c.tool for c in brain.calls] == [tool]
    args = brain.calls[0].arguments
    if tool == "files_write":
        assert expected["path"] in args["path"] and args["path"].endswith(".md")
        if action["type"] != "file_write":
            assert f"intent-{intent.id}-" in args["path"]
            assert args["payload"].startswith(f"# {action['title']}")
        else:
            assert args["payload"] == action["body"]
    elif tool == "actions_workspace_run":
        assert args["command"] == action["body"]
    else:
        assert args["query"] == (action.get("body") or action["title"])
    result = done.execution_result
    assert result["ok"] is True and result["called"] is True and result["tainted"] is True
    assert result["tool"] == tool and result["text"] == f"{tool} ok"
    assert result["execution_key"] == done.execution_key == executor.execution_key(done)
    assert done.attempted_at is not None and done.claims == 1
    assert (done.lease_token, done.lease_expires_at) == ("", None)  # the claim is released
    assert events(done)[-3:] == [
        ("transition", intent.status, "executing"),
        ("attempt", "executing", "executing"),
        ("transition", "executing", "executed"),
    ]
    assert (
        IntentEvent.objects.filter(intent=done, event="transition", to_status="executed").get().data == result
    )
    run = Run.objects.get(pk=report.run_id)
    assert (run.kind, run.status, run.holder.name) == ("executor", "ok", "operator-executor")
    assert report.as_dict()["executed"] == [intent.id]
    assert intent_dict(done)["execution"]["result"]["text"] == f"{tool} ok"

    executor.run_executor(timeout_s=20)  # a second pass finds nothing to do
    assert len(brain.calls) == 1


@pytest.mark.django_db(transaction=True)
def test_only_brain_token_goes_downstream_with_the_idempotency_key(
    brain: MeteredBrain, agent: Any, settings: Any, make_intent: Callable[..., Intent]
) -> None:
    """The intent was recorded over /mcp with the agent's own token; the brain sees BRAIN_TOKEN only."""
    import anyio

    from tests.fixtures import asgi_http, call

    async def record() -> dict[str, Any]:
        async with asgi_http(agent.token) as http:
            return await call(
                http,
                "operator_record_action_intent",
                {"action": {"type": "note", "title": "Water the ferns"}},
            )

    row = anyio.run(record)
    connection.close()  # the in-process face ran on worker threads
    assert row["status"] == "queued"
    executor.run_executor(timeout_s=20)

    intent = Intent.objects.get(pk=row["id"])
    assert intent.status == "executed"
    [call_] = brain.calls
    assert call_.authorization == f"Bearer {BRAIN_TOKEN}"
    assert agent.token not in (call_.authorization or "")
    [(name, meta)] = brain.metas
    assert name == "files_write"
    assert meta[executor.IDEMPOTENCY_META_KEY] == intent.execution_key

    # Without a BRAIN_TOKEN no Authorization header is sent at all: never the caller's token instead.
    settings.BRAIN_TOKEN = ""
    other = make_intent(type="note", title="Water the cactus")
    executor.execute_step(timeout_s=20)
    assert fresh(other).status == "executed"
    assert brain.calls[-1].authorization is None


# =====================================================================================================
# What is never executed
# =====================================================================================================
@pytest.mark.django_db(transaction=True)
def test_statuses_other_than_approved_or_queued_are_never_executed(
    brain: MeteredBrain, agent: Any, person: Any, make_intent: Callable[..., Intent]
) -> None:
    expired = make_intent(approve=False, type="file_write", title="a/expired.md", body="x")
    expire_pending(now=timezone.now() + timedelta(days=30))
    pending = make_intent(approve=False, type="file_write", title="a/pending.md", body="x")
    rejected = make_intent(approve=False, type="file_write", title="a/rejected.md", body="x")
    approval.reject_intent(rejected, by=person, via="admin")
    cancelled = make_intent(approve=False, type="file_write", title="a/cancelled.md", body="x")
    transition_intent(principal=agent.principal, intent_id=cancelled.id, to="cancelled")
    blocked = make_intent(type="share_password", title="send the wifi password")
    # An agent moved this one to executing itself (the tool's legal move): no executor lease, so the
    # executor never takes it over, however old it gets.
    by_agent = make_intent(type="note", title="agent is on it")
    transition_intent(principal=agent.principal, intent_id=by_agent.id, to="executing")
    done = make_intent(type="note", title="already done")
    transition_intent(principal=agent.principal, intent_id=done.id, to="executing")
    transition_intent(principal=agent.principal, intent_id=done.id, to="executed")
    failed = make_intent(type="note", title="already failed")
    transition_intent(principal=agent.principal, intent_id=failed.id, to="executing")
    transition_intent(principal=agent.principal, intent_id=failed.id, to="failed")
    expected = {
        pending.id: "pending_approval",
        rejected.id: "rejected",
        cancelled.id: "cancelled",
        expired.id: "expired",
        blocked.id: "blocked",
        by_agent.id: "executing",
        done.id: "executed",
        failed.id: "failed",
    }
    assert dict(Intent.objects.values_list("id", "status")) == expected
    before = {i.id: (i.updated_at, i.claims) for i in Intent.objects.all()}

    report = executor.run_executor(timeout_s=20, now=timezone.now() + timedelta(days=60))

    assert brain.calls == []
    assert report.outcomes == []
    assert dict(Intent.objects.values_list("id", "status")) == expected
    assert {i.id: (i.updated_at, i.claims) for i in Intent.objects.all()} == before


@pytest.mark.django_db(transaction=True)
def test_a_type_without_a_handler_fails_clearly_and_calls_nothing(
    brain: MeteredBrain, make_intent: Callable[..., Intent]
) -> None:
    spend = make_intent(type="spend", title="Annual plan renewal", amount_cents=4900)
    email = make_intent(type="email", title="Hi Bob", recipient="bob@example.com", body="hello")
    assert (spend.status, email.status) == ("approved", "approved")

    report = executor.run_executor(timeout_s=20)

    assert brain.calls == []
    for intent in (spend, email):
        done = fresh(intent)
        assert done.status == "failed"
        assert done.attempted_at is None and done.execution_key == ""
        result = done.execution_result
        assert (result["ok"], result["called"], result["error"]) == (False, False, "no_handler")
        assert f"no handler for action type {intent.action_type!r}" in result["reason"]
        assert "does not guess" in result["reason"]
        assert IntentEvent.objects.filter(intent=done, to_status="failed").get().note == result["reason"]
    assert sorted(report.as_dict()["failed"]) == sorted([spend.id, email.id])
    assert Run.objects.get(pk=report.run_id).status == "ok"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("action", "code"),
    [
        ({"type": "file_write", "title": "../../etc/passwd", "body": "x"}, "invalid_path"),
        ({"type": "file_write", "title": "/abs/path.md", "body": "x"}, "invalid_path"),
        ({"type": "file_write", "title": "two words.md", "body": "x"}, "invalid_path"),
        ({"type": "workspace_action", "title": "Run something"}, "command_required"),
    ],
)
def test_an_intent_its_handler_cannot_carry_out_fails_before_any_call(
    brain: MeteredBrain, make_intent: Callable[..., Intent], action: dict, code: str
) -> None:
    intent = make_intent(**action)
    executor.run_executor(timeout_s=20)
    done = fresh(intent)
    assert done.status == "failed" and done.execution_result["error"] == code
    assert done.attempted_at is None
    assert brain.calls == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("tool", [OUTSIDE_EVERY_LIST, "actions_shell_run", "machines_command_exec"])
def test_a_handler_reaching_outside_the_allowlist_never_reaches_the_brain(
    settings: Any, make_intent: Callable[..., Intent], monkeypatch: Any, tool: str
) -> None:
    """Defence in depth: even a (mis)configured handler is refused before a request exists."""
    rogue = handlers.Handler(tool, lambda intent: {"command": intent.body}, "rogue")
    monkeypatch.setattr(handlers, "HANDLERS", MappingProxyType({**handlers.HANDLERS, "rogue_action": rogue}))
    listener = ListeningSocket()
    try:
        settings.BRAIN_URL = f"http://127.0.0.1:{listener.port}/mcp"
        intent = make_intent(type="rogue_action", title="do it", body="rm -rf /")
        executor.run_executor(timeout_s=5)
        time.sleep(0.2)
        assert listener.accepted == 0
    finally:
        listener.close()
    done = fresh(intent)
    assert done.status == "failed" and done.attempted_at is None
    assert done.execution_result["error"] == "brain_tool_not_allowed"
    assert done.execution_result["reason"] == (
        f"executor refused: {tool} is not in the enumerated ian-brain tool allowlist"
    )


def test_every_handler_uses_an_executor_tool_and_is_documented() -> None:
    assert {h.tool for h in handlers.HANDLERS.values()} <= powers.EXECUTOR_TOOLS
    assert set(handlers.HANDLERS) >= {"note", "reminder", "draft", "file_write", "workspace_action"}
    section = (ROOT / "docs" / "gate.md").read_text().split("## The executor", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    documented = {}
    for row in rows:
        types, tool = row.split(" | ")[:2]
        for name in types.strip("| ").split(", "):
            documented[name.strip("`")] = tool.strip("`")
    assert documented == {name: handler.tool for name, handler in handlers.HANDLERS.items()}


# =====================================================================================================
# The deadline releases the claim
# =====================================================================================================
def _assert_failed_and_released(intent: Intent, code: str) -> None:
    done = fresh(intent)
    assert done.status == "failed"
    assert done.execution_result["error"] == code and done.execution_result["called"] is True
    assert (done.lease_token, done.lease_expires_at) == ("", None)
    assert done.attempted_at is not None


@pytest.mark.django_db(transaction=True)
def test_a_stalling_brain_fails_the_intent_at_the_deadline_and_releases_the_claim(
    settings: Any, make_intent: Callable[..., Intent]
) -> None:
    with running_brain(stall_s=30) as stalling:
        settings.BRAIN_URL, settings.BRAIN_TOKEN = stalling.url, BRAIN_TOKEN
        intent = make_intent(type="note", title="Stalled note")
        started = time.monotonic()
        report = executor.run_executor(timeout_s=1.5)
        elapsed = time.monotonic() - started
        assert elapsed < 1.5 + 4.0, elapsed
        _assert_failed_and_released(intent, "brain_timeout")
        assert "did not answer within 1.5 s" in fresh(intent).execution_result["reason"]
        assert [c.tool for c in stalling.calls] == ["files_write"]  # it was reached: never retried
        assert Run.objects.get(pk=report.run_id).status == "ok"
        executor.run_executor(timeout_s=1.5, now=timezone.now() + timedelta(hours=1))
        assert len(stalling.calls) == 1


@pytest.mark.django_db(transaction=True)
def test_a_drip_feeding_brain_fails_the_intent_at_the_deadline_and_releases_the_claim(
    settings: Any, make_intent: Callable[..., Intent]
) -> None:
    drip = DripFeedServer(interval_s=0.1)
    try:
        settings.BRAIN_URL = f"http://127.0.0.1:{drip.port}/mcp"
        intent = make_intent(type="workspace_action", title="Build", body="make")
        started = time.monotonic()
        executor.run_executor(timeout_s=2.0)
        elapsed = time.monotonic() - started
    finally:
        drip.close()
    assert drip.bytes_sent > 0  # bytes kept coming: only a total deadline stops this
    assert elapsed < 2.0 + 4.0, elapsed
    _assert_failed_and_released(intent, "brain_timeout")


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_brain_fails_the_intent_once(
    settings: Any, make_intent: Callable[..., Intent]
) -> None:
    settings.BRAIN_URL = f"http://127.0.0.1:{brain_server._free_port()}/mcp"  # nothing listens there
    intent = make_intent(type="note", title="Nobody home")
    executor.run_executor(timeout_s=5)
    _assert_failed_and_released(intent, "brain_error")


def test_the_lease_must_outlast_the_deadline() -> None:
    with pytest.raises(ValueError, match="must outlast"):
        executor.execute_step(principal=Principal(name="x"), lease_s=10, timeout_s=10)


# =====================================================================================================
# Leases: expiry, reclaim, crashes
# =====================================================================================================
@pytest.mark.django_db(transaction=True)
def test_an_expired_lease_that_was_never_attempted_is_reclaimed_and_executed_once(
    brain: MeteredBrain, make_intent: Callable[..., Intent]
) -> None:
    intent = make_intent(type="note", title="Claimed then abandoned")
    t0 = timezone.now()
    principal = Principal.objects.service(executor.EXECUTOR_PRINCIPAL)
    # An executor claims it and dies before it calls anything.
    claim = executor.claim_next(principal=principal, lease_s=120, holder="doomed", now=t0)
    assert claim is not None and fresh(intent).status == "executing"

    # While the lease holds, nobody takes it.
    report = executor.execute_step(timeout_s=20, now=t0 + timedelta(seconds=119))
    assert report.outcomes == [] and brain.calls == []
    assert fresh(intent).lease_token == claim.token

    # Past it, the next executor reclaims it and carries it out — once.
    report = executor.execute_step(timeout_s=20, now=t0 + timedelta(seconds=121))
    done = fresh(intent)
    assert done.status == "executed" and done.claims == 2
    assert len(brain.calls) == 1
    assert [e for e, _, _ in events(done)][-4:] == ["transition", "reclaimed", "attempt", "transition"]
    # The dead executor's token no longer moves anything.
    assert not executor._finish(
        claim, "failed", principal=principal, result={"late": True}, note="late", now=timezone.now()
    )
    assert fresh(intent).status == "executed"
    assert IntentEvent.objects.filter(intent=done, event="execution_result").get().data == {"late": True}


@pytest.mark.django_db(transaction=True)
def test_an_expired_lease_that_was_attempted_fails_and_is_never_called_again(
    brain: MeteredBrain, make_intent: Callable[..., Intent]
) -> None:
    intent = make_intent(type="file_write", title="notes/once.md", body="exactly once")
    t0 = timezone.now()
    principal = Principal.objects.service(executor.EXECUTOR_PRINCIPAL)
    claim = executor.claim_next(principal=principal, lease_s=120, holder="doomed", now=t0)
    call = executor.BrainCall("files_write", {"path": "notes/once.md", "payload": "exactly once"})
    key = executor.execution_key(claim.intent)
    # It recorded its attempt (and, say, called the brain), then died before recording the outcome.
    assert executor._mark_attempt(claim, principal=principal, call=call, key=key, timeout_s=20, now=t0)
    # A second attempt under the same claim is refused: the marker is set once.
    assert not executor._mark_attempt(claim, principal=principal, call=call, key=key, timeout_s=20, now=t0)

    report = executor.execute_step(timeout_s=20, now=t0 + timedelta(seconds=121))

    assert brain.calls == []
    done = fresh(intent)
    assert done.status == "failed"
    result = done.execution_result
    assert (result["error"], result["called"]) == ("attempt_interrupted", False)
    assert key in result["reason"] and "not called again" in result["reason"]
    assert [o.status for o in report.outcomes] == ["failed"]


@pytest.mark.django_db(transaction=True)
def test_an_attempt_needs_the_lease_to_outlast_the_deadline(
    brain: MeteredBrain, make_intent: Callable[..., Intent]
) -> None:
    make_intent(type="note", title="short lease")
    t0 = timezone.now()
    principal = Principal.objects.service(executor.EXECUTOR_PRINCIPAL)
    claim = executor.claim_next(principal=principal, lease_s=120, holder="me", now=t0)
    call = executor.BrainCall("files_write", {})
    late = t0 + timedelta(seconds=101)  # 19 s of lease left, deadline 20 s: a reclaim could overlap the call
    assert not executor._mark_attempt(claim, principal=principal, call=call, key="k", timeout_s=20, now=late)
    assert fresh(claim.intent).attempted_at is None


def _subprocess_env(brain_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url_of_this_run(),
        "BRAIN_URL": brain_url,
        "BRAIN_TOKEN": BRAIN_TOKEN,
        "BRAIN_TIMEOUT_S": "60",
        "OPERATOR_NO_VENV": "1",
    }


@pytest.mark.django_db(transaction=True)
def test_a_crash_after_the_brain_call_never_leads_to_a_second_call(
    settings: Any, make_intent: Callable[..., Intent]
) -> None:
    """A real `manage.py operator_execute` process is killed (SIGKILL) while its brain call is in
    flight. The next executor, once the lease expired, fails the intent: the brain saw one call."""
    with running_brain(stall_s=30) as stalling:
        settings.BRAIN_URL, settings.BRAIN_TOKEN = stalling.url, BRAIN_TOKEN
        intent = make_intent(type="note", title="Killed mid-call")
        process = subprocess.Popen(
            [sys.executable, "manage.py", "operator_execute"],
            cwd=ROOT,
            env=_subprocess_env(stalling.url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            wait_until(lambda: len(stalling.calls) == 1, 60, "the executor's brain call", every=0.05)
        finally:
            process.kill()
            process.wait(timeout=20)
        stuck = fresh(intent)
        assert stuck.status == "executing" and stuck.attempted_at is not None
        assert stuck.lease_expires_at is not None
        dead_run = Run.objects.get(kind="executor")
        assert dead_run.status == "running"  # it died holding the run lock too

        # Within the lease (and the dead run's threshold) nothing moves.
        report = executor.execute_step(timeout_s=20)
        assert report.outcomes == [] and fresh(intent).status == "executing"

        # Later: a new pass recovers the dead run, reclaims the intent, and fails it — no second call.
        later = stuck.lease_expires_at + timedelta(seconds=1000)
        report = executor.run_executor(timeout_s=20, now=later)
        assert len(stalling.calls) == 1
    done = fresh(intent)
    assert done.status == "failed" and done.execution_result["error"] == "attempt_interrupted"
    assert Run.objects.get(pk=dead_run.pk).status == "stale"
    assert Run.objects.get(pk=report.run_id).status == "ok"


@pytest.mark.django_db(transaction=True)
def test_sigterm_mid_call_fails_the_intent_at_once_and_cancels_the_run(
    settings: Any, make_intent: Callable[..., Intent]
) -> None:
    with running_brain(stall_s=30) as stalling:
        settings.BRAIN_URL = stalling.url
        intent = make_intent(type="note", title="Stopped mid-call")
        process = subprocess.Popen(
            [sys.executable, "manage.py", "operator_execute"],
            cwd=ROOT,
            env=_subprocess_env(stalling.url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            wait_until(lambda: len(stalling.calls) == 1, 60, "the executor's brain call", every=0.05)
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=20)
            assert time.monotonic() - started < 10
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode != 0
    done = fresh(intent)
    assert done.status == "failed" and done.execution_result["error"] == "interrupted"
    assert (done.lease_token, done.lease_expires_at) == ("", None)
    assert Run.objects.get(kind="executor").status == "cancelled"
    assert len(stalling.calls) == 1


# =====================================================================================================
# Runs: brain not configured, the single-running lock
# =====================================================================================================
@pytest.mark.django_db(transaction=True)
def test_without_a_brain_nothing_is_claimed_and_the_run_is_skipped(
    settings: Any, make_intent: Callable[..., Intent], capsys: Any
) -> None:
    settings.BRAIN_URL = ""
    intent = make_intent(type="note", title="Waits for a brain")

    call_command("operator_execute")

    out = json.loads(capsys.readouterr().out)
    assert (out["status"], out["ok"], out["run_status"]) == ("brain_not_configured", True, "skipped")
    run = Run.objects.get(pk=out["run_id"])
    assert (run.kind, run.status) == ("executor", "skipped")
    assert "BRAIN_URL" in run.summary
    same = fresh(intent)
    assert (same.status, same.claims, same.lease_token) == ("queued", 0, "")


@pytest.mark.django_db(transaction=True)
def test_another_running_run_makes_the_command_exit_non_zero(
    brain: MeteredBrain, agent: Any, make_intent: Callable[..., Intent]
) -> None:
    with transaction.atomic():
        holding = start_run(principal=agent.principal, kind="tick:morning")
    intent = make_intent(type="note", title="Not while a tick runs")

    with pytest.raises(CommandError, match=r"already_running: Run \d+ \(tick:morning, held by scout\)"):
        call_command("operator_execute")

    assert brain.calls == []
    assert fresh(intent).status == "queued"
    assert Run.objects.filter(kind="executor").count() == 0
    assert Run.objects.get(pk=holding.run.id).status == "running"


@pytest.mark.django_db(transaction=True)
def test_the_step_heartbeats_its_run_and_stops_when_the_run_went_stale(
    brain: MeteredBrain, agent: Any, relief: Any, make_intent: Callable[..., Intent]
) -> None:
    first = make_intent(type="note", title="first")
    second = make_intent(type="note", title="second")
    t0 = timezone.now()
    with transaction.atomic():
        tick = start_run(principal=agent.principal, kind="tick:start", stale_after_s=30, now=t0)
    # Another process took the lock over (the tick looked dead): the tick's step must stop claiming.
    with transaction.atomic():
        start_run(principal=relief.principal, kind="rescue", now=t0 + timedelta(seconds=31))
    report = executor.execute_step(principal=agent.principal, run=tick, timeout_s=20, limit=10)
    assert report.status == "stale"
    assert len(report.outcomes) == 1 and fresh(first).status == "executed"
    assert fresh(second).status == "queued"


@pytest.mark.django_db(transaction=True)
def test_the_service_principal_is_not_borrowed_from_a_token_holder(
    make_principal: Callable[..., Any],
) -> None:
    make_principal("operator-executor", kind="agent")  # someone made a token-holding principal of that name
    with pytest.raises(Exception, match="token-less agent"):
        Principal.objects.service(executor.EXECUTOR_PRINCIPAL)


@pytest.fixture
def relief(make_principal: Callable[..., Any]) -> Any:
    return make_principal("relief", kind="agent")


# =====================================================================================================
# Executors racing: real threads, each with its own connection. On PostgreSQL (where it matters: many
# processes and hosts) the claim is `FOR UPDATE SKIP LOCKED` plus compare-and-set; on SQLite the
# IMMEDIATE write lock serialises the claims. Both databases run these.
# =====================================================================================================
def race(fn: Callable[[int], Any], n: int) -> list[Any]:
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = fn(i)
        except Exception as exc:
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return results


def _intent_of_call(call: Any, by_path: dict[str, int], by_command: dict[str, int]) -> int:
    args = call.arguments
    if args["path"] in by_path:
        return by_path[args["path"]]
    if args["command"] in by_command:
        return by_command[args["command"]]
    return int(args["path"].split("intent-")[1].split("-")[0])


EXECUTORS = 4


@pytest.mark.django_db(transaction=True)
def test_executors_racing_run_every_handler_exactly_once_per_intent(
    brain: MeteredBrain, make_intent: Callable[..., Intent]
) -> None:
    principal = Principal.objects.service(executor.EXECUTOR_PRINCIPAL)
    brain.stall_s = 0.02  # keep calls in flight while the others claim
    for round_ in range(3):
        brain.calls.clear()
        intents: list[Intent] = []
        by_path: dict[str, int] = {}
        by_command: dict[str, int] = {}
        for i in range(8):
            intents.append(make_intent(type="note", title=f"race {round_} note {i}"))
            path = f"race/{round_}/file-{i}.md"
            intents.append(make_intent(type="file_write", title=path, body=f"content {i}"))
            by_path[path] = intents[-1].id
            command = f"echo {round_}-{i}"
            intents.append(make_intent(type="workspace_action", title=f"run {round_} {i}", body=command))
            by_command[command] = intents[-1].id
        connection.close()

        results = race(lambda _: executor.execute_step(principal=principal, timeout_s=30), EXECUTORS)

        assert not [r for r in results if isinstance(r, Exception)], results
        handled = Counter(o.intent_id for r in results for o in r.outcomes)
        assert set(handled) == {i.id for i in intents}
        assert max(handled.values()) == 1, handled  # each intent handled by one executor
        assert sum(len(r.outcomes) > 0 for r in results) >= 2, "no contention was exercised"
        calls = Counter(_intent_of_call(c, by_path, by_command) for c in brain.calls)
        assert calls == Counter({i.id: 1 for i in intents}), calls  # the brain saw each exactly once
        assert set(Intent.objects.filter(id__in=handled).values_list("status", flat=True)) == {"executed"}
        assert all(i.claims == 1 for i in Intent.objects.filter(id__in=handled))
        assert IntentEvent.objects.filter(intent__in=intents, event="attempt").count() == len(intents)


@pytest.mark.django_db(transaction=True)
def test_executors_racing_to_reclaim_expired_leases_never_call_twice(
    brain: MeteredBrain, make_intent: Callable[..., Intent]
) -> None:
    principal = Principal.objects.service(executor.EXECUTOR_PRINCIPAL)
    t0 = timezone.now()
    fresh_claims, attempted = [], []
    for i in range(12):
        intent = make_intent(type="note", title=f"abandoned {i}")
        claim = executor.claim_next(principal=principal, lease_s=120, holder="dead", now=t0)
        assert claim.intent.id == intent.id
        if i % 2:
            call = executor.BrainCall("files_write", {})
            key = executor.execution_key(claim.intent)
            assert executor._mark_attempt(
                claim, principal=principal, call=call, key=key, timeout_s=20, now=t0
            )
            attempted.append(intent)
        else:
            fresh_claims.append(intent)
    connection.close()
    later = t0 + timedelta(seconds=121)

    results = race(lambda _: executor.execute_step(principal=principal, timeout_s=30, now=later), EXECUTORS)

    assert not [r for r in results if isinstance(r, Exception)], results
    handled = Counter(o.intent_id for r in results for o in r.outcomes)
    assert max(handled.values()) == 1 and len(handled) == 12
    calls = Counter(int(c.arguments["path"].split("intent-")[1].split("-")[0]) for c in brain.calls)
    assert calls == Counter({i.id: 1 for i in fresh_claims})
    assert {fresh(i).status for i in fresh_claims} == {"executed"}
    assert {fresh(i).execution_result["error"] for i in attempted} == {"attempt_interrupted"}
    assert {fresh(i).claims for i in fresh_claims + attempted} == {2}


@pytest.mark.django_db(transaction=True)
def test_an_agent_cannot_finish_an_intent_the_executor_holds(
    brain: MeteredBrain, make_intent: Callable[..., Intent], agent: Any
) -> None:
    intent = make_intent(type="note", title="Held by the executor")
    principal = Principal.objects.service(executor.EXECUTOR_PRINCIPAL)
    claim = executor.claim_next(principal=principal, lease_s=120, holder="exec-1", now=timezone.now())
    assert claim is not None and fresh(intent).status == "executing"
    for to in ("executed", "failed"):
        with pytest.raises(Refusal) as refused:
            transition_intent(principal=agent.principal, intent_id=intent.id, to=to)
        assert refused.value.code == "claimed_by_executor"
        assert refused.value.extra["lease_holder"] == "exec-1"
    # Not even with the lease expired: only the executor (a reclaim) takes it from there.
    held = fresh(intent)
    assert held.status == "executing" and held.lease_token == claim.token
    with pytest.raises(Refusal):
        transition_intent(
            principal=agent.principal,
            intent_id=intent.id,
            to="executed",
            now=timezone.now() + timedelta(hours=1),
        )
    # The holder of the lease still finishes it.
    assert executor._finish(
        claim, "executed", principal=principal, result={"ok": True}, note="done", now=timezone.now()
    )
    assert fresh(intent).status == "executed"
    assert brain.calls == []


@pytest.mark.django_db(transaction=True)
def test_an_agent_still_finishes_an_intent_it_carries_out_itself(
    make_intent: Callable[..., Intent], agent: Any
) -> None:
    intent = make_intent(type="note", title="Done by hand")
    transition_intent(principal=agent.principal, intent_id=intent.id, to="executing")
    done, was = transition_intent(principal=agent.principal, intent_id=intent.id, to="executed")
    assert (was, done.status) == ("executing", "executed")
