"""Two versions of the operator side by side: the same tools, interleaved rounds, one run.

    .venv/bin/python bench/side_by_side.py --other /path/to/another/checkout
    .venv/bin/python bench/side_by_side.py --other ../before --database postgresql --concurrency 1
    .venv/bin/python bench/side_by_side.py --other ../before --tools operator_context_packet --history 1000

A change's effect is smaller than this machine's drift between two runs of bench/perf.py (anchor
(a) alone moves by ±30 % from one hour to the next), so "is it faster?" is answered here by serving
this checkout ("this") and another one ("other", e.g. `git worktree add ../before <rev>`; it runs
on this checkout's virtual environment) at once, each on a scratch operator of its own (SQLite, or
a PostgreSQL database each), and measuring each (database, tool, concurrency) in `--rounds` rounds
whose order alternates — (other, this), (this, other), … — so the drift within a figure weighs on
both alike. Printed per figure: req/s, p50 and server CPU per call of each, the database's CPU per
call (PostgreSQL), and this/other as the median (and range) of the round ratios of req/s. Every
answer is checked as bench/perf.py checks it; the exit status is non-zero if any was wrong.

With `--anchor`, anchor (a) (bench/perf.py's reference) is served too and measured in every round
as a third side, the order of the three turning from round to round; each figure then also gets
this/(a) and other/(a), the medians of their round ratios. That is how a ratio against (a) of an
older checkout is measured in the same hour as this one's (bench/perf.py's `SQLITE_BEFORE`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from packet_growth import PY, Scratch, sibling_database
from perf import (
    CONCURRENCIES,
    DEFAULT_DATABASE_URL,
    FULL,
    TOOLS,
    AnchorA,
    CpuMeter,
    Plan,
    Pooled,
    Side,
    anchor_a_alongside,
    body_for,
    fmt,
    interleave,
    interleaved,
    log,
    ratio,
    spread,
    strict_check,
    worker_pids,
)

ROOT = Path(__file__).resolve().parent.parent


class RootedScratch(Scratch):
    """A scratch operator served from the checkout at `root` (its manage.py serve)."""

    def __init__(self, root: Path, database_url: str | None) -> None:
        super().__init__(database_url, workers=1, entrypoint="serve")
        self.root = root
        self.env["OPERATOR_RATE_LIMIT"] = "1000000000"  # on, out of reach (as bench/perf.py)

    def manage(self, *args: str) -> str:
        return subprocess.run(
            [PY, "manage.py", *args], cwd=self.root, env=self.env, check=True, capture_output=True, text=True
        ).stdout

    def start(self) -> None:
        from mcp_throughput import free_port, wait_for_port

        self.port = free_port()
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                self.server_argv(), cwd=self.root, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        wait_for_port(self.port, self.process)


def side_of(op: Scratch, tool: str, database_url: str | None) -> Side:
    return Side(
        op.url,
        lambda: body_for(tool),
        lambda: CpuMeter(lambda: worker_pids(op), database_url),
        op.token,
        strict_check,
    )


def three_ways(
    this: Side, other: Side, anchor: Side, concurrency: int, plan: Plan
) -> tuple[Pooled, Pooled, Pooled]:
    """As perf.interleaved, with anchor (a) as a third side (perf.interleave: the six orders of the
    three in turn)."""
    theirs, ours, a = interleave([(other, True), (this, True), (anchor, False)], concurrency, plan)
    return ours, theirs, a


def compare(opts: argparse.Namespace, plan: Plan) -> list[dict[str, Any]]:
    with ExitStack() as stack:
        anchor = stack.enter_context(anchor_a_alongside(plan)) if opts.anchor else None
        return compare_with(opts, plan, anchor)


def compare_with(opts: argparse.Namespace, plan: Plan, anchor: AnchorA | None) -> list[dict[str, Any]]:
    rows = []
    for database in opts.database:
        urls: dict[str, str | None] = {"this": None, "other": None}
        if database == "postgresql":
            # A database each, created if missing (and flushed by the scratch operator's setup).
            urls = {name: sibling_database(opts.database_url, f"_{name}") for name in urls}
        ops = {
            "this": RootedScratch(ROOT, urls["this"]),
            "other": RootedScratch(Path(opts.other).resolve(), urls["other"]),
        }
        for name, setting in opts.env:
            key, _, value = setting.partition("=")
            ops[name].env[key] = value
        try:
            for op in ops.values():
                op.setup()
                if opts.history:
                    # Filled by this checkout's code (bench/packet_growth.py's fill): the same rows.
                    op.fill(opts.history, all_open=False)
                op.start()
            for tool in opts.tools:
                for concurrency in opts.concurrency:
                    this = side_of(ops["this"], tool, urls["this"])
                    other = side_of(ops["other"], tool, urls["other"])
                    if anchor:
                        ours, theirs, a = three_ways(this, other, anchor.side(), concurrency, plan)
                    else:
                        (ours, theirs), a = interleaved(this, other, concurrency, plan), None
                    rows.append(row(database, tool, concurrency, ours, theirs, a))
                    r = rows[-1]
                    log(
                        f"{database:10s} {tool:30s} c={concurrency:<2d} this {r['this_rps']:7.1f} req/s "
                        f"p50 {r['this_p50_ms']:6.2f} ms cpu {fmt(r['this_cpu_ms'])} | other "
                        f"{r['other_rps']:7.1f} req/s p50 {r['other_p50_ms']:6.2f} ms "
                        f"cpu {fmt(r['other_cpu_ms'])}"
                        f" | this/other {fmt(r['ratio'])} ({fmt(r['ratio_min'])}-{fmt(r['ratio_max'])})"
                        + (
                            f" | vs (a) {r['a_rps']:.1f} req/s: this {fmt(r['this_vs_a'])} "
                            f"({fmt(r['this_vs_a_min'])}-{fmt(r['this_vs_a_max'])}), other "
                            f"{fmt(r['other_vs_a'])} ({fmt(r['other_vs_a_min'])}-{fmt(r['other_vs_a_max'])})"
                            if a
                            else ""
                        )
                        + (f" ERRORS {r['errors']}: {r['first_error']}" if r["errors"] else "")
                    )
        finally:
            for op in ops.values():
                op.close()
    return rows


def round_ratios(top: Pooled, bottom: Pooled) -> dict[str, Any]:
    return spread([ratio(t, b) for t, b in zip(top.round_rps, bottom.round_rps, strict=True)])


def row(
    database: str, tool: str, concurrency: int, ours: Pooled, theirs: Pooled, anchor: Pooled | None = None
) -> dict[str, Any]:
    mine, other = ours.summary(), theirs.summary()
    vs = round_ratios(ours, theirs)
    against_a: dict[str, Any] = {}
    if anchor:
        against_a["a_rps"] = anchor.summary()["rps"]
        for name, side in (("this", ours), ("other", theirs)):
            vs_a = round_ratios(side, anchor)
            against_a |= {
                f"{name}_vs_a": vs_a["median"],
                f"{name}_vs_a_min": vs_a["min"],
                f"{name}_vs_a_max": vs_a["max"],
            }
    return {
        "database": database,
        "tool": tool,
        "concurrency": concurrency,
        "this_rps": mine["rps"],
        "this_p50_ms": mine["p50_ms"],
        "this_cpu_ms": mine.get("server_cpu_ms"),
        "this_db_cpu_ms": mine.get("db_cpu_ms"),
        "other_rps": other["rps"],
        "other_p50_ms": other["p50_ms"],
        "other_cpu_ms": other.get("server_cpu_ms"),
        "other_db_cpu_ms": other.get("db_cpu_ms"),
        "ratio": vs["median"],
        "ratio_min": vs["min"],
        "ratio_max": vs["max"],
        "ratio_rounds": vs["rounds"],
        "errors": mine["errors"] + other["errors"],
        "first_error": mine["first_error"] or other["first_error"],
        **against_a,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--other", required=True, help="the other checkout's folder (this one: a setting)")
    parser.add_argument(
        "--env",
        nargs=2,
        action="append",
        default=[],
        metavar=("SIDE", "NAME=VALUE"),
        help="a setting for one side only (this or other), e.g. --env this OPERATOR_DB_INLINE=true",
    )
    parser.add_argument(
        "--database", nargs="+", default=["postgresql", "sqlite"], choices=["postgresql", "sqlite"]
    )
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL, help="PostgreSQL (siblings are made)")
    parser.add_argument("--tools", nargs="+", default=list(TOOLS), choices=list(TOOLS))
    parser.add_argument("--concurrency", nargs="+", type=int, default=list(CONCURRENCIES))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--round-seconds", type=float, default=0.5)
    parser.add_argument(
        "--history", type=int, default=0, help="rows of history in both (1000: bench/perf.py's growth figure)"
    )
    parser.add_argument(
        "--anchor", action="store_true", help="anchor (a) as a third side: this/(a) and other/(a) per figure"
    )
    parser.add_argument("--json", help="also write the rows to this file")
    opts = parser.parse_args()
    plan = dataclasses.replace(FULL, rounds=opts.rounds, round_seconds=opts.round_seconds)
    os.environ.pop("DATABASE_URL", None)
    rows = compare(opts, plan)
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2))
    print(json.dumps(rows))
    sys.exit(1 if any(r["errors"] for r in rows) else 0)


if __name__ == "__main__":
    main()
