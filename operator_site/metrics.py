"""Prometheus metrics (prometheus-client), served at GET /metrics to a bearer
OPERATOR_METRICS_TOKEN or an address in OPERATOR_METRICS_ALLOW — to nobody when neither is set.

Two kinds of figures:

- **counted in the process**, on the hot path: every `tools/call` by tool and outcome (ok, refused,
  error) with its latency, and every request /mcp turns away before dispatch (by reason). /mcp is
  served outside Django's request cycle (operator_site/face/), so the face counts them itself in
  `face/dispatch.py` and `face/endpoint.py`. Counting costs a dict lookup and two increments per
  call (about a microsecond; a call is about two milliseconds: see docs/performance.md). With
  several uvicorn workers, set PROMETHEUS_MULTIPROC_DIR so a scrape adds every worker's counts.
- **read from the database at scrape time** (`operator_site/cross_domain/health.py`, the same figures as
  /api/health), so they are right across workers and hosts: intents awaiting approval, undelivered
  notices (safety / ordinary), notices due, the run lock (held, heartbeat age, stale).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import time
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.registry import Collector

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


_scrape_collectors: list[Collector] = []


def register_scrape_collector(collector: Collector) -> None:
    """Add figures read at scrape time (the cross-domain layer registers the database's figures;
    the kernel does not know the domains)."""
    if not any(type(c) is type(collector) for c in _scrape_collectors):
        _scrape_collectors.append(collector)


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)  # every worker's counters, added up
    else:
        for collector in (CALLS, LATENCY, REJECTED):
            registry.register(collector)
    for collector in _scrape_collectors:
        registry.register(collector)
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
