"""Where a tool call's server CPU goes: py-spy sampling one uvicorn worker under load.

    .venv/bin/python bench/profile_server.py --tool operator_record_progress --seconds 8 \
        --database-url postgres://postgres@127.0.0.1:5432/operator_profile --py-spy /path/to/py-spy

A scratch operator (bench/packet_growth.py's Scratch, served by `manage.py serve`, one worker)
takes a closed loop of calls at the given concurrency while `py-spy record --format raw` samples
it; the summary lists the functions holding the most samples, inclusive (the share of calls'
time under them) and self. py-spy is a PyPI package (`pip install py-spy`); it is not a
dependency of the project, so its path is an argument. Needs ptrace (root, or
kernel.yama.ptrace_scope=0). `--idle` keeps samples of threads waiting (on the database, the
event loop's select): by default only threads running Python are counted. `--env NAME=VALUE` sets
one of the profiled server's settings (the benchmark's: delivery off, the rate limit out of reach),
e.g. `--env OPERATOR_DELIVERY=background` to see an intent's notice delivered as the service runs.

On PostgreSQL, when the server has `pg_stat_statements` loaded (`shared_preload_libraries`; it
needs a restart, so the benchmark never changes it itself), the database's side is printed too:
every statement of the profiled calls with its calls per tool call, mean execution time and share
of the database's time (the extension is created in the scratch database and its counters reset
before the measured load).

`--perf PATH` (Linux `perf`, which needs root or kernel.perf_event_paranoid <= 1) samples the
database's side where pg_stat_statements is not loaded, or where its figures (execution and
planning only) leave most of the backends' CPU unexplained: the backends serving the scratch
database are recorded with call graphs during the measured load, and the summary gives the share
of their samples in each phase of a statement's life (reading the client's message, parsing and
planning, the executor's start, run and end, the commit, sending the answer) and the functions
holding the most samples. PostgreSQL's binary keeps its exported function names, so no debug
symbols are needed; a sample in an unexported (static) function is counted under its caller's
phase.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import run_load
from packet_growth import Scratch, sibling_database
from perf import RATE_LIMIT_ON, backend_pids, body_for, strict_check


def summarize(raw: Path, top: int) -> str:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [
            f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].rsplit("/", 2)[-1]
            for f in stack.split(";")
        ]
        for frame in set(frames):
            inclusive[frame] += n
        own[frames[-1]] += n
    lines = [f"{total} samples", "", "inclusive:", *shares(inclusive, total, top)]
    lines += ["", "self:", *shares(own, total, top)]
    return "\n".join(lines)


def shares(counts: collections.Counter[str], total: int, top: int | None = None) -> list[str]:
    """The most common names of `counts`, each with its share of `total` samples."""
    return [f"  {100 * n / total:5.1f} %  {name}" for name, n in counts.most_common(top)]


# The phases of a backend's work on a statement, by the PostgreSQL function (or the C library's or
# kernel's, for the socket) whose frame is on a sample's stack, the first listed that matches.
DATABASE_PHASES = (
    ("commit (WAL flush included)", ("CommitTransactionCommand", "XLogFlush")),
    ("executor start (plan tree initialised)", ("standard_ExecutorStart",)),
    ("executor run", ("standard_ExecutorRun",)),
    ("executor end, portal drop", ("standard_ExecutorEnd", "PortalDrop")),
    (
        "parse, analyse, plan",
        (
            "raw_parser",
            "parse_analyze_fixedparams",
            "parse_analyze_varparams",
            "pg_analyze_and_rewrite_fixedparams",
            "pg_plan_queries",
            "GetCachedPlan",
        ),
    ),
    ("send the answer", ("pq_flush", "secure_write", "__send", "__sendto")),
    ("read and wait for the next message", ("secure_read", "pq_getbyte", "WaitEventSetWait", "epoll_wait")),
)


def perf_stacks(data: Path, perf: str) -> list[list[str]]:
    """The call stacks (leaf first) of a `perf record -g` file, as function names."""
    text = subprocess.run(
        [perf, "script", "-i", str(data), "-F", "ip,sym"], capture_output=True, text=True, check=True
    ).stdout
    stacks: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            if current:
                stacks.append(current)
            current = []
            continue
        current.append(parts[1].split("+0x")[0] if len(parts) > 1 else "[unknown]")
    if current:
        stacks.append(current)
    return stacks


def summarize_database(stacks: list[list[str]], calls: int, top: int) -> str:
    """The database's samples by phase (`DATABASE_PHASES`) and by function."""
    total = len(stacks)
    if not total:
        return "perf: no samples of the database's backends"
    phases: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    for stack in stacks:
        own[stack[0]] += 1
        frames = set(stack)
        phase = next((name for name, functions in DATABASE_PHASES if frames.intersection(functions)), "other")
        phases[phase] += 1
    lines = [f"perf: {total} samples of the database's backends, {total / max(calls, 1):.2f} per tool call"]
    lines += ["", "phase:", *shares(phases, total)]
    lines += ["", "self:", *shares(own, total, top)]
    return "\n".join(lines)


class StatementStats:
    """The database's side of a profile, from pg_stat_statements when the server has it loaded."""

    def __init__(self, database_url: str) -> None:
        import psycopg

        self.database = urlsplit(database_url).path.lstrip("/")
        self.conn = psycopg.connect(database_url, autocommit=True)
        loaded = self.conn.execute("SHOW shared_preload_libraries").fetchone()[0]
        self.available = "pg_stat_statements" in loaded
        if self.available:
            self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

    def reset(self) -> None:
        if self.available:
            self.conn.execute("SELECT pg_stat_statements_reset()")

    def report(self, calls: int, top: int = 15) -> str:
        if not self.available:
            return "pg_stat_statements: not loaded on this server (shared_preload_libraries); skipped"
        rows = self.conn.execute(
            "SELECT s.calls, s.mean_exec_time, s.total_exec_time, s.total_plan_time, s.query "
            "FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
            "WHERE d.datname = %s ORDER BY s.total_exec_time DESC",
            [self.database],
        ).fetchall()
        total = sum(r[2] + r[3] for r in rows) or 1.0
        lines = [
            f"pg_stat_statements ({calls} tool calls): database time per tool call "
            f"{total / max(calls, 1):.3f} ms (execution and planning)",
            "  per call   mean ms   share  statement",
        ]
        for count, mean, exec_ms, plan_ms, query in rows[:top]:
            text = " ".join(query.split())[:110]
            share = 100 * (exec_ms + plan_ms) / total
            lines.append(f"  {count / max(calls, 1):8.2f} {mean:9.3f} {share:6.1f} %  {text}")
        return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tool", default="operator_record_progress")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--database-url", help="PostgreSQL (a sibling database is used); SQLite without")
    parser.add_argument("--py-spy", default="py-spy", help="the py-spy executable")
    parser.add_argument("--perf", help="Linux perf: also sample the database's backends (PostgreSQL only)")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--idle", action="store_true", help="count waiting threads' samples too")
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        help="rows of history to fill first (packet_growth's fill: 1000 as bench/perf.py)",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the profiled server, e.g. OPERATOR_DELIVERY=background (default off)",
    )
    opts = parser.parse_args()
    if opts.perf and not opts.database_url:
        parser.error("--perf samples PostgreSQL's backends: give --database-url")

    url = sibling_database(opts.database_url, "_profile") if opts.database_url else None
    op = Scratch(url, entrypoint="serve")
    op.env["OPERATOR_RATE_LIMIT"] = RATE_LIMIT_ON
    for setting in opts.env:
        name, sep, value = setting.partition("=")
        if not sep:
            parser.error(f"--env takes NAME=VALUE, not {setting!r}")
        op.env[name] = value
    try:
        op.setup()
        if opts.history:
            op.fill(opts.history, all_open=False)
        op.start()
        assert op.process
        body = body_for(opts.tool)
        asyncio.run(
            run_load(
                op.url,
                body,
                concurrency=opts.concurrency,
                seconds=1.0,
                warmup_s=0,
                headers={"Authorization": f"Bearer {op.token}"},
                check=strict_check,
            )
        )
        statements = StatementStats(url) if url else None
        if statements:
            statements.reset()
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "profile.txt"
            spy = subprocess.Popen(
                [
                    opts.py_spy,
                    "record",
                    "--pid",
                    str(op.process.pid),
                    "--format",
                    "raw",
                    "--output",
                    str(raw),
                    "--duration",
                    str(int(opts.seconds)),
                    "--rate",
                    "500",
                    "--nonblocking",
                    "--threads",
                    *(["--idle"] if opts.idle else []),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            backends = None
            pids = backend_pids(url) if opts.perf and url else []
            if opts.perf and not pids:
                print("perf: no backend serves the scratch database yet; the database is not sampled")
            if pids:
                backends = subprocess.Popen(
                    [
                        opts.perf,
                        "record",
                        "--quiet",
                        "-F",
                        "999",
                        "-g",
                        "-o",
                        str(Path(tmp) / "perf.data"),
                        "-p",
                        ",".join(str(pid) for pid in pids),
                        "--",
                        "sleep",
                        str(opts.seconds),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            result = asyncio.run(
                run_load(
                    op.url,
                    body_for(opts.tool),  # new arguments: a repeated write is refused, not measured
                    concurrency=opts.concurrency,
                    seconds=opts.seconds,
                    warmup_s=0,
                    headers={"Authorization": f"Bearer {op.token}"},
                    check=strict_check,
                )
            )
            spy.wait(timeout=opts.seconds + 30)
            if backends:
                backends.wait(timeout=opts.seconds + 30)
            print(
                f"{opts.tool} on {'postgresql' if url else 'sqlite'}, c={opts.concurrency}: "
                f"{result.rps:.0f} req/s, {result.errors} errors"
            )
            print(summarize(raw, opts.top))
            if statements:
                print()
                print(statements.report(result.requests + result.errors))
            if backends:
                print()
                stacks = perf_stacks(Path(tmp) / "perf.data", opts.perf)
                print(summarize_database(stacks, result.requests + result.errors, opts.top))
    finally:
        op.close()


if __name__ == "__main__":
    main()
