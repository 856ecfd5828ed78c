"""The observe step: cheap probes of the world through the brain, recorded as tainted observations.

Each configured probe (`OPERATOR_OBSERVE_PROBES`) is one call through the observe allowlist, and each
outcome one observation, tainted whatever it says; a probe that could not be carried out becomes a
`self` observation saying so. docs/runs-and-ticks.md ("The observe step") has the details. This
module imports no model, vector or embedding library (runs/tests/test_observe.py checks it).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from operator_site.errors import log_failure, short_reason
from operator_site.models import Principal
from operator_site.refusals import Refusal
from runs import holding
from runs.brain import BrainError, call_brain, check_allowed
from runs.keepalive import WORKER_STALE_AFTER_S
from runs.lock import StartedRun, heartbeat
from runs.models import Observation
from runs.records import (
    MAX_OBSERVATION_DATA_BYTES,
    MAX_OBSERVATION_SOURCE_CHARS,
    MAX_OBSERVATION_SUMMARY_CHARS,
    record_observation,
)

logger = logging.getLogger("operator.observe")

OBSERVE_PRINCIPAL = "operator-observe"
MAX_PROBES = 20
MAX_PROBE_NAME_CHARS = 64
MAX_TEXT_BYTES = 6000  # of the answer kept in an observation (its data is capped at 8 KiB as JSON)


@dataclass(frozen=True)
class Probe:
    name: str
    tool: str
    arguments: dict[str, Any]
    kind: str = Observation.Kind.WORLD


def load_probes(raw: Any = None) -> list[Probe]:
    """The configured probes (default `settings.OPERATOR_OBSERVE_PROBES`), checked.

    Each entry: `{"tool": str, "arguments": {...}?, "name": str?, "kind": "world"|"self"?}`. A
    malformed entry raises ImproperlyConfigured naming it. Whether the tool is in the observe
    allowlist is NOT checked here: such a probe is refused when it runs (recorded, not fatal).
    """
    raw = settings.OPERATOR_OBSERVE_PROBES if raw is None else raw
    if not isinstance(raw, list):
        raise ImproperlyConfigured("OPERATOR_OBSERVE_PROBES must be a JSON list")
    if len(raw) > MAX_PROBES:
        raise ImproperlyConfigured(f"OPERATOR_OBSERVE_PROBES lists {len(raw)} probes; at most {MAX_PROBES}")
    probes: list[Probe] = []
    for i, entry in enumerate(raw):
        where = f"OPERATOR_OBSERVE_PROBES[{i}]"
        if not isinstance(entry, dict):
            raise ImproperlyConfigured(f"{where} must be an object")
        unknown = set(entry) - {"tool", "arguments", "name", "kind"}
        if unknown:
            raise ImproperlyConfigured(f"{where} has unknown keys: {', '.join(sorted(unknown))}")
        tool, arguments = entry.get("tool"), entry.get("arguments", {})
        if not isinstance(tool, str) or not tool:
            raise ImproperlyConfigured(f"{where}.tool must name a brain tool")
        if not isinstance(arguments, dict):
            raise ImproperlyConfigured(f"{where}.arguments must be an object")
        name = entry.get("name", tool)
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_PROBE_NAME_CHARS:
            raise ImproperlyConfigured(f"{where}.name must be a short text")
        kind = entry.get("kind", Observation.Kind.WORLD)
        if kind not in Observation.Kind.values:
            raise ImproperlyConfigured(f"{where}.kind must be world or self")
        probes.append(Probe(name=name.strip(), tool=tool, arguments=arguments, kind=kind))
    return probes


@dataclass
class ProbeOutcome:
    name: str
    tool: str
    outcome: str  # observed | refused | timeout | error | not_recorded
    observation_id: int | None = None
    error: str | None = None
    reason: str | None = None
    duration_ms: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class ObserveReport:
    status: str = "ok"  # ok | error | brain_not_configured | no_probes | stale
    reason: str | None = None
    probes: list[ProbeOutcome] = field(default_factory=list)
    run_id: int | None = None
    run_status: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.status in {"ok", "brain_not_configured", "no_probes"},
            "status": self.status,
            "reason": self.reason,
            "run_id": self.run_id,
            "run_status": self.run_status,
            "observations": [p.observation_id for p in self.probes if p.observation_id is not None],
            "probes": [p.as_dict() for p in self.probes],
        }


def _clip(text: str, max_bytes: int) -> tuple[str, bool]:
    """`text` without NUL characters (no database stores them in JSON text), at most `max_bytes`."""
    text = text.replace("\x00", "\ufffd")
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text, False
    return encoded[:max_bytes].decode("utf-8", errors="ignore"), True


def _fits(data: dict[str, Any]) -> bool:
    encoded = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")
    return len(encoded) <= MAX_OBSERVATION_DATA_BYTES


def _answer_data(probe: Probe, text: str, is_error: bool, duration_ms: int) -> dict[str, Any]:
    kept, truncated = _clip(text, MAX_TEXT_BYTES)
    data: dict[str, Any] = {
        "tainted": True,
        "probe": probe.name,
        "tool": probe.tool,
        "arguments": probe.arguments,
        "is_error": is_error,
        "text": kept,
        "truncated": truncated,
        "duration_ms": duration_ms,
    }
    if not _fits(data):  # large arguments: keep the answer, say the arguments were left out
        data["arguments"] = {"not_kept": "too large"}
    while not _fits(data) and data["text"]:
        data["text"], data["truncated"] = _clip(data["text"], len(data["text"].encode("utf-8")) // 2)[0], True
    return data


def _summary(probe: Probe, text: str, is_error: bool) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "(empty answer)")
    label = f"{probe.name} (error)" if is_error else probe.name
    return _clip(f"{label}: {first}", 3000)[0][:MAX_OBSERVATION_SUMMARY_CHARS]


def _record(
    principal: Principal, kind: str, summary: str, source: str, data: dict[str, Any], now: datetime
) -> int:
    with transaction.atomic():
        return record_observation(
            principal=principal, kind=kind, summary=summary, source=source, data=data, now=now
        ).id


def run_probe(
    probe: Probe, *, principal: Principal, timeout_s: float | None, clock: Callable[[], datetime]
) -> ProbeOutcome:
    """One probe: one brain call through the observe allowlist, one tainted observation."""
    outcome = ProbeOutcome(name=probe.name, tool=probe.tool, outcome="observed")
    source = f"brain:{probe.tool}"[:MAX_OBSERVATION_SOURCE_CHARS]
    started = time.monotonic()
    try:
        check_allowed("observe", probe.tool)  # also inside call_brain; here to say "refused" plainly
        answer = call_brain("observe", probe.tool, probe.arguments, timeout_s=timeout_s)
    except BrainError as exc:
        outcome.outcome = {"brain_tool_not_allowed": "refused", "brain_timeout": "timeout"}.get(
            exc.code, "error"
        )
        outcome.error, outcome.reason = exc.code, str(exc)[:500]
        outcome.duration_ms = round((time.monotonic() - started) * 1000)
        kind = Observation.Kind.SELF
        summary = f"observe probe {probe.name} ({probe.tool}) was not carried out: {outcome.reason}"
        data = {
            "tainted": True,
            "probe": probe.name,
            "tool": probe.tool,
            "error": exc.code,
            "reason": outcome.reason,
            "duration_ms": outcome.duration_ms,
        }
    else:
        outcome.duration_ms = round((time.monotonic() - started) * 1000)
        kind = probe.kind
        summary = _summary(probe, answer.text, answer.is_error)
        data = _answer_data(probe, answer.text, answer.is_error, outcome.duration_ms)
    try:
        outcome.observation_id = _record(
            principal, kind, summary[:MAX_OBSERVATION_SUMMARY_CHARS], source, data, clock()
        )
    except Refusal as refusal:
        outcome.outcome, outcome.error, outcome.reason = "not_recorded", refusal.code, refusal.reason
    return outcome


def probe_crashed(probe: Probe, *, principal: Principal, exc: BaseException, now: datetime) -> ProbeOutcome:
    """A probe raised something other than a brain error: log it, and record (if the database takes
    it) a `self` observation saying the probe failed — never the exception's text, which may carry
    the brain's or the database's words; the log has them, under the error id."""
    error_id = log_failure(logger, "observe probe %s", probe.name)
    reason = f"the probe failed ({short_reason(exc, error_id)})"
    outcome = ProbeOutcome(
        name=probe.name, tool=probe.tool, outcome="error", error="internal_error", reason=reason
    )
    try:
        outcome.observation_id = _record(
            principal,
            Observation.Kind.SELF,
            f"observe probe {probe.name} ({probe.tool}) was not carried out: {reason}"[
                :MAX_OBSERVATION_SUMMARY_CHARS
            ],
            f"brain:{probe.tool}"[:MAX_OBSERVATION_SOURCE_CHARS],
            {
                "tainted": True,
                "probe": probe.name,
                "tool": probe.tool,
                "error": "internal_error",
                "error_id": error_id,
            },
            now,
        )
    except Exception:
        logger.exception("observe probe %s: could not record its failure (error id %s)", probe.name, error_id)
    return outcome


def observe_step(
    *,
    principal: Principal | None = None,
    run: StartedRun | None = None,
    probes: Sequence[Probe] | None = None,
    timeout_s: float | None = None,
    now: datetime | None = None,
) -> ObserveReport:
    """Run every probe once (default: the configured ones) and record each outcome as a tainted
    observation. The ticks call this inside their run: `run` gets a heartbeat after each probe, and
    a stale run stops the step. Status `ok` when every probe was answered, `error` when any could not
    be carried out (each is still recorded), `brain_not_configured` / `no_probes` when nothing ran."""
    principal = principal or Principal.objects.service(OBSERVE_PRINCIPAL)
    probes = load_probes() if probes is None else list(probes)
    report = ObserveReport()
    if not settings.BRAIN_URL:
        report.status = "brain_not_configured"
        report.reason = "No brain is configured (BRAIN_URL is empty): no probe was run, nothing recorded."
        return report
    if not probes:
        report.status = "no_probes"
        report.reason = "No observe probe is configured (OPERATOR_OBSERVE_PROBES is empty)."
        return report
    clock = (lambda: now) if now is not None else timezone.now
    for probe in probes:
        try:
            outcome = run_probe(probe, principal=principal, timeout_s=timeout_s, clock=clock)
        except Exception as exc:
            # One probe's failure, whatever it is, is that probe's outcome; the others still run.
            outcome = probe_crashed(probe, principal=principal, exc=exc, now=clock())
        report.probes.append(outcome)
        if run is not None:
            try:
                with transaction.atomic():
                    heartbeat(
                        principal=principal,
                        run_id=run.run.id,
                        token=run.token,
                        progress=f"observe: {len(report.probes)}/{len(probes)} probes",
                        now=clock(),
                    )
            except Refusal:
                report.status = "stale"
                report.reason = "the run went stale (another run took over): stopped probing"
                return report
    failed = [p for p in report.probes if p.outcome != "observed"]
    if failed:
        report.status = "error"
        report.reason = f"{len(failed)} of {len(probes)} probes were not carried out: " + ", ".join(
            f"{p.name} ({p.error})" for p in failed
        )
    return report


def observe(
    *,
    principal: Principal | None = None,
    probes: Sequence[Probe] | None = None,
    timeout_s: float | None = None,
    stale_after_s: int = WORKER_STALE_AFTER_S,
    now: datetime | None = None,
) -> ObserveReport:
    """`manage.py operator_observe`: `observe_step` under its own run (kind `observe`).

    Raises `Refusal("already_running")` when another run holds the single-running lock (nothing is
    probed). The run finishes `skipped` (no brain, no probes), `ok`, or `error` (a probe could not be
    carried out, or the step crashed).
    """
    principal = principal or Principal.objects.service(OBSERVE_PRINCIPAL)
    probes = load_probes() if probes is None else list(probes)  # a bad setting fails before the run
    with holding.held_run(
        principal,
        kind="observe",
        stale_after_s=stale_after_s,
        progress="observe: probing",
        logger=logger,
        now=now,
    ) as started:
        report = observe_step(principal=principal, run=started, probes=probes, timeout_s=timeout_s, now=now)
    report.run_id = started.run.id
    if report.status == "stale":
        report.run_status = "stale"
        return report
    status = {"brain_not_configured": "skipped", "no_probes": "skipped", "error": "error"}.get(
        report.status, "ok"
    )
    observed = sum(p.outcome == "observed" for p in report.probes)
    summary = report.reason or f"{observed} of {len(report.probes)} probes observed"
    report.run_status = holding.finish(started, principal, status, summary, now)
    return report
