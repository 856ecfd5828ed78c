"""One tool's calls in process, without HTTP: the CPU and wall time of the server's own path.

    .venv/bin/python bench/in_process.py --tool operator_context_packet --history 1000
    .venv/bin/python bench/in_process.py --tool operator_record_progress --database-url postgres://postgres@127.0.0.1:5432/operator_inproc
    .venv/bin/python bench/in_process.py --tool operator_context_packet --history 1000 --profile 30
    .venv/bin/python bench/in_process.py --unit-cycles 5000 --database-url postgres://postgres@127.0.0.1:5432/operator_inproc

The figures of docs/performance.md that were measured "in process" come from here. A scratch
operator is made as bench/perf.py makes one (bench/packet_growth.py's `Scratch`: a data folder,
the database migrated — PostgreSQL's flushed first — an agent token, and with `--history` N rows
each of tasks, observations and audit events), then this process loads Django on that database
and calls `operator_site.face.dispatch.dispatch` in a loop on one event loop: what one request's
`tools/call` runs once its body is parsed — the argument check, the bearer check with the rate
count, the tool and its audit row, the envelope — at concurrency 1, so on PostgreSQL the unit of
work runs inline on the loop (`OPERATOR_DB_INLINE=auto`, as in a served worker with one request
in flight). Not in it: HTTP, the MCP transport and the JSON-RPC framing. Every answer is checked
as bench/perf.py checks it (a refusal or an error stops the run).

Printed: calls, CPU ms per call of this process (`time.process_time`, which on PostgreSQL leaves
out the database's backend) and wall ms per call (which does not), both summed over the
dispatcher's calls alone: each answer's check (its JSON parsed as bench/perf.py's load generator
parses it: the benchmark's own work) runs outside the clocks and outside the profiler.
`--profile N` runs the measured calls under cProfile and prints the N functions with the most own
time, and the cumulative time of the parts docs/performance.md names (per call; cProfile's clock
is wall time and its hooks slow every call, so a part that waits on PostgreSQL includes the
database's work, and the parts are comparable with each other, not with the unprofiled figures).

`--unit-cycles N` measures instead what a unit of work's connection handling costs
(operator_site/face/db.py): N units that only touch the connection, with `close_old_connections`
before and after each (on PostgreSQL a pooled connection borrowed and given back), against N with
the connection kept; the figure is this process's CPU per unit.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from packet_growth import Scratch, sibling_database
from perf import TOOLS, strict_check, tool_args

ROOT = Path(__file__).resolve().parent.parent
# The parts of a call docs/performance.md names ("The 1,000-row packet, in process"), as
# (label, a function's name as pstats shows it: file suffix and function).
PARTS = (
    ("the dispatcher, whole call", "operator_site/face/dispatch.py", "dispatch"),
    ("the unit of work: the tool and its audit row", "operator_site/face/dispatch.py", "_run_in_transaction"),
    ("the audit row", "operator_site/face/dispatch.py", "_write_audit"),
    ("the bearer check and rate count", "operator_site/face/admission.py", "admit"),
    ("psycopg: a statement sent and its rows received", "psycopg/cursor.py", "execute"),
    ("model instances from the database's JSON", "operator_site/sql/many.py", "_instances"),
    ("answers clipped to their bounds", "operator_site/cross_domain/reads/common.py", "_clip_dict"),
    ("the envelope (the answer's JSON text)", "operator_site/face/envelope.py", "envelope"),
)


def scratch_operator(opts: argparse.Namespace) -> Scratch:
    # The database is created if missing (bench/perf.py does the same).
    op = Scratch(sibling_database(opts.database_url, "") if opts.database_url else None)
    op.env["OPERATOR_RATE_LIMIT"] = "1000000000"  # on, out of reach (as bench/perf.py)
    op.setup()
    if opts.history:
        op.fill(opts.history, all_open=False)
    return op


def load_django(op: Scratch) -> None:
    """This process on the scratch operator's settings, as its server would have them."""
    for name in (
        "OPERATOR_DATA_DIR",
        "SECRET_KEY",
        "ALLOWED_HOSTS",
        "OPERATOR_DELIVERY",
        "OPERATOR_RATE_LIMIT",
    ):
        os.environ[name] = op.env[name]
    if "DATABASE_URL" in op.env:
        os.environ["DATABASE_URL"] = op.env["DATABASE_URL"]
    else:
        os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "operator_site.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def sse_like(result: Any) -> bytes:
    """The tool's result as the body strict_check reads (a JSON-RPC result)."""
    payload = {"jsonrpc": "2.0", "id": 1, "result": result.model_dump(by_alias=True, exclude_none=True)}
    return json.dumps(payload).encode()


class Clock:
    """CPU and wall seconds summed over the dispatcher's calls alone (the answer's check, which is
    the benchmark's own work, is outside them), and the profiler enabled around those calls only."""

    def __init__(self, profiler: cProfile.Profile | None = None) -> None:
        self.cpu = 0.0
        self.wall = 0.0
        self.profiler = profiler

    def start(self) -> None:
        if self.profiler:
            self.profiler.enable()
        self._cpu, self._wall = time.process_time(), time.perf_counter()

    def stop(self) -> None:
        self.cpu += time.process_time() - self._cpu
        self.wall += time.perf_counter() - self._wall
        if self.profiler:
            self.profiler.disable()


async def calls(
    tool: str, token: str, count: int, tag: str, start: int = 0, clock: Clock | None = None
) -> None:
    from operator_site.face import registry
    from operator_site.face.admission import Presented
    from operator_site.face.dispatch import dispatch

    spec = registry.get(tool)
    caller = Presented(token)
    clock = clock or Clock()
    for i in range(start, start + count):
        arguments = tool_args(tool, tag, i)
        clock.start()
        try:
            result = await dispatch(spec, caller, arguments)
        finally:
            clock.stop()
        problem = strict_check(200, sse_like(result))
        if problem:
            raise SystemExit(f"call {i} of {tool}: {problem}")


def timed(run: Callable[[], None]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    return time.process_time() - cpu, time.perf_counter() - wall


def measure_tool(opts: argparse.Namespace, token: str) -> dict[str, Any]:
    tag = f"inproc-{os.getpid()}"
    asyncio.run(calls(opts.tool, token, opts.warmup, tag))
    profiler = cProfile.Profile() if opts.profile else None
    clock = Clock(profiler)
    asyncio.run(calls(opts.tool, token, opts.calls, tag, start=opts.warmup, clock=clock))
    cpu, wall = clock.cpu, clock.wall
    report = {
        "tool": opts.tool,
        "database": "postgresql" if opts.database_url else "sqlite",
        "history": opts.history,
        "calls": opts.calls,
        "cpu_ms_per_call": round(1000 * cpu / opts.calls, 3),
        "wall_ms_per_call": round(1000 * wall / opts.calls, 3),
    }
    if profiler:
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(opts.profile)
        report["parts_cumulative_ms_per_call"] = parts(stats, opts.calls)
    return report


def parts(stats: pstats.Stats, count: int) -> dict[str, float]:
    """Cumulative milliseconds per call of the named parts (wall time under cProfile)."""
    out: dict[str, float] = {}
    for label, suffix, function in PARTS:
        total = sum(
            row[3]
            for (filename, _, name), row in stats.stats.items()  # type: ignore[attr-defined]
            if name == function and filename.endswith(suffix)
        )
        if total:
            out[label] = round(1000 * total / count, 3)
    return out


def measure_unit_cycles(cycles: int) -> dict[str, Any]:
    from django.db import close_old_connections, connection

    from operator_site.face import db

    def touch() -> None:
        connection.ensure_connection()

    touch()
    borrowed, _ = timed(lambda: [db._unit_of_work(touch, ()) for _ in range(cycles)])
    kept, _ = timed(lambda: [touch() for _ in range(cycles)])
    close_old_connections()
    return {
        "cycles": cycles,
        "pool": bool(connection.settings_dict.get("OPTIONS", {}).get("pool")),
        "borrowed_and_given_back_us": round(1e6 * borrowed / cycles, 2),
        "kept_us": round(1e6 * kept / cycles, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tool", default="operator_context_packet", choices=list(TOOLS))
    parser.add_argument(
        "--database-url", help="PostgreSQL (flushed); SQLite in a temporary folder without it"
    )
    parser.add_argument("--history", type=int, default=0, help="rows each of tasks, observations, audit")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile: the N top functions")
    parser.add_argument("--unit-cycles", type=int, default=0, metavar="N", help="the unit of work's cost")
    opts = parser.parse_args()
    os.environ.pop("DATABASE_URL", None)
    op = scratch_operator(opts)
    try:
        load_django(op)
        report = measure_unit_cycles(opts.unit_cycles) if opts.unit_cycles else measure_tool(opts, op.token)
    finally:
        op.close()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
