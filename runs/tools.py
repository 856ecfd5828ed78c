"""MCP tools of the runs app: the run lock (start, heartbeat, finish) and the day's record
(progress, observations). Thin: validate, call a service, shape the answer."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from django.utils import timezone
from pydantic import Field

from operator_site.face.dispatch import ToolCall
from operator_site.face.registry import ToolArgs, ToolClass, tool
from runs import answers, lock, records
from runs.models import DEFAULT_STALE_AFTER_S, MAX_STALE_AFTER_S, MIN_STALE_AFTER_S

FinishStatus = Literal["ok", "error", "skipped", "cancelled", "stale"]
Outcome = Literal["done", "partial", "blocked", "failed"]
RUN_ID_FIELD = Field(ge=1, description="From operator_run_start.")
TOKEN_FIELD = Field(min_length=8, max_length=200, description="The token from operator_run_start.")


class RunStartArgs(ToolArgs):
    kind: str | None = Field(
        None,
        min_length=1,
        max_length=lock.MAX_KIND_CHARS,
        description="What run, e.g. tick:morning (default: run).",
    )
    stale_after_s: int = Field(
        DEFAULT_STALE_AFTER_S,
        ge=MIN_STALE_AFTER_S,
        le=MAX_STALE_AFTER_S,
        description=(
            "Seconds without a heartbeat until it counts as dead; capped at "
            "OPERATOR_RUN_MAX_STALE_MINUTES (15 min unless set), as stale_after_capped then "
            "says."
        ),
    )
    note: str | None = Field(None, max_length=lock.MAX_NOTE_CHARS, description="Why, briefly.")


@tool(
    "operator_run_start",
    tool_class=ToolClass.WRITE,
    args=RunStartArgs,
    title="Start a run",
    examples=[
        {"kind": "inbox-triage", "stale_after_s": 600, "note": "morning inbox pass"},
        {"kind": "tick:check-in"},
    ],
)
def run_start(call: ToolCall, args: RunStartArgs) -> dict[str, Any]:
    """Start an autonomous run under the single-running lock: one run at a time, across all
    processes and hosts. A running run with no heartbeat within its stale_after_s is marked stale
    and replaced (in `recovered`); otherwise already_running, with its id, kind, holder, start, last
    heartbeat. Keep run_id and token, send operator_run_heartbeat at least every heartbeat_every_s
    seconds, end with operator_run_finish. A heartbeat answering stale: true means stop: taken over,
    or ended by the person."""
    now = timezone.now()
    started = lock.start_run(
        principal=call.principal, kind=args.kind, stale_after_s=args.stale_after_s, note=args.note, now=now
    )
    run = started.run
    answer = {
        "ok": True,
        "run_id": run.id,
        "token": started.token,
        "heartbeat_every_s": max(10, run.stale_after_s // 3),
        "run": answers.run_dict(run, now),
        "recovered": [answers.run_dict(r, now) for r in started.recovered],
    }
    if started.asked_stale_after_s is not None:
        answer["stale_after_capped"] = {
            "asked": started.asked_stale_after_s,
            "granted": run.stale_after_s,
            "reason": f"The operator allows a run at most {run.stale_after_s} s without a heartbeat "
            "(OPERATOR_RUN_MAX_STALE_MINUTES); send heartbeats at least every heartbeat_every_s seconds.",
        }
    return answer


class RunHeartbeatArgs(ToolArgs):
    run_id: int = RUN_ID_FIELD
    token: str = TOKEN_FIELD
    progress: str | None = Field(
        None, max_length=lock.MAX_RUN_PROGRESS_CHARS, description="Where it is, in a sentence."
    )


@tool(
    "operator_run_heartbeat",
    tool_class=ToolClass.WRITE,
    args=RunHeartbeatArgs,
    title="Run heartbeat",
    examples=[{"run_id": 41, "token": "run_0123456789abcdef", "progress": "12 of 30 messages triaged"}],
)
def run_heartbeat(call: ToolCall, args: RunHeartbeatArgs) -> dict[str, Any]:
    """The dead-man's switch: refresh the run `token` holds. ok: false, stale: true means it was
    marked stale (taken over) or finished: stop working under it. A wrong token is refused."""
    now = timezone.now()
    run = lock.heartbeat(
        principal=call.principal, run_id=args.run_id, token=args.token, progress=args.progress, now=now
    )
    return {
        "ok": True,
        "stale": False,
        "run_id": run.id,
        "status": run.status,
        "last_heartbeat": run.last_heartbeat_at,
        "stale_at": answers.run_dict(run, now)["stale_at"],
        "heartbeat_every_s": max(10, run.stale_after_s // 3),
    }


class RunFinishArgs(ToolArgs):
    run_id: int = RUN_ID_FIELD
    token: str = TOKEN_FIELD
    status: FinishStatus = Field(description="skipped: nothing to do; stale: giving itself up.")
    summary: str | None = Field(None, max_length=lock.MAX_RUN_SUMMARY_CHARS, description="What it did.")


@tool(
    "operator_run_finish",
    tool_class=ToolClass.WRITE,
    args=RunFinishArgs,
    title="Finish a run",
    examples=[
        {"run_id": 41, "token": "run_0123456789abcdef", "status": "ok", "summary": "30 messages triaged"},
        {"run_id": 41, "token": "run_0123456789abcdef", "status": "skipped", "summary": "inbox empty"},
    ],
)
def run_finish(call: ToolCall, args: RunFinishArgs) -> dict[str, Any]:
    """Close a run, releasing the lock, once: a second finish, or one after a stale takeover,
    changes nothing and says why."""
    now = timezone.now()
    run = lock.finish_run(
        principal=call.principal,
        run_id=args.run_id,
        token=args.token,
        status=args.status,
        summary=args.summary,
        now=now,
    )
    return {
        "ok": True,
        "run": answers.run_dict(run, now),
        "duration_s": round((run.ended_at - run.started_at).total_seconds(), 3),
    }


ProgressItem = Annotated[str, Field(min_length=1, max_length=records.MAX_PROGRESS_ITEM_CHARS)]


class RecordProgressArgs(ToolArgs):
    summary: str = Field(
        min_length=1, max_length=records.MAX_PROGRESS_SUMMARY_CHARS, description="What was done."
    )
    outcome: Outcome = Field(description="How it ended.")
    tried: list[ProgressItem] | None = Field(
        None, max_length=records.MAX_PROGRESS_ITEMS, description="What was tried."
    )
    failed: list[ProgressItem] | None = Field(
        None, max_length=records.MAX_PROGRESS_ITEMS, description="What failed."
    )
    run_id: int | None = Field(None, ge=1, description="Its run.")
    tick: str | None = Field(
        None,
        min_length=1,
        max_length=records.MAX_TICK_CHARS,
        description="Its tick, e.g. check-in.",
    )


@tool(
    "operator_record_progress",
    tool_class=ToolClass.WRITE,
    args=RecordProgressArgs,
    title="Record progress",
    examples=[
        {
            "summary": "Triaged the inbox; two replies drafted as intents.",
            "outcome": "partial",
            "tried": ["archive newsletters", "draft replies"],
            "failed": ["calendar lookup timed out"],
            "tick": "check-in",
        },
        {"summary": "Nothing new since the morning tick.", "outcome": "done"},
    ],
)
def record_progress(call: ToolCall, args: RecordProgressArgs) -> dict[str, Any]:
    """Record what this tick or piece of work did, in today's operator day (opened on first write)."""
    entry = records.record_progress(
        principal=call.principal,
        summary=args.summary,
        outcome=args.outcome,
        tried=args.tried,
        failed=args.failed,
        run_id=args.run_id,
        tick=args.tick,
    )
    return {"ok": True, "progress": answers.progress_dict(entry)}


class RecordObservationArgs(ToolArgs):
    kind: Literal["world", "self"] = Field(description="world: the outside world; self: the operator itself.")
    summary: str = Field(
        min_length=1, max_length=records.MAX_OBSERVATION_SUMMARY_CHARS, description="The delta."
    )
    source: str | None = Field(
        None, max_length=records.MAX_OBSERVATION_SOURCE_CHARS, description="Where from (URL, tool)."
    )
    data: dict[str, Any] | None = Field(
        None,
        description=f"Small structured detail: at most {records.MAX_OBSERVATION_DATA_BYTES} bytes as JSON, "
        f"{records.MAX_OBSERVATION_DATA_DEPTH} levels deep.",
    )
    # Declared so that a caller sending it is not refused as an unknown argument: accepted, ignored.
    tainted: Any = Field(
        None,
        description="Ignored: always tainted.",
    )


@tool(
    "operator_record_observation",
    tool_class=ToolClass.WRITE,
    args=RecordObservationArgs,
    title="Record an observation",
    examples=[
        {
            "kind": "world",
            "summary": "The landlord's portal shows the March rent as unpaid.",
            "source": "https://portal.example.com/rent",
            "data": {"month": "2027-03", "amount_cents": 125000},
        },
        {"kind": "self", "summary": "The calendar tool timed out twice this morning."},
    ],
)
def record_observation(call: ToolCall, args: RecordObservationArgs) -> dict[str, Any]:
    """Record one cheap world or self delta. Tainted at the sink, always: stored untrusted whatever
    the arguments say, never confirmation evidence, fenced as tainted in every read, apart from
    instructions and beliefs."""
    claimed = args.tainted if "tainted" in args.model_fields_set else records.MISSING
    observation = records.record_observation(
        principal=call.principal,
        kind=args.kind,
        summary=args.summary,
        source=args.source,
        data=args.data,
        claimed_tainted=claimed,
    )
    answer: dict[str, Any] = {
        "ok": True,
        "tainted": True,
        "observation": answers.observation_dict(observation),
        "taint": records.TAINT_NOTE,
    }
    if claimed is not records.MISSING and claimed is not True:
        answer["ignored"] = {"tainted": claimed}
        answer["note"] = (
            f"The argument tainted={json.dumps(claimed, default=str)[:100]} was ignored: "
            "the observation is stored tainted."
        )
    return answer
