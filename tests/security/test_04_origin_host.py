"""Check 4 — Origin and Host: a browser page from a foreign origin is refused (403, DNS
rebinding), an unknown Host is refused (421), and no `Mcp-Session-Id` is ever issued or honoured:
every request stands alone."""

from __future__ import annotations

import json

import pytest

from intents.models import Directive
from operator_site.models import AuditEvent
from tests.fixtures import SEED_HEADERS, asgi_http, orm
from tests.security.helpers import message_of, post, tools_call

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

WRITE = tools_call("operator_set_directive", {"kind": "quiet"})
FOREIGN_ORIGINS = [
    "http://evil.example",
    "https://evil.example",
    "null",
    "file://",
    "http://127.0.0.1.evil.example",
    "http://127.0.0.1.evil.example:8000",
    "http://localhost.evil.example",
    "http://evil.example#@127.0.0.1",
    "http://user@evil.example",
    "http://[::2]",
    "http://10.0.0.1",
    "chrome-extension://abcdefghijklmnop",
    "javascript:alert(1)",
    "http://%31%32%37.0.0.1",
    "",
    # Same host, another origin: a page of another program on another port, or the other scheme.
    # The check compares scheme, host AND port (the request's own origin, the public URL's, the
    # configured ones), not the host alone.
    "http://127.0.0.1:9999",
    "http://127.0.0.1:8001",
    "https://127.0.0.1:8000",
    "https://127.0.0.1",
    "http://localhost:8000",
    "http://127.0.0.1:8000/",
    "http://127.0.0.1:0",
]
BAD_HOSTS = [
    "rebound.example",
    "evil.example:80",
    "127.0.0.1.evil.example",
    "localhost.evil.example",
    "127.0.0.2",
    "0.0.0.0",  # noqa: S104 - a Host header value, not a bind address
    "[::2]",
    "",
    "127.0.0.1 evil.example",
    "127.0.0.1/evil",
]


async def _counts() -> tuple[int, int]:
    return await orm(lambda: (AuditEvent.objects.count(), Directive.objects.count()))


async def test_foreign_origins_are_refused_with_403(principals, scorecard) -> None:
    owner = principals["owner"]
    before = await _counts()
    passed: list[str] = []
    async with asgi_http(owner.token) as http:
        for origin in FOREIGN_ORIGINS:
            response = await post(http, WRITE, {"Origin": origin})
            if response.status_code != 403:
                passed.append(f"{origin!r}: {response.status_code}")
        two = await post(
            http, WRITE, [*SEED_HEADERS.items(), ("Origin", "http://127.0.0.1"), ("Origin", "http://x")]
        )
        if two.status_code != 403:
            passed.append(f"two Origin headers: {two.status_code}")
        # The allowed ones are served (so the refusals above are about the origin, not the request).
        same = await post(http, WRITE, {"Origin": "http://127.0.0.1:8000"})  # OPERATOR_PUBLIC_URL's
        own = await post(http, WRITE, {"Origin": "http://127.0.0.1:80"})  # this request's own origin
        none = await post(http, WRITE)
    after = await _counts()
    wrote = after[0] - before[0] != 3 or after[1] - before[1] != 3
    scorecard(
        4,
        "foreign Origin → 403, nothing written",
        cases=len(FOREIGN_ORIGINS) + 1,
        bypasses=len(passed) + wrote,
    )
    assert passed == []
    assert same.status_code == 200 and own.status_code == 200 and none.status_code == 200
    assert not wrote


async def test_unknown_hosts_are_refused(principals, scorecard) -> None:
    owner = principals["owner"]
    before = await _counts()
    passed: list[str] = []
    async with asgi_http(owner.token) as http:
        for host in BAD_HOSTS:
            response = await post(http, WRITE, {"Host": host})
            if not 400 <= response.status_code < 500:
                passed.append(f"{host!r}: {response.status_code}")
        two = await post(
            http, WRITE, [*SEED_HEADERS.items(), ("Host", "127.0.0.1"), ("Host", "evil.example")]
        )
        if not 400 <= two.status_code < 500:
            passed.append(f"two Host headers: {two.status_code}")
    scorecard(4, "unknown Host → 4xx (421), nothing written", cases=len(BAD_HOSTS) + 1, bypasses=len(passed))
    assert passed == []
    assert await _counts() == before


async def test_no_session_id_is_ever_issued_or_honoured(principals, scorecard) -> None:
    """Every kind of exchange in both protocol eras: no `Mcp-Session-Id` header comes back; a
    session id the server never issued is ignored (the request is served on its own), including
    one that names another principal's "session"."""
    owner, agent = principals["owner"], principals["full_agent"]
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }
    modern_meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    bodies = [
        ("initialize", json.dumps(initialize), {}),
        ("tools/list", json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}), {}),
        ("tools/call", WRITE.decode(), {}),
        ("notification", json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), {}),
        ("bad request", "[]", {}),
        (
            "2026 era tools/list",
            json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": modern_meta}}),
            {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
        ),
    ]
    issued: list[str] = []
    cases = 0
    async with asgi_http(owner.token) as http:
        for name, body, headers in bodies:
            for session in (None, "forged-session", "0" * 32):
                cases += 1
                extra = dict(headers)
                if session:
                    extra["Mcp-Session-Id"] = session
                response = await post(http, body, extra)
                if "mcp-session-id" in response.headers:
                    issued.append(f"{name}: issued {response.headers['mcp-session-id']}")
                if session and response.status_code in (404, 409):
                    issued.append(f"{name}: the forged session id {session!r} was looked up")
        for method in ("GET", "DELETE"):
            cases += 1
            response = await http.request(method, "/mcp", headers={"Mcp-Session-Id": "forged-session"})
            if response.status_code != 405 or "mcp-session-id" in response.headers:
                issued.append(f"{method} with a session id: {response.status_code}")
    # A session id gives no one else's identity: the agent "continuing" the owner's exchange is
    # still the agent.
    async with asgi_http(agent.token) as http:
        cases += 1
        response = await post(
            http, tools_call("operator_set_directive", {"kind": "quiet"}), {"Mcp-Session-Id": "x"}
        )
        body = json.loads(message_of(response)["result"]["content"][0]["text"])
        if body["directive"]["set_by"] != agent.name:
            issued.append("a session id changed who was acting")
    scorecard(4, "no Mcp-Session-Id issued or honoured", cases=cases, bypasses=len(issued), detail=issued)
    assert issued == []
