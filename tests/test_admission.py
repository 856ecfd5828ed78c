"""Admission (face/admission.py): a tools/call is admitted in its own unit of database work, every
other request at the endpoint — with the same answers, in the same precedence, and a refused token
touches nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from operator_site.face import db as face_db
from operator_site.models import AuditEvent
from runs.models import ProgressEntry
from tests.fixtures import SEED_HEADERS, asgi_http, orm, parse_sse

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

LIST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'


def tools_call(name: str, arguments: dict[str, Any]) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return json.dumps(message).encode()


PROGRESS = tools_call("operator_record_progress", {"summary": "admitted?", "outcome": "done"})


@pytest.fixture
def units(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The units of database work the face runs (face/db.py), by the function each runs."""
    seen: list[str] = []
    real = face_db._unit_of_work

    def counted(fn: Any, args: tuple[Any, ...]) -> Any:
        seen.append(getattr(fn, "__name__", repr(fn)))
        return real(fn, args)

    monkeypatch.setattr(face_db, "_unit_of_work", counted)
    return seen


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # The token, the allowlist, the tool and its audit row: one unit.
        (tools_call("operator_list_directives", {}), ["_serve_call"]),
        (PROGRESS, ["_serve_call"]),
        # A refusal at the door of the tool (bad arguments) is audited in that same unit.
        (tools_call("operator_record_progress", {"summary": 7}), ["_serve_call"]),
        # Everything else is admitted at the endpoint first.
        (LIST, ["admit"]),
        (tools_call("operator_no_such_tool", {}), ["admit", "_refuse_before_dispatch"]),
    ],
    ids=["read", "write", "invalid-arguments", "tools/list", "unknown-tool"],
)
async def test_a_tools_call_is_one_unit_of_database_work(
    agent, units, body: bytes, expected: list[str]
) -> None:
    async with asgi_http(agent.token) as http:
        response = await http.post("/mcp", content=body, headers=SEED_HEADERS)
    assert response.status_code == 200, response.text
    assert units == expected


async def _written() -> tuple[int, int]:
    return await orm(lambda: (ProgressEntry.objects.count(), AuditEvent.objects.count()))


@pytest.mark.parametrize(
    "token",
    ["opk_" + "x" * 43, "not a token at all"],
    ids=["unknown-token", "malformed-token"],
)
async def test_a_refused_token_on_a_write_touches_nothing(agent, token: str) -> None:
    before = await _written()
    async with asgi_http(token) as http:
        response = await http.post("/mcp", content=PROGRESS, headers=SEED_HEADERS)
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"] == "unauthorized"
    assert await _written() == before


async def test_a_revoked_token_on_a_write_touches_nothing(agent) -> None:
    from operator_site.face.auth import revoke

    await orm(lambda: revoke(agent.principal))
    before = await _written()
    async with asgi_http(agent.token) as http:
        response = await http.post("/mcp", content=PROGRESS, headers=SEED_HEADERS)
    assert response.status_code == 401
    assert await _written() == before


async def test_over_the_rate_limit_a_write_is_429_and_writes_nothing(agent, settings) -> None:
    settings.OPERATOR_RATE_LIMIT = 2
    settings.OPERATOR_RATE_WINDOW_S = 3600
    async with asgi_http(agent.token) as http:
        for _ in range(2):
            assert (await http.post("/mcp", content=PROGRESS, headers=SEED_HEADERS)).status_code == 200
        before = await _written()
        for body in (PROGRESS, LIST, tools_call("operator_no_such_tool", {})):
            response = await http.post("/mcp", content=body, headers=SEED_HEADERS)
            assert response.status_code == 429, response.text
            assert int(response.headers["retry-after"]) >= 1
            assert response.json()["error"] == "rate_limited"
    assert await _written() == before


async def test_an_agent_outside_its_allowlist_is_refused_in_the_same_unit(make_principal, units) -> None:
    narrow = await orm(lambda: make_principal("narrow", tools=["operator_list_directives"]))
    before = await _written()
    async with asgi_http(narrow.token) as http:
        response = await http.post("/mcp", content=PROGRESS, headers=SEED_HEADERS)
    assert response.status_code == 200
    result = parse_sse(response.text)["result"]
    assert result["isError"] is True and '"tool_not_allowed"' in result["content"][0]["text"]
    progress, audit = await _written()
    assert progress == before[0] and audit == before[1] + 1  # the refusal's own audit row
    assert units == ["_serve_call"]


# A bad token is answered 401 before anything a request could otherwise be refused for; a good
# token gets that other refusal.
PRECEDENCE = [
    ("wrong Host", {"Host": "evil.example"}, PROGRESS, 421),
    ("foreign Origin", {"Origin": "http://evil.example"}, PROGRESS, 403),
    (
        "body too large",
        {},
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","x":"' + b"a" * 2_000_000 + b'"}',
        413,
    ),
    ("not JSON", {}, b'{"jsonrpc":"2.0","id":1,', 400),
    ("wrong Content-Type", {"Content-Type": "text/plain"}, PROGRESS, 400),
    ("a batch", {}, b"[" + PROGRESS + b"]", 400),
]


@pytest.mark.parametrize(("label", "headers", "body", "status"), PRECEDENCE, ids=[p[0] for p in PRECEDENCE])
async def test_a_bad_token_is_answered_first(
    agent, label: str, headers: dict[str, str], body: bytes, status: int
) -> None:
    before = await _written()
    async with asgi_http("opk_" + "y" * 43) as http:
        response = await http.post("/mcp", content=body, headers={**SEED_HEADERS, **headers})
    assert response.status_code == 401, (label, response.status_code, response.text[:200])
    async with asgi_http(agent.token) as http:
        response = await http.post("/mcp", content=body, headers={**SEED_HEADERS, **headers})
    assert response.status_code == status, (label, response.status_code, response.text[:200])
    assert (await _written())[0] == before[0]
