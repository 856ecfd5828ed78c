"""The operator as a client of the brain: enumerated allowlists enforced before any request, only
BRAIN_TOKEN goes downstream, and one total deadline that holds against a stalling server and a
drip-feeding one. Against real servers on loopback (tests/brain_server.py)."""

from __future__ import annotations

import sys
import time

import pytest

from operator_site import powers
from runs.brain import BrainNotConfigured, BrainRefused, BrainTimeout, call_brain
from tests.brain_server import OUTSIDE_EVERY_LIST, DripFeedServer, ListeningSocket, running_brain


@pytest.mark.parametrize("tool", sorted(powers.EXECUTOR_TOOLS))
def test_the_executor_may_call_its_enumerated_tools(settings, tool: str) -> None:
    with running_brain() as brain:
        settings.BRAIN_URL, settings.BRAIN_TOKEN = brain.url, "brain-secret-token"
        result = call_brain("executor", tool, {"payload": "x"}, timeout_s=20)
    assert result.is_error is False
    assert result.text == f"{tool} ok"
    assert [c.tool for c in brain.calls] == [tool]
    assert brain.calls[0].authorization == "Bearer brain-secret-token"


@pytest.mark.parametrize(
    ("caller", "tool"),
    [
        ("executor", OUTSIDE_EVERY_LIST),
        ("executor", "actions_shell_run"),
        ("executor", "machines_command_exec"),
        ("observe", "files_search"),
        ("observe", "memory_recall"),
        ("observe", "files_write"),
        ("observe", OUTSIDE_EVERY_LIST),
    ],
)
def test_a_tool_outside_the_callers_list_raises_before_any_connection(
    settings, caller: str, tool: str
) -> None:
    listener = ListeningSocket()
    try:
        settings.BRAIN_URL = f"http://127.0.0.1:{listener.port}/mcp"
        with pytest.raises(BrainRefused) as refused:
            call_brain(caller, tool, {})
        time.sleep(0.2)
        assert listener.accepted == 0
    finally:
        listener.close()
    assert str(refused.value) == f"{caller} refused: {tool} is not in the enumerated ian-brain tool allowlist"


def test_an_unknown_caller_has_no_powers(settings) -> None:
    settings.BRAIN_URL = "http://127.0.0.1:9/mcp"
    with pytest.raises(BrainRefused, match="has no enumerated ian-brain tool allowlist"):
        call_brain("night-runner", "files_write", {})


def test_without_a_brain_url_the_call_reports_not_configured(settings) -> None:
    settings.BRAIN_URL = ""
    with pytest.raises(BrainNotConfigured):
        call_brain("observe", "actions_shell_run", {"command": "uptime"})


def test_a_stalling_brain_is_abandoned_at_the_deadline(settings) -> None:
    with running_brain(stall_s=30) as brain:
        settings.BRAIN_URL = brain.url
        started = time.monotonic()
        with pytest.raises(BrainTimeout):
            call_brain("observe", "actions_shell_run", {"command": "uptime"}, timeout_s=1.0)
        elapsed = time.monotonic() - started
    assert elapsed < 3.0, elapsed
    assert [c.tool for c in brain.calls] == ["actions_shell_run"]  # it was reached, then abandoned


def test_a_drip_feeding_brain_is_abandoned_at_the_deadline(settings) -> None:
    drip = DripFeedServer(interval_s=0.1)
    try:
        settings.BRAIN_URL = f"http://127.0.0.1:{drip.port}/mcp"
        started = time.monotonic()
        with pytest.raises(BrainTimeout):
            call_brain("executor", "files_search", {"query": "x"}, timeout_s=1.5)
        elapsed = time.monotonic() - started
    finally:
        drip.close()
    assert drip.bytes_sent > 0  # bytes kept coming: a per-read timeout alone would never fire
    assert elapsed < 4.0, elapsed


def test_the_downstream_lists_are_exactly_the_seeds() -> None:
    assert powers.EXECUTOR_TOOLS == {"files_write", "files_search", "memory_recall", "actions_workspace_run"}
    assert powers.OBSERVE_TOOLS == {"actions_shell_run", "machines_command_exec", "actions_workspace_run"}
    assert not powers.OBSERVE_TOOLS & {"files_search", "memory_recall"}  # never the search tools


@pytest.mark.parametrize("role", ["morning-runner", "night-runner"])
def test_neither_runner_may_touch_an_intents_lifecycle(role: str) -> None:
    assert "operator_update_action_intent" not in powers.ROLES[role]
    assert set(powers.ROLES[role]) <= powers.RUNNER_POOL


def test_the_runner_lists_are_separate() -> None:
    assert powers.MORNING_RUNNER_TOOLS != powers.NIGHT_RUNNER_TOOLS


def test_the_brain_client_module_loads_no_model_or_embedding_library() -> None:
    banned = (
        "torch",
        "transformers",
        "sentence_transformers",
        "numpy",
        "faiss",
        "chromadb",
        "qdrant_client",
        "pinecone",
        "lancedb",
        "sklearn",
        "tensorflow",
        "jax",
    )
    import subprocess

    probe = (
        "import os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'operator_site.settings');"
        "os.environ.setdefault('SECRET_KEY', 'x'); import django; django.setup();"
        "import runs.brain, operator_site.powers; print(','.join(sorted(m for m in sys.modules)))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    modules = set(loaded.strip().split(","))
    assert not [m for m in modules if m.split(".")[0] in banned]
