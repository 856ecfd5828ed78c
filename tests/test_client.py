"""The client for runners and scripts (runs/client.py), against a live operator (uvicorn on
loopback): decoded envelopes, typed refusals, a local allowlist that refuses before any request is
built, one total deadline — and the example morning runner in docs/examples/ run as cron would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from goals.models import Task
from operator_site import powers
from operator_site.models import AuditEvent
from runs.client import (
    ClientError,
    DeadlineExceeded,
    OperatorClient,
    Refused,
    ToolNotAllowed,
    refusal_message,
)
from tests.fixtures import ROOT, free_port

pytestmark = [pytest.mark.socket, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def morning(make_principal):
    return make_principal("morning-runner", tools=list(powers.MORNING_RUNNER_TOOLS))


def test_call_returns_the_decoded_envelope(live_server_uvicorn, morning) -> None:
    client = OperatorClient.for_runner("morning", f"{live_server_uvicorn.url}/mcp", morning.token)
    packet = client.call("operator_context_packet", {})
    assert packet["ok"] is True and packet["day"]["date"]
    created = client.call("operator_update_task", {"key": "water-plants", "patch": {"title": "Water plants"}})
    assert created["created"] is True and created["task"]["title"] == "Water plants"
    assert Task.objects.get(key="water-plants").created_by.name == "morning-runner"


def test_a_tool_outside_the_allowlist_is_refused_locally_with_the_seed_s_message(
    live_server_uvicorn, morning
) -> None:
    client = OperatorClient.for_runner("morning", f"{live_server_uvicorn.url}/mcp", morning.token)
    before = AuditEvent.objects.count()
    outside = sorted(set(powers.RUNNER_POOL) - set(powers.MORNING_RUNNER_TOOLS))
    for tool in [*outside, "operator_update_action_intent", "operator_run_start", "no_such_tool"]:
        with pytest.raises(ToolNotAllowed) as refused:
            client.call(tool, {})
        assert (
            str(refused.value) == f"morning refused: {tool} is not in the enumerated operator tool allowlist"
        )
    assert AuditEvent.objects.count() == before  # nothing reached the operator


def test_the_local_refusal_comes_before_any_connection() -> None:
    """A closed port: an allowed tool fails to connect, a refused one never tries."""
    url = f"http://127.0.0.1:{free_port()}/mcp"
    client = OperatorClient(url, "opk_x", allowlist=["operator_context_packet"], name="night", deadline_s=5)
    with pytest.raises(ToolNotAllowed, match="night refused: operator_update_task is not in"):
        client.call("operator_update_task", {})
    with pytest.raises(ClientError) as failed:
        client.call("operator_context_packet", {})
    assert not isinstance(failed.value, ToolNotAllowed)
    assert (
        refusal_message("night", "x", "operator")
        == "night refused: x is not in the enumerated operator tool allowlist"
    )


def test_a_refusal_is_a_typed_exception_or_a_result(live_server_uvicorn, morning) -> None:
    url = f"{live_server_uvicorn.url}/mcp"
    # No local allowlist: the operator's own (the token's) refuses.
    unscoped = OperatorClient(url, morning.token, name="script")
    with pytest.raises(Refused) as refused:
        unscoped.call("operator_update_decision", {"id": 1, "status": "parked"})
    assert refused.value.code == "tool_not_allowed" and "allowlist" in refused.value.reason
    assert refused.value.retry is False and refused.value.result["ok"] is False

    returning = OperatorClient(url, morning.token, refusals="return")
    answer = returning.call("operator_update_task", {"key": "x", "patch": {"status": "blocked"}})
    assert answer["ok"] is False and answer["error"]  # a blocked task needs a blocker


def test_a_bad_token_is_a_client_error_saying_so(live_server_uvicorn) -> None:
    client = OperatorClient(f"{live_server_uvicorn.url}/mcp", "opk_not-a-real-token-at-all", deadline_s=10)
    with pytest.raises(ClientError) as failed:
        client.call("operator_context_packet", {})
    assert "401" in str(failed.value)


@pytest.fixture
def stalling_server() -> Iterator[str]:
    """Accepts, reads the request, then trickles a byte every 0.2 s and never finishes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
            while not stop.is_set():
                try:
                    conn.sendall(b":\n")
                except OSError:
                    break
                time.sleep(0.2)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    stop.set()
    thread.join(timeout=5)
    listener.close()


def test_one_total_deadline_abandons_a_trickling_server(stalling_server) -> None:
    client = OperatorClient(stalling_server, "opk_x", deadline_s=1.5, mode="legacy")
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"did not answer within 1\.5 s"):
        client.call("operator_context_packet", {})
    assert time.monotonic() - started < 10


def test_the_example_morning_runner_runs_as_cron_would(live_server_uvicorn, morning) -> None:
    env = {
        **os.environ,
        "OPERATOR_URL": f"{live_server_uvicorn.url}/mcp",
        "OPERATOR_TOKEN": morning.token,
    }
    script = ROOT / "docs" / "examples" / "morning.py"
    first = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert "intents awaiting your approval: 0" in first.stdout and "'Morning review': created" in first.stdout
    again = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "already there" in again.stdout, again.stdout + again.stderr
    assert Task.objects.filter(title="Morning review").count() == 1

    revoked = subprocess.run(
        [sys.executable, script],
        env={**env, "OPERATOR_TOKEN": "opk_revoked-or-wrong-token"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert revoked.returncode == 69 and "401" in revoked.stderr
