# ruff: noqa: E501  (figures read best on one line)
"""Check 12 — flood: a cap on ordinary notices per hour per kind (the excess coalesced into one
digest, never dropped; safety notices never count against it: check 13), and a per-token request rate
limit counted in the database, so it holds across workers."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from datetime import UTC, datetime, timedelta

import httpx2
import pytest
from django.core import mail
from django.db import connection, transaction
from django.utils import timezone

from operator_site import notifications, revert_links
from operator_site.models import AuditEvent, Notification, RateCounter
from tests.fixtures import SEED_HEADERS, asgi_http, orm, start_uvicorn, stop_uvicorn
from tests.security.helpers import run_threads, run_tool, tools_call

pytestmark = pytest.mark.django_db(transaction=True)


def _clear_of_the_hour_end(margin_s: float = 20) -> None:
    """Counts are per clock hour: never start a check that could straddle two hours."""
    now = time.time()
    left = 3600 - now % 3600
    if left < margin_s:
        time.sleep(left + 0.5)


def _hour_end(now: datetime | None = None) -> datetime:
    now = now or timezone.now()
    return datetime.fromtimestamp((notifications.hour_of(now) + 1) * 3600, tz=UTC)


def _accounted(kind: str) -> tuple[int, int, list[str]]:
    """(notices of this kind, how many reached the person alone or in a delivered digest, lost)"""
    lost = []
    reached = 0
    notices = list(Notification.objects.filter(kind=kind))
    for notice in notices:
        if notice.state == Notification.State.DELIVERED:
            reached += 1
        elif notice.state == Notification.State.COALESCED and notice.digest is not None:
            digest = notice.digest
            if digest.state == Notification.State.DELIVERED and f"#{notice.id} " in digest.body:
                reached += 1
            else:
                lost.append(f"#{notice.id} in digest #{digest.id} ({digest.state})")
        else:
            lost.append(f"#{notice.id} {notice.state}")
    return len(notices), reached, lost


def test_notices_over_the_hourly_cap_are_coalesced_into_one_digest(
    make_principal, settings, scorecard
) -> None:
    settings.OPERATOR_NOTIFY_CAP_PER_HOUR = 5
    _clear_of_the_hour_end()
    agent = make_principal("flooder").principal
    for i in range(12):
        answer = run_tool(
            agent,
            "operator_record_action_intent",
            {"action": {"type": "spend", "title": f"flood {i}", "amount_cents": 100 + i}},
        )
        assert answer["status"] == "pending_approval"
    alone = [m for m in mail.outbox if "flood" in m.subject]
    coalesced = Notification.objects.filter(kind="approval_request", state="coalesced")
    digests = set(coalesced.values_list("digest_id", flat=True))
    assert len(alone) == 5, [m.subject for m in mail.outbox]
    assert coalesced.count() == 7 and len(digests) == 1
    digest = Notification.objects.get(pk=digests.pop())
    assert digest.kind == notifications.DIGEST_KIND and digest.state == "pending" and not digest.safety
    # Nothing more goes out during the hour; the digest goes when the hour is over.
    assert notifications.deliver_due().delivered == []
    report = notifications.deliver_due(now=_hour_end() + timedelta(seconds=1))
    assert report.delivered == [digest.id]
    digest.refresh_from_db()
    total, reached, lost = _accounted("approval_request")
    scorecard(
        12,
        "notification cap: 12 approval requests, cap 5 → 5 + one digest of 7",
        cases=total,
        bypasses=len(lost) + (total - reached),
        lost=lost,
    )
    assert lost == [] and reached == total == 12
    assert digest.title.startswith("7 more approval_request notices")
    assert all(f"flood {i}" in digest.body for i in range(5, 12))
    assert mail.outbox[-1].subject.startswith("[operator] 7 more approval_request")


def test_free_goal_model_edits_are_ordinary_notices_capped_with_every_revert_link(
    make_principal, settings, scorecard
) -> None:
    """Low-stakes goal-model edits (projects) need no evidence, so they make ORDINARY notices: capped
    and digested like any other (never a safety notice's budget: see check 13), every coalesced
    notice's own revert link kept in the digest and usable."""
    settings.OPERATOR_NOTIFY_CAP_PER_HOUR = 3
    _clear_of_the_hour_end()
    owner = make_principal("person", kind="human").principal
    for i in range(5):
        change = {"entity": "project", "op": "add", "fields": {"title": f"project {i}"}}
        assert run_tool(owner, "operator_reconcile_goal_model", {"changes": [change]})["ok"]
    edits = Notification.objects.filter(kind="goal_model_change")
    assert not edits.filter(safety=True).exists()
    assert edits.filter(state="delivered").count() == 3
    coalesced = list(edits.filter(state="coalesced").order_by("id"))
    assert len(coalesced) == 2
    digest = coalesced[0].digest
    assert digest.safety is False
    report = notifications.deliver_due(now=_hour_end() + timedelta(seconds=1))
    digest.refresh_from_db()
    total, reached, lost = _accounted("goal_model_change")
    # The links are read back out of the digest the person got (a signed token carries its own
    # second, so a link minted again here could differ from the one delivered and prove nothing).
    prefix = revert_links.revert_url(coalesced[0]).rstrip("/").rsplit("/", 1)[0] + "/"
    delivered_links = re.findall(re.escape(prefix) + r"([^/\s]+)/?", digest.body)
    reached_by_link = []
    for token in delivered_links:
        try:
            reached_by_link.append(revert_links.notice_from_token(token).pk)
        except revert_links.RevertLinkError:
            reached_by_link.append(None)
    link_ok = all(n.pk in reached_by_link for n in coalesced)
    usable = None not in reached_by_link
    scorecard(
        12,
        "free goal-model edits: ordinary notices, capped, every revert link kept",
        cases=total,
        bypasses=len(lost) + int(not link_ok) + int(not usable),
        lost=lost,
    )
    assert report.delivered == [digest.id]
    assert lost == [] and reached == total == 5
    assert link_ok and usable


@pytest.mark.postgres
def test_the_cap_holds_across_concurrent_deliverers(settings, scorecard) -> None:
    settings.OPERATOR_DELIVERY = "off"
    settings.OPERATOR_NOTIFY_CAP_PER_HOUR = 10
    _clear_of_the_hour_end()
    for i in range(40):
        with transaction.atomic():
            notifications.notify(kind="probe", title=f"probe {i}")
    barrier = threading.Barrier(4)

    def deliverer(i: int) -> None:
        barrier.wait(30)
        notifications.deliver_due()

    assert run_threads(4, deliverer) == []
    probe = Notification.objects.filter(kind="probe")
    alone = probe.filter(state="delivered").count()
    digests = set(probe.filter(state="coalesced").values_list("digest_id", flat=True))
    notifications.deliver_due(now=_hour_end() + timedelta(seconds=1))
    total, reached, lost = _accounted("probe")
    scorecard(
        12,
        "cap holds across 4 concurrent deliverers (40 notices, cap 10)",
        cases=total,
        bypasses=abs(alone - 10) + len(lost) + abs(len(digests) - 1),
        delivered_alone=alone,
        digests=len(digests),
    )
    assert alone == 10 and len(digests) == 1
    assert lost == [] and reached == 40
    assert len(mail.outbox) == 11


# --- the rate limit -----------------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_the_rate_limit_refuses_with_429_and_writes_nothing(principals, settings, scorecard) -> None:
    settings.OPERATOR_RATE_LIMIT = 5
    settings.OPERATOR_RATE_WINDOW_S = 3600
    _clear_of_the_hour_end(5)
    owner, agent = principals["owner"], principals["full_agent"]
    statuses = []
    async with asgi_http(owner.token) as http:
        for _ in range(9):
            statuses.append(
                await http.post(
                    "/mcp",
                    content=tools_call("operator_set_directive", {"kind": "quiet"}),
                    headers=SEED_HEADERS,
                )
            )
    async with asgi_http(agent.token) as http:
        other = await http.post(
            "/mcp", content=tools_call("operator_list_directives", {}), headers=SEED_HEADERS
        )
    codes = [r.status_code for r in statuses]
    refused = statuses[5:]
    audit = await orm(lambda: AuditEvent.objects.filter(principal=owner.principal).count())
    well_formed = all(
        r.json()["error"] == "rate_limited"
        and 0 < int(r.headers["retry-after"]) <= 3600
        and r.json()["retry_after_s"] == int(r.headers["retry-after"])
        for r in refused
    )
    scorecard(
        12,
        "rate limit: 429 past the limit, nothing written, other tokens unaffected",
        cases=len(codes) + 1,
        bypasses=sum(c == 200 for c in codes[5:]) + int(audit != 5) + int(other.status_code != 200),
    )
    assert codes == [200] * 5 + [429] * 4
    assert well_formed
    assert audit == 5, "a refused request writes no audit row"
    assert other.status_code == 200


@pytest.mark.anyio
async def test_the_window_moves_on(principals, settings) -> None:
    settings.OPERATOR_RATE_LIMIT = 2
    settings.OPERATOR_RATE_WINDOW_S = 1
    async with asgi_http(principals["owner"].token) as http:

        async def post() -> int:
            body = tools_call("operator_list_directives", {})
            return (await http.post("/mcp", content=body, headers=SEED_HEADERS)).status_code

        for _ in range(3):
            await asyncio.sleep(1 - time.time() % 1 + 0.05)  # the start of a window
            window = int(time.time())
            first = [await post() for _ in range(3)]
            # The three must fall in one window to mean anything; a stalled machine can carry the
            # last into the next one (it would then be served): measure again in a fresh window.
            if int(time.time()) == window:
                break
        await asyncio.sleep(1.1)
        later = await post()
    assert first == [200, 200, 429]
    assert later == 200
    counter = await orm(lambda: RateCounter.objects.get(principal=principals["owner"].principal))
    assert counter.count == 1


@pytest.mark.socket
def test_the_rate_limit_holds_across_two_workers(make_principal, scorecard) -> None:
    """Two uvicorn processes on one database, 60 requests at once from one token, limit 20: exactly
    20 are served, whichever process each one reached."""
    holder = make_principal("burst")
    env = {"OPERATOR_RATE_LIMIT": "20", "OPERATOR_RATE_WINDOW_S": "3600"}
    servers = [start_uvicorn(extra_env=env), start_uvicorn(extra_env=env)]
    try:
        for _attempt in range(2):
            _clear_of_the_hour_end(30)
            RateCounter.objects.all().delete()
            window = int(time.time() // 3600)

            async def burst() -> list[int]:
                clients = [
                    httpx2.AsyncClient(
                        base_url=s.url, headers={"Authorization": f"Bearer {holder.token}"}, timeout=60
                    )
                    for s in servers
                ]
                try:
                    body = tools_call("operator_list_directives", {})
                    responses = await asyncio.gather(
                        *(clients[i % 2].post("/mcp", content=body, headers=SEED_HEADERS) for i in range(60))
                    )
                finally:
                    for c in clients:
                        await c.aclose()
                return [r.status_code for r in responses]

            codes = asyncio.run(burst())
            if int(time.time() // 3600) == window:
                break
    finally:
        for server in servers:
            stop_uvicorn(server)
        connection.close()
    served = codes.count(200)
    scorecard(
        12,
        "rate limit across two uvicorn workers (60 requests, limit 20)",
        cases=len(codes),
        bypasses=abs(served - 20),
        served=served,
        refused=codes.count(429),
    )
    assert served == 20 and codes.count(429) == 40, codes
