"""The observe step, against the real test brain on loopback (tests/brain_server.py): probes through
the observe allowlist only, every outcome a tainted observation, the run's lifecycle (ok, error,
skipped, the single-running lock, heartbeats, stale), the deadline, and the import graph: no model,
vector or embedding module, before or after a full observe run in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import transaction
from django.utils import timezone

from runs import observe as observe_module
from runs.lock import start_run
from runs.models import Observation, Run
from runs.observe import Probe, load_probes, observe, observe_step
from runs.records import MAX_OBSERVATION_DATA_BYTES, fenced_observations
from tests import brain_server
from tests.brain_server import OUTSIDE_EVERY_LIST, ListeningSocket, running_brain
from tests.fixtures import ROOT, database_url_of_this_run

BRAIN_TOKEN = "brain-secret-token"
UPTIME = {"name": "uptime", "tool": "actions_shell_run", "arguments": {"command": "uptime"}}
DISK = {"name": "disk", "tool": "machines_command_exec", "arguments": {"command": "df -h"}, "kind": "self"}
WORKSPACE = {"tool": "actions_workspace_run", "arguments": {"command": "git status"}}


@pytest.fixture
def brain(settings: Any) -> Iterator[brain_server.TestBrain]:
    with running_brain() as b:
        settings.BRAIN_URL, settings.BRAIN_TOKEN = b.url, BRAIN_TOKEN
        yield b


pytestmark = pytest.mark.django_db(transaction=True)


def test_each_probe_becomes_one_tainted_observation(
    brain: brain_server.TestBrain, settings: Any, capsys: Any
) -> None:
    settings.OPERATOR_OBSERVE_PROBES = [UPTIME, DISK, WORKSPACE]

    call_command("operator_observe", "--timeout", "20")

    out = json.loads(capsys.readouterr().out)
    assert (out["status"], out["ok"], out["run_status"]) == ("ok", True, "ok")
    assert [c.tool for c in brain.calls] == [
        "actions_shell_run",
        "machines_command_exec",
        "actions_workspace_run",
    ]
    assert [c.arguments["command"] for c in brain.calls] == ["uptime", "df -h", "git status"]
    assert {c.authorization for c in brain.calls} == {f"Bearer {BRAIN_TOKEN}"}
    rows = list(Observation.objects.order_by("id"))
    assert [o.id for o in rows] == out["observations"]
    assert all(o.tainted for o in rows)
    assert [(o.kind, o.source, o.summary) for o in rows] == [
        ("world", "brain:actions_shell_run", "uptime: actions_shell_run ok"),
        ("self", "brain:machines_command_exec", "disk: machines_command_exec ok"),
        ("world", "brain:actions_workspace_run", "actions_workspace_run: actions_workspace_run ok"),
    ]
    assert rows[0].data["tainted"] is True and rows[0].data["text"] == "actions_shell_run ok"
    assert rows[0].data["arguments"] == {"command": "uptime"} and rows[0].data["is_error"] is False
    assert {o.recorded_by.name for o in rows} == {"operator-observe"}
    run = Run.objects.get(pk=out["run_id"])
    assert (run.kind, run.status, run.holder.name, run.heartbeats) == ("observe", "ok", "operator-observe", 3)
    assert run.summary == "3 of 3 probes observed"
    # Every read fences them as untrusted data.
    fenced = fenced_observations()
    assert fenced["tainted"] is True and all(item["tainted"] for item in fenced["items"])


@pytest.mark.parametrize("tool", ["files_search", "memory_recall", "files_write", OUTSIDE_EVERY_LIST])
def test_a_probe_outside_the_observe_allowlist_never_reaches_the_brain(
    settings: Any, tool: str, capsys: Any
) -> None:
    listener = ListeningSocket()
    try:
        settings.BRAIN_URL = f"http://127.0.0.1:{listener.port}/mcp"
        settings.OPERATOR_OBSERVE_PROBES = [{"name": "sneaky", "tool": tool, "arguments": {"query": "x"}}]
        with pytest.raises(
            CommandError, match=r"1 of 1 probes were not carried out: sneaky \(brain_tool_not_allowed\)"
        ):
            call_command("operator_observe")
        time.sleep(0.2)
        assert listener.accepted == 0
    finally:
        listener.close()
    out = json.loads(capsys.readouterr().out)
    assert (out["status"], out["run_status"]) == ("error", "error")
    row = Observation.objects.get()
    assert (row.kind, row.tainted, row.data["error"]) == ("self", True, "brain_tool_not_allowed")
    assert row.data["reason"] == f"observe refused: {tool} is not in the enumerated ian-brain tool allowlist"


def test_a_refused_probe_does_not_stop_the_others(brain: brain_server.TestBrain, settings: Any) -> None:
    probes = [Probe("search", "files_search", {"query": "x"}), Probe("uptime", "actions_shell_run", {})]
    report = observe(probes=probes, timeout_s=20)
    assert [p.outcome for p in report.probes] == ["refused", "observed"]
    assert [c.tool for c in brain.calls] == ["actions_shell_run"]
    assert Observation.objects.count() == 2
    assert Run.objects.get(pk=report.run_id).status == "error"


def test_a_stalling_brain_is_abandoned_at_the_deadline_and_recorded(settings: Any) -> None:
    with running_brain(stall_s=30) as stalling:
        settings.BRAIN_URL = stalling.url
        started = time.monotonic()
        report = observe(probes=[Probe("uptime", "actions_shell_run", {"command": "uptime"})], timeout_s=1.5)
        elapsed = time.monotonic() - started
    assert elapsed < 1.5 + 4.0, elapsed
    [probe] = report.probes
    assert (probe.outcome, probe.error) == ("timeout", "brain_timeout")
    row = Observation.objects.get(pk=probe.observation_id)
    assert row.kind == "self" and row.tainted and "did not answer within 1.5 s" in row.summary
    assert Run.objects.get(pk=report.run_id).status == "error"


def test_without_a_brain_nothing_is_probed_and_the_run_is_skipped(settings: Any, capsys: Any) -> None:
    settings.BRAIN_URL = ""
    settings.OPERATOR_OBSERVE_PROBES = [UPTIME]
    call_command("operator_observe")
    out = json.loads(capsys.readouterr().out)
    assert (out["status"], out["ok"], out["run_status"]) == ("brain_not_configured", True, "skipped")
    assert Observation.objects.count() == 0
    run = Run.objects.get(pk=out["run_id"])
    assert (run.kind, run.status) == ("observe", "skipped") and "BRAIN_URL" in run.summary


def test_without_probes_the_run_is_skipped(brain: brain_server.TestBrain, settings: Any) -> None:
    settings.OPERATOR_OBSERVE_PROBES = []
    report = observe()
    assert (report.status, report.run_status) == ("no_probes", "skipped")
    assert brain.calls == [] and Observation.objects.count() == 0


def test_another_running_run_makes_the_command_exit_non_zero(
    brain: brain_server.TestBrain, settings: Any, agent: Any
) -> None:
    settings.OPERATOR_OBSERVE_PROBES = [UPTIME]
    with transaction.atomic():
        start_run(principal=agent.principal, kind="tick:night")
    with pytest.raises(CommandError, match=r"already_running: Run \d+ \(tick:night, held by scout\)"):
        call_command("operator_observe")
    assert brain.calls == [] and Observation.objects.count() == 0
    assert not Run.objects.filter(kind="observe").exists()


def test_the_step_inside_a_tick_heartbeats_and_stops_when_the_run_went_stale(
    brain: brain_server.TestBrain, agent: Any, relief: Any
) -> None:
    t0 = timezone.now()
    with transaction.atomic():
        tick = start_run(principal=agent.principal, kind="tick:check-in", stale_after_s=30, now=t0)
    probes = [Probe("a", "actions_shell_run", {}), Probe("b", "actions_shell_run", {})]

    report = observe_step(principal=agent.principal, run=tick, probes=probes, timeout_s=20, now=t0)
    assert report.status == "ok" and Run.objects.get(pk=tick.run.id).heartbeats == 2
    assert {o.recorded_by.name for o in Observation.objects.all()} == {"scout"}

    with transaction.atomic():
        start_run(principal=relief.principal, kind="rescue", now=t0 + timedelta(seconds=31))
    report = observe_step(principal=agent.principal, run=tick, probes=probes, timeout_s=20, now=t0)
    assert report.status == "stale" and len(report.probes) == 1  # stopped after the first


def test_a_large_answer_is_kept_within_the_observation_limit() -> None:
    data = observe_module._answer_data(
        Probe("big", "actions_shell_run", {"x": "y" * 9000}), "é" * 20_000, False, 5
    )
    encoded = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    assert len(encoded) <= MAX_OBSERVATION_DATA_BYTES
    assert data["truncated"] is True and data["text"].startswith("ééé")
    assert data["arguments"] == {"not_kept": "too large"}
    assert "\x00" not in observe_module._clip("a\x00b", 100)[0]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"tool": "x"}, "must be a JSON list"),
        (["actions_shell_run"], r"\[0\] must be an object"),
        ([{"arguments": {}}], r"\[0\]\.tool must name a brain tool"),
        ([{"tool": "actions_shell_run", "arguments": "uptime"}], "arguments must be an object"),
        ([{"tool": "actions_shell_run", "kind": "dream"}], "kind must be world or self"),
        ([{"tool": "actions_shell_run", "comand": "x"}], "unknown keys: comand"),
        ([{"tool": "actions_shell_run"}] * 21, "at most 20"),
    ],
)
def test_malformed_probes_are_refused_before_any_run(raw: Any, message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        load_probes(raw)


# =====================================================================================================
# The import graph: no model, vector or embedding module, ever
# =====================================================================================================
BANNED = (
    "torch",
    "transformers",
    "sentence_transformers",
    "numpy",
    "scipy",
    "sklearn",
    "faiss",
    "chromadb",
    "qdrant_client",
    "pinecone",
    "lancedb",
    "weaviate",
    "pymilvus",
    "tensorflow",
    "jax",
    "onnxruntime",
    "tiktoken",
    "openai",
    "anthropic",
    "langchain",
    "llama_index",
    "fastembed",
    "huggingface_hub",
    "tokenizers",
)

PROBE = textwrap.dedent(
    """
    import json, os, sys
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "operator_site.settings")
    import django
    django.setup()
    import runs.observe
    import runs.management.commands.operator_observe
    # what call_brain imports lazily, on its first call
    import mcp.client.streamable_http
    from mcp import Client
    {extra}
    print(json.dumps(sorted(sys.modules)))
    """
)


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SECRET_KEY": "x", **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _banned(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in BANNED)


def test_importing_the_observe_step_loads_no_model_vector_or_embedding_module() -> None:
    modules = _modules_after(PROBE.format(extra=""))
    assert "runs.observe" in modules and "mcp.client.streamable_http" in modules
    assert _banned(modules) == []


def test_the_import_check_can_fail(tmp_path: Path) -> None:
    """A stand-in `torch` reached through the same imports is caught (the check is not vacuous)."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("")
    modules = _modules_after(PROBE.format(extra="import torch"), env={"PYTHONPATH": f"{tmp_path}:{ROOT}"})
    assert _banned(modules) == ["torch"]


def test_a_full_observe_run_in_a_fresh_interpreter_loads_no_banned_module(
    brain: brain_server.TestBrain,
) -> None:
    """The whole path — settings, the brain client's lazy imports, a real call to the test brain,
    recording observations — in a process that imported nothing else first."""
    code = PROBE.format(
        extra=textwrap.dedent(
            """
            from runs.observe import observe
            report = observe(timeout_s=20)
            assert report.status == "ok", report
            """
        )
    )
    env = {
        "DATABASE_URL": database_url_of_this_run(),
        "BRAIN_URL": brain.url,
        "BRAIN_TOKEN": BRAIN_TOKEN,
        "OPERATOR_OBSERVE_PROBES": json.dumps([UPTIME, DISK]),
    }
    modules = _modules_after(code, env=env)
    assert [c.tool for c in brain.calls] == ["actions_shell_run", "machines_command_exec"]
    assert Observation.objects.count() == 2
    assert "httpx2" in modules and "mcp.client.streamable_http" in modules  # the client really ran
    assert _banned(modules) == []
