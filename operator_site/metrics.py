"""Prometheus metrics (prometheus-client), served at GET /metrics to a bearer
OPERATOR_METRICS_TOKEN or an address in OPERATOR_METRICS_ALLOW — to nobody when neither is set.

Two kinds of figures:

- **counted in the process**, on the hot path: every `tools/call` by tool and outcome (ok, refused,
  error) with its latency, and every request /mcp turns away before dispatch (by reason). /mcp is
  served outside Django's request cycle (operator_site/face/), so the face counts them itself in
  `face/dispatch.py` and `face/endpoint.py`. Counting costs a dict lookup and two increments per
  call (about a microsecond; a call is about two milliseconds: see docs/performance.md). With
  several uvicorn workers, set PROMETHEUS_MULTIPROC_DIR so a scrape adds every worker's counts.
- **read from the database at scrape time** (`operator_site/health.py`, the same figures as
  /api/health), so they are right across workers and hosts: intents awaiting approval, undelivered
  notices (safety / ordinary), notices due, the run lock (held, heartbeat age, stale).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from operator_site import __version__

# Latency buckets for a tool call (seconds): most calls take a few milliseconds; a packet read on
# a large history, or a call queued behind a busy database, takes longer.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

CALLS = Counter(
    "operator_tool_calls", "MCP tools/call by tool and outcome (ok, refused, error).", ["tool", "outcome"]
)
LATENCY = Histogram(
    "operator_tool_call_seconds",
    "Time to answer a tools/call (dispatch to envelope).",
    ["tool"],
    buckets=BUCKETS,
)
REJECTED = Counter(
    "operator_mcp_rejected",
    "Requests /mcp answered before any tool ran, by reason (unauthorized, rate_limited, ...).",
    ["reason"],
)

_children: dict[tuple[str, str], tuple[Any, Any]] = {}


def observe_call(tool: str, outcome: str, started: float) -> None:
    """Count one tools/call (`started`: its time.perf_counter() at dispatch). Hot path: the labelled
    children are looked up once per (tool, outcome) and kept."""
    pair = _children.get((tool, outcome))
    if pair is None:
        pair = _children[(tool, outcome)] = (CALLS.labels(tool, outcome), LATENCY.labels(tool))
    pair[0].inc()
    pair[1].observe(time.perf_counter() - started)


def count_rejected(reason: str) -> None:
    REJECTED.labels(reason).inc()


class DatabaseCollector(Collector):
    """The figures read at scrape time (the same ones /api/health judges)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from operator_site.health import figures

        info = GaugeMetricFamily("operator_info", "The running operator.", labels=["version"])
        info.add_metric([__version__], 1)
        yield info
        try:
            state = figures()
        except Exception:  # the database is down: say so rather than fail the whole scrape
            up = GaugeMetricFamily("operator_database_up", "1 when the database answered this scrape.")
            up.add_metric([], 0)
            yield up
            return
        up = GaugeMetricFamily("operator_database_up", "1 when the database answered this scrape.")
        up.add_metric([], 1)
        yield up
        yield GaugeMetricFamily(
            "operator_pending_approvals",
            "Intents awaiting the person's approval.",
            value=state.pending_approvals,
        )
        undelivered = GaugeMetricFamily(
            "operator_undelivered_notices",
            "Notices not delivered yet (pending or sending).",
            labels=["safety"],
        )
        undelivered.add_metric(["true"], state.undelivered["safety"])
        undelivered.add_metric(["false"], state.undelivered["ordinary"])
        yield undelivered
        yield GaugeMetricFamily(
            "operator_late_safety_notices",
            "Safety notices still undelivered after OPERATOR_HEALTH_UNDELIVERED_S.",
            value=state.late_safety,
        )
        yield GaugeMetricFamily(
            "operator_notices_due", "Notices due for delivery now.", value=state.notices_due
        )
        run = state.run or {}
        yield GaugeMetricFamily(
            "operator_run_lock_held", "1 while a run holds the lock.", value=1 if run else 0
        )
        yield GaugeMetricFamily(
            "operator_run_lock_stale",
            "1 while the running run's heartbeat is older than its stale threshold.",
            value=1 if run.get("stale") else 0,
        )
        yield GaugeMetricFamily(
            "operator_run_heartbeat_age_seconds",
            "Seconds since the running run's last heartbeat (0 when no run holds the lock).",
            value=run.get("heartbeat_age_s", 0),
        )


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)  # every worker's counters, added up
    else:
        for collector in (CALLS, LATENCY, REJECTED):
            registry.register(collector)
    registry.register(DatabaseCollector())
    return registry


def _allowed_address(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    for entry in settings.OPERATOR_METRICS_ALLOW:
        try:
            if ip in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False


def _token_ok(request: HttpRequest) -> bool:
    expected = settings.OPERATOR_METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    scheme, _, presented = header.partition(" ")
    if not expected or scheme.lower() != "bearer" or not presented:
        return False
    return hmac.compare_digest(presented.strip().encode(), expected.encode())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics: the Prometheus text format, for a bearer token or an allowlisted address."""
    if request.method != "GET":
        return HttpResponse("GET only\n", status=405, headers={"Allow": "GET"}, content_type="text/plain")
    if not settings.OPERATOR_METRICS_TOKEN and not settings.OPERATOR_METRICS_ALLOW:
        return HttpResponse(
            "metrics are off: set OPERATOR_METRICS_TOKEN or OPERATOR_METRICS_ALLOW (docs/configuration.md)\n",
            status=403,
            content_type="text/plain",
        )
    if not (_token_ok(request) or _allowed_address(request.META.get("REMOTE_ADDR", ""))):
        return HttpResponse(
            "metrics: present the metrics bearer token, or call from an allowlisted address\n",
            status=403,
            content_type="text/plain",
        )
    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)
