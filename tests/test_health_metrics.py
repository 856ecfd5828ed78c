"""Health and metrics: /api/health says what is degraded; /metrics (Prometheus) is served only to a
token or an allowlisted address, counts calls by tool and outcome with latency, and reads the
approvals, notices and run lock from the database — in-process and on live uvicorn servers."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

import httpx2
import pytest
from django.test import Client
from django.utils import timezone

from intents.lifecycle import ActionInput, record_intent
from operator_site.models import Notification
from runs.lock import start_run
from tests.fixtures import call, free_port, mcp_client, start_uvicorn, stop_uvicorn

pytestmark = pytest.mark.django_db


def _notice(*, safety: bool, minutes_ago: float = 0, state: str = "pending") -> Notification:
    at = timezone.now() - timedelta(minutes=minutes_ago)
    return Notification.objects.create(
        kind="test", title="t", safety=safety, state=state, created_at=at, next_attempt_at=at
    )


def health_now() -> tuple[int, dict]:
    response = Client().get("/api/health")
    return response.status_code, response.json()


# --- /api/health -------------------------------------------------------------------------------------------
def test_a_healthy_operator_says_ok() -> None:
    status, body = health_now()
    assert status == 200 and body["status"] == "ok" and body["ok"] is True and body["degraded"] == []
    assert set(body["checks"]) == {"deliverer", "safety_notices", "run"}


def test_a_safety_notice_undelivered_for_too_long_is_degraded(settings) -> None:
    settings.OPERATOR_HEALTH_UNDELIVERED_S = 300
    _notice(safety=True, minutes_ago=1)  # not late yet
    _notice(safety=False, minutes_ago=60)  # ordinary: not a safety problem
    status, body = health_now()
    assert body["degraded"] == [] and body["checks"]["safety_notices"]["undelivered"] == 1
    _notice(safety=True, minutes_ago=10)
    _notice(safety=True, minutes_ago=10, state="delivered")
    status, body = health_now()
    assert status == 200 and body["status"] == "degraded" and body["ok"] is False
    assert body["degraded"] == ["safety_notices"]
    assert body["checks"]["safety_notices"] == {
        "ok": False,
        "undelivered": 2,
        "late": 1,
        "late_after_s": 300,
    }


def test_a_deliverer_backlog_beyond_the_limit_is_degraded(settings) -> None:
    settings.OPERATOR_HEALTH_BACKLOG = 2
    for _ in range(2):
        _notice(safety=False, minutes_ago=3)
    assert health_now()[1]["degraded"] == []
    _notice(safety=False, minutes_ago=5)
    held = _notice(safety=False, minutes_ago=50, state="held")  # held by a directive: not due
    _status, body = health_now()
    assert body["degraded"] == ["deliverer"]
    deliverer = body["checks"]["deliverer"]
    assert deliverer["notices_due"] == 3 and 290 < deliverer["oldest_due_s"] < 400 and deliverer["limit"] == 2
    assert held.state == "held"


def test_a_stale_run_nobody_took_over_is_degraded(agent) -> None:
    started = start_run(
        principal=agent.principal, kind="inbox", stale_after_s=60, now=timezone.now() - timedelta(minutes=5)
    )
    _status, body = health_now()
    assert body["degraded"] == ["run"]
    running = body["checks"]["run"]["running"]
    assert running["id"] == started.run.id and running["stale"] is True and running["holder"] == "scout"
    assert running["heartbeat_age_s"] >= 290


def test_a_live_run_is_not_degraded(agent) -> None:
    start_run(principal=agent.principal, kind="inbox", stale_after_s=600)
    _status, body = health_now()
    assert body["degraded"] == [] and body["checks"]["run"]["running"]["stale"] is False


@pytest.mark.socket
@pytest.mark.django_db(transaction=True)
def test_an_unreachable_database_is_down_with_503() -> None:
    server = start_uvicorn(extra_env={"DATABASE_URL": f"postgres://postgres@127.0.0.1:{free_port()}/nowhere"})
    try:
        response = httpx2.get(f"{server.url}/api/health", timeout=30)
    finally:
        stop_uvicorn(server)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "down" and body["degraded"] == ["database"]
    assert body["database"].startswith("unreachable:")


# --- /metrics: who may read it ----------------------------------------------------------------------------
def test_metrics_are_off_until_a_token_or_an_address_is_configured(settings) -> None:
    settings.OPERATOR_METRICS_TOKEN = ""
    settings.OPERATOR_METRICS_ALLOW = []
    response = Client().get("/metrics")
    assert response.status_code == 403 and b"metrics are off" in response.content


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"HTTP_AUTHORIZATION": "Bearer wrong-token"},
        {"HTTP_AUTHORIZATION": "Basic bWV0cmljczpzM2NyZXQtbWV0cmljcy10b2tlbg=="},
        {"HTTP_AUTHORIZATION": "Bearer s3cret-metrics-token-but-longer"},
        {"HTTP_AUTHORIZATION": "Bearer s3cret-metrics-toke"},
        {"HTTP_X_FORWARDED_FOR": "127.0.0.1"},  # Django's REMOTE_ADDR, not a header, decides
        {"HTTP_X_REAL_IP": "10.1.2.3"},
    ],
)
def test_metrics_refuse_anyone_else(settings, headers) -> None:
    settings.OPERATOR_METRICS_TOKEN = "s3cret-metrics-token"
    settings.OPERATOR_METRICS_ALLOW = ["10.0.0.0/8"]
    response = Client().get("/metrics", REMOTE_ADDR="192.0.2.7", **headers)
    assert response.status_code == 403
    query = Client().get("/metrics?token=s3cret-metrics-token", REMOTE_ADDR="192.0.2.7")
    assert query.status_code == 403  # never from the query string


def test_metrics_answer_the_token_or_an_allowlisted_address(settings) -> None:
    settings.OPERATOR_METRICS_TOKEN = "s3cret-metrics-token"
    settings.OPERATOR_METRICS_ALLOW = ["10.0.0.0/8", "2001:db8::/32", "not-a-network"]
    ok = Client().get("/metrics", REMOTE_ADDR="192.0.2.7", HTTP_AUTHORIZATION="Bearer s3cret-metrics-token")
    assert ok.status_code == 200 and ok["Content-Type"].startswith("text/plain")
    assert Client().get("/metrics", REMOTE_ADDR="10.20.30.40").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="2001:db8::1").status_code == 200
    assert Client().post("/metrics", REMOTE_ADDR="10.20.30.40").status_code == 405


# --- /metrics: what it says --------------------------------------------------------------------------------
def scrape(settings) -> str:
    settings.OPERATOR_METRICS_ALLOW = ["127.0.0.1/32"]
    response = Client().get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    return response.content.decode()


def value(text: str, sample: str) -> float:
    match = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.MULTILINE)
    assert match, f"{sample} not in the scrape"
    return float(match.group(1))


def test_the_database_figures_are_read_at_scrape_time(settings, agent) -> None:
    record_intent(principal=agent.principal, action=ActionInput(type="spend", title="Plan", amount_cents=900))
    _notice(safety=True, minutes_ago=20)
    _notice(safety=False)
    start_run(
        principal=agent.principal, kind="inbox", stale_after_s=60, now=timezone.now() - timedelta(minutes=3)
    )
    text = scrape(settings)
    assert value(text, "operator_pending_approvals") == 1
    assert value(text, 'operator_undelivered_notices{safety="true"}') >= 1
    assert value(text, "operator_late_safety_notices") >= 1
    assert value(text, "operator_run_lock_held") == 1 and value(text, "operator_run_lock_stale") == 1
    assert value(text, "operator_run_heartbeat_age_seconds") >= 170
    assert value(text, "operator_database_up") == 1
    assert 'operator_info{version="0.1.0"} 1.0' in text


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_tool_calls_are_counted_by_tool_and_outcome_with_latency(settings, make_principal) -> None:
    from tests.fixtures import asgi_http, orm

    reader = await orm(lambda: make_principal("reader", tools=["operator_list_directives"]))
    before = await orm(lambda: scrape(settings))

    def count(text: str, tool: str, outcome: str) -> float:
        sample = f'operator_tool_calls_total{{outcome="{outcome}",tool="{tool}"}}'
        return value(text, sample) if sample in text else 0.0

    async with asgi_http(reader.token) as http:
        await call(http, "operator_list_directives", {})
        await call(http, "operator_list_directives", {})
        await call(http, "operator_state", {})  # outside its allowlist: refused
    async with asgi_http("opk_nobody-has-this-token-xyz") as http:
        await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    after = await orm(lambda: scrape(settings))
    assert (
        count(after, "operator_list_directives", "ok") - count(before, "operator_list_directives", "ok") == 2
    )
    assert count(after, "operator_state", "refused") - count(before, "operator_state", "refused") == 1
    hist = 'operator_tool_call_seconds_count{tool="operator_list_directives"}'
    assert value(after, hist) - (value(before, hist) if hist in before else 0) == 2
    assert 'operator_tool_call_seconds_bucket{le="0.005",tool="operator_list_directives"}' in after
    unauthorized = 'operator_mcp_rejected_total{reason="unauthorized"}'
    assert value(after, unauthorized) - (value(before, unauthorized) if unauthorized in before else 0) == 1


@pytest.mark.socket
@pytest.mark.django_db(transaction=True)
def test_a_multi_worker_server_adds_up_every_worker_s_counts(tmp_path, make_principal) -> None:
    """Two uvicorn workers with PROMETHEUS_MULTIPROC_DIR: calls land on either; one scrape has all."""
    reader = make_principal("reader", tools=["operator_list_directives"])
    multiproc = tmp_path / "prometheus"
    multiproc.mkdir()
    server = start_uvicorn(
        workers=2,
        extra_env={"PROMETHEUS_MULTIPROC_DIR": str(multiproc), "OPERATOR_METRICS_TOKEN": "scrape-me-please"},
    )

    async def calls(n: int) -> None:
        for _ in range(n):
            async with mcp_client(reader.token, base_url=server.url) as client:
                await client.call_tool("operator_list_directives", {})

    try:
        asyncio.run(calls(12))
        text = httpx2.get(
            f"{server.url}/metrics", headers={"Authorization": "Bearer scrape-me-please"}, timeout=30
        ).text
    finally:
        stop_uvicorn(server)
    assert value(text, 'operator_tool_calls_total{outcome="ok",tool="operator_list_directives"}') == 12
    assert len(list(multiproc.glob("*.db"))) >= 2  # more than one process counted
