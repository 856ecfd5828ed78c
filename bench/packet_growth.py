"""Does the orientation packet slow down as history grows? p50 latency at 1,000 vs 100,000 rows of history.

    .venv/bin/python bench/packet_growth.py [--rounds 6] [--seconds 2] [--all-open] [--json out.json]
    .venv/bin/python bench/packet_growth.py --database-url postgres://postgres@127.0.0.1:5432/operator_bench

Two scratch operators side by side, each one uvicorn worker with a bearer token: one whose history
holds 1,000 rows EACH of tasks, observations and audit events, the other 100,000 of each (bulk
inserts; observations spread over the past days, 500 a day, each day with its operator day row; a
dozen pending approvals, a directive and some progress in both). SQLite by default (a fresh
database in a temporary data folder per operator); with --database-url, that PostgreSQL database
(flushed) for the small one and `<name>_large` next to it (created if missing) for the large one.

`tools/call` is driven closed-loop at concurrency 1 through the full stack (bearer check,
allowlist, validation, one transaction with the audit row, the envelope) for
`operator_context_packet` (today's packet) and `operator_state` (the newest 50 rows of each of its
five sections), with `operator_list_directives` (a trivial read) as the reference for the stack's
own cost. The two sizes are measured in alternating rounds, so a background load that comes
and goes (other processes on a shared machine) weighs on both alike. It prints p50/p90/p99 per
tool and size and the ratio p50(100,000) / p50(1,000) (target <= 1.5).

The board: tasks are history, so by default the open board is the same in both (200 open tasks in
8 lanes; every other task is done or dropped, as finished work is). `--all-open` makes every task
open instead (a 100,000-task board), to show the packet stays bounded even then.

The script re-runs itself as `packet_growth.py fill N` (and `fill-audit N`) with an operator's
environment to insert rows through Django, so the server and the filler see the same settings.
`Scratch`, `fill`, `interleaved_rounds` and `sibling_database` are shared with bench/perf.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import Result, default_check, run_load, tools_call_body
from mcp_throughput import free_port, stop, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
SIZES = (1_000, 100_000)
OPEN_BOARD = 200
LANES = 8
OBSERVATIONS_PER_DAY = 500
# operator_list_directives is the reference: the stack's cost around a trivial read (the anchor of
# bench/mcp_throughput.py), measured in the same rounds.
TOOLS = {"operator_context_packet": {}, "operator_state": {}, "operator_list_directives": {}}


# --- the filler (runs inside Django, in a child process) ---------------------------------------------
def fill(target: int, all_open: bool) -> dict[str, Any]:
    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "operator_site.settings")
    django.setup()

    from datetime import timedelta

    from django.db import connection, transaction
    from django.utils import timezone

    from goals.models import Task
    from intents.directives import set_directive
    from intents.lifecycle import ActionInput, record_intent
    from operator_site.models import AuditEvent, Principal
    from runs.models import Observation, OperatorDay
    from runs.records import record_progress

    principal, _ = Principal.objects.get_or_create(name="bench-history", defaults={"kind": "agent"})
    now = timezone.now()
    today = timezone.localdate(now)
    with transaction.atomic():
        if not Task.objects.exists():  # the first fill: a little of everything else the packet shows
            for i in range(12):
                record_intent(
                    principal=principal,
                    action=ActionInput(type="spend", title=f"Renew plan {i}", amount_cents=100 + i),
                )
            set_directive(principal=principal, kind="topic_mute", topic="newsletters", minutes=600, reason="")
            for i in range(12):
                record_progress(principal=principal, summary=f"step {i}", outcome="done")

    statuses = ("done", "dropped")
    priorities = ("urgent", "high", "normal", "low")
    have = Task.objects.count()
    Task.objects.bulk_create(
        [
            Task(
                key=f"h-{i}",
                title=f"History task {i}",
                status=("todo", "doing", "blocked")[i % 3] if all_open or i < OPEN_BOARD else statuses[i % 2],
                blocker="waiting" if (all_open or i < OPEN_BOARD) and i % 3 == 2 else "",
                lane=f"lane-{i % LANES}",
                priority=priorities[i % 4],
                detail="Some detail about the task. " * 4,
                created_by=principal,
                updated_by=principal,
                created_at=now - timedelta(minutes=i),
                updated_at=now - timedelta(minutes=i),
            )
            for i in range(have, target)
        ],
        batch_size=2000,
    )

    have = Observation.objects.count()
    days_needed = (target - 1) // OBSERVATIONS_PER_DAY + 1
    OperatorDay.objects.bulk_create(
        [OperatorDay(date=today - timedelta(days=d), opened_at=now) for d in range(days_needed)],
        ignore_conflicts=True,
    )
    day_ids = dict(OperatorDay.objects.values_list("date", "id"))
    Observation.objects.bulk_create(
        [
            Observation(
                day_id=day_ids[today - timedelta(days=i // OBSERVATIONS_PER_DAY)],
                kind="world",
                summary=f"Observation {i}: the portal changed its layout again.",
                source="bench",
                data={"i": i},
                recorded_by=principal,
                created_at=now - timedelta(minutes=i * 3),
            )
            for i in range(have, target)
        ],
        batch_size=2000,
    )

    have = AuditEvent.objects.count()
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                principal=principal,
                tool="operator_record_observation",
                outcome="ok",
                duration_ms=1.0,
                args_sha256="0" * 64,
            )
            for _ in range(have, target)
        ],
        batch_size=2000,
    )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # what autovacuum does after a bulk load
    return {
        "tasks": Task.objects.count(),
        "open_tasks": Task.objects.filter(status__in=Task.OPEN_STATUSES).count(),
        "observations": Observation.objects.count(),
        "audit": AuditEvent.objects.count(),
    }


def fill_audit(target: int) -> dict[str, Any]:
    """Grow the audit trail to `target` rows, fast: one INSERT ... SELECT FROM generate_series on
    PostgreSQL (a million rows in seconds, where bulk_create would take minutes), bulk_create
    elsewhere. The rows are what the operator writes per call, spread over the past days."""
    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "operator_site.settings")
    django.setup()

    from django.db import connection

    from operator_site.models import AuditEvent, Principal

    principal, _ = Principal.objects.get_or_create(name="bench-history", defaults={"kind": "agent"})
    missing = target - AuditEvent.objects.count()
    if missing > 0 and connection.vendor == "postgresql":
        quote = connection.ops.quote_name
        field_names = ("principal_id", "tool", "outcome", "error_code", "duration_ms", "args_sha256")
        columns = ", ".join(quote(AuditEvent._meta.get_field(f).column) for f in field_names)
        created = quote(AuditEvent._meta.get_field("created_at").column)
        # Identifiers come from the model's own metadata, values are bound parameters.
        sql = (
            f"INSERT INTO {quote(AuditEvent._meta.db_table)} ({columns}, {created}) "  # noqa: S608
            "SELECT %s, 'operator_record_observation', 'ok', '', 1.0, repeat('0', 64), "
            "now() - g * interval '1 second' FROM generate_series(1, %s) AS g"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [principal.pk, missing])
            cursor.execute("ANALYZE")  # what autovacuum does after a bulk load
    elif missing > 0:
        AuditEvent.objects.bulk_create(
            [
                AuditEvent(
                    principal=principal,
                    tool="operator_record_observation",
                    outcome="ok",
                    duration_ms=1.0,
                    args_sha256="0" * 64,
                )
                for _ in range(missing)
            ],
            batch_size=5000,
        )
    return {"audit": AuditEvent.objects.count()}


# --- the driver -------------------------------------------------------------------------------------
class Scratch:
    """A scratch operator: data folder, database (flushed), token, uvicorn (one worker by default).

    `entrypoint` "uvicorn" runs `python -m uvicorn operator_site.asgi:application`; "serve" runs the
    product's own `manage.py serve` (which launches uvicorn itself), so that whatever it does to the
    server is measured too. The server's output goes to `server.log` in the data folder; a failed
    start, and any error or warning it logged, are shown on stderr."""

    def __init__(self, database_url: str | None, workers: int = 1, entrypoint: str = "uvicorn") -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="operator-packet-bench-")
        self.env = {
            **os.environ,
            "OPERATOR_DATA_DIR": self.tmp.name,
            "OPERATOR_NO_VENV": "1",
            "SECRET_KEY": "bench-secret-key",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "OPERATOR_DELIVERY": "off",
            # A benchmark is a flood by design; the per-token limit would answer 429 within a minute.
            "OPERATOR_RATE_LIMIT": "0",
        }
        if database_url:
            self.env["DATABASE_URL"] = database_url
        else:  # SQLite in the data folder, even if the calling shell exports a DATABASE_URL
            self.env.pop("DATABASE_URL", None)
        self.workers = workers
        self.entrypoint = entrypoint
        self.log_path = Path(self.tmp.name) / "server.log"
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.token = ""

    def manage(self, *args: str) -> str:
        return subprocess.run(
            [PY, "manage.py", *args], cwd=ROOT, env=self.env, check=True, capture_output=True, text=True
        ).stdout

    def setup(self) -> None:
        if "DATABASE_URL" in self.env:
            self.manage("flush", "--no-input")
        self.manage("migrate", "--no-input", "-v", "0")
        created = self.manage("operator_token", "create", f"bench-{os.getpid()}-{id(self)}", "--agent")
        self.token = created.strip().splitlines()[-1]

    def fill(self, target: int, all_open: bool) -> dict[str, Any]:
        return self._child("fill", str(target), *(["--all-open"] if all_open else []))

    def fill_audit(self, target: int) -> dict[str, Any]:
        return self._child("fill-audit", str(target))

    def _child(self, *args: str) -> dict[str, Any]:
        """Run this script's filler in a child process with this operator's environment."""
        out = subprocess.run(
            [PY, str(Path(__file__).resolve()), *args],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return json.loads(out.strip().splitlines()[-1])

    def server_argv(self) -> list[str]:
        where = ["--host", "127.0.0.1", "--port", str(self.port), "--workers", str(self.workers)]
        if self.entrypoint == "serve":
            return [PY, "manage.py", "serve", *where, "--no-access-log"]
        app = "operator_site.asgi:application"
        return [PY, "-m", "uvicorn", app, *where, "--no-access-log", "--log-level", "warning"]

    def start(self) -> None:
        self.port = free_port()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.server_argv(), cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            wait_for_port(self.port, self.process)
        except RuntimeError as error:
            raise RuntimeError(f"{error}; its output:\n{self.log_tail()}") from error

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def report_problems(self) -> None:
        """Echo the server's log tail if it logged an error or a warning (a benchmark's figures
        mean little if the server was failing underneath)."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        if any(marker in text for marker in ("Traceback", "ERROR", "WARNING", "CRITICAL")):
            print(f"--- server log of {self.url} (tail) ---\n{self.log_tail()}", file=sys.stderr)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def close(self) -> None:
        if self.process:
            stop(self.process)
            self.report_problems()
        self.tmp.cleanup()


def sibling_database(url: str, suffix: str) -> str:
    """A second PostgreSQL database next to `url` (created if missing): the large history's."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/") + suffix
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


Check = Callable[[int, bytes], str | None]


def load(
    op: Scratch, tool: str, seconds: float, warmup_s: float = 0.3, check: Check = default_check
) -> Result:
    return asyncio.run(
        run_load(
            op.url,
            tools_call_body(tool, TOOLS[tool]),
            concurrency=1,
            seconds=seconds,
            headers={"Authorization": f"Bearer {op.token}"},
            warmup_s=warmup_s,
            check=check,
        )
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


@dataclass
class Samples:
    """Every latency of one (tool, size), over all rounds, and each round's own p50."""

    latencies_ms: list[float] = field(default_factory=list)
    round_p50_ms: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""


def interleaved_rounds(
    targets: Sequence[tuple[Scratch, Hashable]],
    tools: Sequence[str],
    rounds: int,
    seconds: float,
    warmup_s: float = 0.3,
    check: Check = default_check,
) -> dict[tuple[str, Hashable], Samples]:
    """Drive each tool at concurrency 1 against every target in turn, `rounds` times.

    Every round measures all targets back to back, in the reverse order every other round, so a
    background load that comes and goes (other processes on a shared machine) weighs on all alike.
    """
    samples = {(tool, label): Samples() for tool in tools for _, label in targets}
    for r in range(rounds):
        for tool in tools:
            for op, label in targets if r % 2 == 0 else list(reversed(targets)):
                result = load(op, tool, seconds, warmup_s, check)
                sample = samples[(tool, label)]
                sample.latencies_ms += result.latencies_ms
                sample.round_p50_ms.append(pct(result.latencies_ms, 0.5))
                sample.errors += result.errors
                sample.first_error = sample.first_error or result.first_error
    return samples


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "fill":
        print(json.dumps(fill(int(sys.argv[2]), "--all-open" in sys.argv)))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "fill-audit":
        print(json.dumps(fill_audit(int(sys.argv[2]))))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="measured seconds per tool, size and round"
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds, alternating the two sizes")
    parser.add_argument("--database-url", help="PostgreSQL (flushed; the large size uses <name>_large)")
    parser.add_argument("--all-open", action="store_true", help="every task open (a 100,000-task board)")
    parser.add_argument("--json", help="also write the figures to this file")
    opts = parser.parse_args()

    urls: list[str | None] = [None, None]
    if opts.database_url:
        urls = [opts.database_url, sibling_database(opts.database_url, "_large")]
    ops = [Scratch(url) for url in urls]
    counts: dict[int, dict[str, Any]] = {}
    try:
        for op, size in zip(ops, SIZES, strict=True):
            op.setup()
            counts[size] = op.fill(size, opts.all_open)
            op.start()
        samples = interleaved_rounds(
            list(zip(ops, SIZES, strict=True)), list(TOOLS), opts.rounds, opts.seconds
        )
    finally:
        for op in ops:
            op.close()

    database = "postgresql" if opts.database_url else "sqlite"
    board = "every task open" if opts.all_open else f"{OPEN_BOARD} open tasks, the rest done or dropped"
    print(
        f"\npacket growth, one uvicorn worker per size, concurrency 1, database: {database}; board: {board}; "
        f"{opts.rounds} interleaved rounds of {opts.seconds:g} s\n"
    )
    print(f"{'tool':26} {'history':>8} {'calls':>6} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'errors':>6}")
    rows = []
    for (tool, size), sample in samples.items():
        values = sample.latencies_ms
        row = {
            "tool": tool,
            "history": size,
            "rows": counts[size],
            "calls": len(values),
            "p50_ms": round(pct(values, 0.5), 3),
            "p90_ms": round(pct(values, 0.9), 3),
            "p99_ms": round(pct(values, 0.99), 3),
            "round_p50_ms": [round(v, 2) for v in sample.round_p50_ms],
            "errors": sample.errors,
        }
        rows.append(row)
        print(
            f"{tool:26} {size:>8,} {row['calls']:>6} {row['p50_ms']:>8.2f} {row['p90_ms']:>8.2f} "
            f"{row['p99_ms']:>8.2f} {row['errors']:>6}"
        )
    ratios = {}
    for tool in TOOLS:
        small, big = (next(r for r in rows if r["tool"] == tool and r["history"] == n) for n in SIZES)
        ratios[tool] = round(big["p50_ms"] / small["p50_ms"], 3)
        verdict = "ok" if ratios[tool] <= 1.5 else "ABOVE TARGET"
        label = f"ratio p50 {SIZES[1]:,} / {SIZES[0]:,} rows, {tool}"
        print(f"{label}: {ratios[tool]:.2f} (target <= 1.5: {verdict})")
    report = {"database": database, "board": board, "rounds": opts.rounds, "rows": rows, "ratios": ratios}
    if opts.json:
        Path(opts.json).write_text(json.dumps(report, indent=2))
    print("\n" + json.dumps(report))
    if any(sample.errors for sample in samples.values()):
        print("ERRORS in the run:", file=sys.stderr)
        for (tool, size), sample in samples.items():
            if sample.errors:
                print(f"  {tool} at {size:,}: {sample.first_error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
