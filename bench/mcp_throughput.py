"""Throughput of /mcp against a bare-SDK anchor, measured in the same run.

    .venv/bin/python bench/mcp_throughput.py [--seconds 8] [--database-url URL] [--json out.json]

Starts, one after another on loopback: the anchor (a minimal stateless server built only with the
MCP SDK, one trivial tool, a fresh server per request), the same anchor with one shared server, and
the operator (one uvicorn worker, a fresh SQLite database unless --database-url is given) with a
bearer token. Drives `tools/call` at concurrency 1 and 16 for a bounded time each, and prints
requests/s, p50 and p99 and the ratio operator/anchor. The operator side goes through the whole
stack: bearer check, allowlist, argument validation, one transaction, the audit row, the envelope.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import run_load, tools_call_body

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not start")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


class Operator:
    """The operator in a scratch data folder: migrated, with a bench agent token, under uvicorn."""

    def __init__(self, database_url: str | None, workers: int = 1) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="operator-bench-")
        self.env = {
            **os.environ,
            "OPERATOR_DATA_DIR": self.tmp.name,
            "OPERATOR_NO_VENV": "1",
            "SECRET_KEY": "bench-secret-key",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            # The per-token rate limit stays on (its statement is part of what is measured) but high
            # enough that one token driving thousands of requests a second is never refused.
            "OPERATOR_RATE_LIMIT": os.environ.get("OPERATOR_RATE_LIMIT", "1000000000"),
        }
        if database_url:
            self.env["DATABASE_URL"] = database_url
        self.workers = workers
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.token = ""

    def manage(self, *args: str) -> str:
        return subprocess.run(
            [PY, "manage.py", *args], cwd=ROOT, env=self.env, check=True, capture_output=True, text=True
        ).stdout

    def __enter__(self) -> Operator:
        if "DATABASE_URL" in self.env:
            self.manage("flush", "--no-input")
        self.manage("migrate", "--no-input", "-v", "0")
        name = f"bench-{os.getpid()}-{self.port}"
        self.token = self.manage("operator_token", "create", name, "--agent").strip().splitlines()[-1]
        self.process = subprocess.Popen(
            [
                PY,
                "-m",
                "uvicorn",
                "operator_site.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--no-access-log",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=self.env,
        )
        wait_for_port(self.port, self.process)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process:
            stop(self.process)
        self.tmp.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


class Anchor:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.port = free_port()

    def __enter__(self) -> Anchor:
        self.process = subprocess.Popen(
            [PY, str(ROOT / "bench" / "anchor_sdk_server.py"), "--port", str(self.port), "--mode", self.mode],
            cwd=ROOT,
        )
        wait_for_port(self.port, self.process)
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self.process)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


def measure(
    url: str, body: Any, concurrency: int, seconds: float, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    result = asyncio.run(run_load(url, body, concurrency=concurrency, seconds=seconds, headers=headers))
    return result.summary()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per figure")
    parser.add_argument("--database-url", help="run the operator on this database (default: fresh SQLite)")
    parser.add_argument("--json", help="also write the figures to this file")
    opts = parser.parse_args()

    anchor_body = tools_call_body("echo", {"text": "hello"})
    ours_body = tools_call_body("operator_list_directives", {})
    rows: list[dict[str, Any]] = []
    for concurrency in (1, 16):
        with Anchor("fresh") as anchor:
            a = measure(anchor.url, anchor_body, concurrency, opts.seconds)
        with Anchor("shared") as shared:
            b = measure(shared.url, anchor_body, concurrency, opts.seconds)
        with Operator(opts.database_url) as op:
            ours = measure(
                op.url, ours_body, concurrency, opts.seconds, headers={"Authorization": f"Bearer {op.token}"}
            )
        for name, fig in (
            ("anchor (a): SDK, fresh server per request", a),
            ("anchor (b): SDK, one shared server", b),
            ("operator: operator_list_directives, full stack", ours),
        ):
            rows.append(
                {
                    "variant": name,
                    "concurrency": concurrency,
                    **fig,
                    "ratio_vs_anchor_a": round(fig["rps"] / a["rps"], 3) if a["rps"] else None,
                }
            )

    database = "postgresql" if opts.database_url and opts.database_url.startswith("postgres") else "sqlite"
    print(
        f"\n/mcp throughput, one uvicorn worker each, database: {database}, {opts.seconds:g} s per figure\n"
    )
    print(f"{'variant':50} {'conc':>4} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} {'vs (a)':>7}")
    for r in rows:
        print(
            f"{r['variant']:50} {r['concurrency']:>4} {r['rps']:>8.1f} {r['p50_ms']:>8.2f} "
            f"{r['p99_ms']:>8.2f} {r['errors']:>6} {r['ratio_vs_anchor_a']:>7.2f}"
        )
    report = {"database": database, "seconds": opts.seconds, "rows": rows}
    if opts.json:
        Path(opts.json).write_text(json.dumps(report, indent=2))
    print("\n" + json.dumps(report))
    if any(r["errors"] for r in rows):
        print("ERRORS in the run", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
