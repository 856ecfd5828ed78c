"""What is degraded, read from the database: the one set of figures `/api/health` reports and
`/metrics` exports (operator_site/metrics.py), so the two never disagree.

- the database: reachable, migrations applied (else the service is *down*: 503);
- the deliverer: how many notices are due and not delivered (degraded beyond
  OPERATOR_HEALTH_BACKLOG), the oldest due one's age;
- safety notices: how many are still undelivered after OPERATOR_HEALTH_UNDELIVERED_S;
- the run lock: the running run, and whether its heartbeat is older than its stale threshold
  (a dead holder that nobody has taken over yet).

Plain reads, no lock, nothing written; every figure is one indexed query.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from intents.models import Intent, IntentStatus
from operator_site import __version__
from operator_site.models import Notification
from operator_site.sql import ping
from runs.models import Run

UNDELIVERED_STATES = ("pending", "sending")


@dataclass
class Figures:
    """The state the health report and the metrics are computed from."""

    notices_due: int = 0
    oldest_due_s: float | None = None
    undelivered: dict[str, int] = field(default_factory=lambda: {"safety": 0, "ordinary": 0})
    late_safety: int = 0
    pending_approvals: int = 0
    run: dict[str, Any] | None = None  # the running run: id, kind, holder, heartbeat age, stale


def migrations_pending() -> int:
    connection = connections[DEFAULT_DB_ALIAS]
    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def figures(now: datetime | None = None) -> Figures:
    now = now or timezone.now()
    out = Figures()
    due = Notification.objects.filter(state__in=UNDELIVERED_STATES, next_attempt_at__lte=now)
    out.notices_due = due.count()
    oldest = due.aggregate(oldest=Min("created_at"))["oldest"]
    out.oldest_due_s = (now - oldest).total_seconds() if oldest else None
    undelivered = Notification.objects.filter(state__in=UNDELIVERED_STATES)
    out.undelivered = {
        "safety": undelivered.filter(safety=True).count(),
        "ordinary": undelivered.filter(safety=False).count(),
    }
    cutoff = now - timedelta(seconds=settings.OPERATOR_HEALTH_UNDELIVERED_S)
    out.late_safety = undelivered.filter(safety=True, created_at__lt=cutoff).count()
    out.pending_approvals = Intent.objects.filter(status=IntentStatus.PENDING_APPROVAL).count()
    running = Run.objects.filter(status=Run.Status.RUNNING).select_related("holder").order_by("pk").first()
    if running is not None:
        age = (now - running.last_heartbeat_at).total_seconds()
        out.run = {
            "id": running.id,
            "kind": running.kind,
            "holder": running.holder.name,
            "heartbeat_age_s": round(age, 1),
            "stale_after_s": running.stale_after_s,
            "stale": age > running.stale_after_s,
        }
    return out


def report(now: datetime | None = None) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of /api/health: 503 when the database is down or not migrated, else 200
    — with `status: "degraded"` and the names of what is degraded when something is."""
    body: dict[str, Any] = {"version": __version__}
    try:
        ping()
        pending = migrations_pending()
        body["database"] = "ok"
        body["migrations"] = "applied" if pending == 0 else f"{pending} pending"
        state = figures(now) if pending == 0 else None
    except Exception as exc:  # any failure to reach the database is "down", never a 500
        body["database"] = f"unreachable: {type(exc).__name__}"
        body["migrations"] = "unknown"
        state = None
    degraded: list[str] = []
    checks: dict[str, Any] = {}
    if body["database"] != "ok":
        degraded.append("database")
    if body["migrations"] not in ("applied", "unknown"):
        degraded.append("migrations")
    if state is not None:
        backlog_limit = settings.OPERATOR_HEALTH_BACKLOG
        checks["deliverer"] = {
            "ok": state.notices_due <= backlog_limit,
            "notices_due": state.notices_due,
            "oldest_due_s": round(state.oldest_due_s, 1) if state.oldest_due_s is not None else None,
            "limit": backlog_limit,
        }
        checks["safety_notices"] = {
            "ok": state.late_safety == 0,
            "undelivered": state.undelivered["safety"],
            "late": state.late_safety,
            "late_after_s": settings.OPERATOR_HEALTH_UNDELIVERED_S,
        }
        checks["run"] = {"ok": not (state.run and state.run["stale"]), "running": state.run}
        degraded += [name for name, check in checks.items() if not check["ok"]]
    down = body["database"] != "ok" or body["migrations"] != "applied"
    body.update(
        ok=not degraded,
        status="down" if down else ("degraded" if degraded else "ok"),
        degraded=degraded,
        checks=checks,
    )
    return (503 if down else 200), body


class DatabaseCollector(Collector):
    """The figures read at scrape time (the same ones /api/health judges)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
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
