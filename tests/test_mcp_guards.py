"""Every guard in front of /mcp, each tried and asserted with its status and JSON-RPC code.

Nothing that is refused here may leave a row behind: the counts of audit rows and directives are
checked after every refused request.
"""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from intents.models import Directive
from operator_site.face.auth import revoke
from operator_site.models import AuditEvent
from tests.fixtures import SEED_HEADERS, asgi_http, orm, parse_sse, rpc

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

SET_QUIET = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "operator_set_directive", "arguments": {"kind": "quiet"}},
}


async def _counts() -> tuple[int, int]:
    return await orm(lambda: (AuditEvent.objects.count(), Directive.objects.count()))


async def _post(
    headers: dict[str, str],
    body: bytes | str | None = None,
    path: str = "/mcp",
    base_url: str = "http://127.0.0.1",
):
    async with asgi_http(base_url=base_url) as http:
        return await http.post(
            path,
            content=body if body is not None else json.dumps(SET_QUIET),
            headers={**SEED_HEADERS, **headers},
        )


# --- authentication -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "case",
    [
        "no header",
        "wrong scheme",
        "empty bearer",
        "unknown token",
        "revoked token",
        "query-string token",
        "token prefix",
        "token with trailing junk",
        "two authorization headers",
        "admin session cookie",
    ],
)
async def test_requests_without_a_valid_bearer_get_401_and_write_nothing(owner, client, case: str) -> None:
    token = owner.token
    headers: dict[str, str] = {}
    path = "/mcp"
    if case == "wrong scheme":
        headers["Authorization"] = f"Basic {token}"
    elif case == "empty bearer":
        headers["Authorization"] = "Bearer "
    elif case == "unknown token":
        headers["Authorization"] = "Bearer opk_thisTokenWasNeverIssuedByAnyone000000000"
    elif case == "revoked token":
        await orm(revoke, owner.principal)
        headers["Authorization"] = f"Bearer {token}"
    elif case == "query-string token":
        path = f"/mcp?access_token={token}&token={token}"
    elif case == "token prefix":
        headers["Authorization"] = f"Bearer {token[:-4]}"
    elif case == "token with trailing junk":
        headers["Authorization"] = f"Bearer {token}junk"
    elif case == "admin session cookie":
        assert await orm(lambda: client.login(username="owner", password="pw-owner-123"))
        headers["Cookie"] = f"sessionid={client.cookies['sessionid'].value}"
    before = await _counts()
    if case == "two authorization headers":
        async with asgi_http() as http:
            response = await http.post(
                "/mcp",
                content=json.dumps(SET_QUIET),
                headers=[
                    *SEED_HEADERS.items(),
                    ("Authorization", f"Bearer {token}"),
                    ("Authorization", f"Bearer {token}"),
                ],
            )
    else:
        response = await _post(headers, path=path)
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert token not in response.text
    assert await _counts() == before


# --- method, host, origin ----------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
async def test_only_post_is_served(owner, method: str) -> None:
    async with asgi_http(owner.token) as http:
        response = await http.request(method, "/mcp", headers={"Accept": "text/event-stream"})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


async def test_foreign_origin_is_refused_with_403(owner) -> None:
    before = await _counts()
    for origin in ("http://evil.example", "null", "http://127.0.0.1.evil.example:8000", "file://"):
        response = await _post({"Authorization": f"Bearer {owner.token}", "Origin": origin})
        assert response.status_code == 403, origin
    assert await _counts() == before


async def test_same_host_origin_and_configured_origin_are_served(owner) -> None:
    response = await _post({"Authorization": f"Bearer {owner.token}", "Origin": "http://127.0.0.1:8000"})
    assert response.status_code == 200
    with override_settings(OPERATOR_ALLOWED_ORIGINS=["https://console.example"]):
        response = await _post(
            {"Authorization": f"Bearer {owner.token}", "Origin": "https://console.example"}
        )
    assert response.status_code == 200


async def test_unknown_host_is_refused(owner) -> None:
    before = await _counts()
    response = await _post({"Authorization": f"Bearer {owner.token}"}, base_url="http://rebound.example")
    assert response.status_code == 421
    assert await _counts() == before


# --- body --------------------------------------------------------------------------------------------------
@override_settings(OPERATOR_MAX_BODY_BYTES=4096)
async def test_body_over_the_limit_is_413_with_content_length_and_chunked(owner) -> None:
    big = json.dumps({**SET_QUIET, "params": {**SET_QUIET["params"], "pad": "x" * 5000}})
    before = await _counts()
    response = await _post({"Authorization": f"Bearer {owner.token}"}, big)
    assert response.status_code == 413

    async def chunks():
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000].encode()

    async with asgi_http(owner.token) as http:
        response = await http.post("/mcp", content=chunks(), headers=SEED_HEADERS)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == -32600
    assert await _counts() == before


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', 400, -32600),  # a batch
        (b"[]", 400, -32600),
        (b'"tools/list"', 400, -32600),  # JSON, but not a message object
        (b"42", 400, -32600),
        (b"{not json", 400, -32700),
        (b"", 400, -32700),
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list"', 400, -32700),
    ],
)
async def test_malformed_bodies_get_jsonrpc_errors(owner, body: bytes, status: int, code: int) -> None:
    response = await _post({"Authorization": f"Bearer {owner.token}"}, body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


async def test_unknown_tool_is_a_jsonrpc_error_not_a_result(owner) -> None:
    async with asgi_http(owner.token) as http:
        response = await rpc(http, "tools/call", {"name": "operator_approve_everything", "arguments": {}})
    message = parse_sse(response.text)
    assert "result" not in message
    assert message["error"]["code"] == -32602
    assert "operator_approve_everything" in message["error"]["message"]
    audit = await orm(lambda: AuditEvent.objects.get())
    assert (audit.tool, audit.outcome, audit.error_code) == (
        "operator_approve_everything",
        "refused",
        "unknown_tool",
    )


async def test_invalid_arguments_are_an_iserror_result_naming_the_field(owner) -> None:
    async with asgi_http(owner.token) as http:
        response = await rpc(
            http,
            "tools/call",
            {"name": "operator_set_directive", "arguments": {"kind": "quiet", "minutes": 5000}},
        )
    result = parse_sse(response.text)["result"]
    assert result["isError"] is True
    assert len(result["content"]) == 1
    body = json.loads(result["content"][0]["text"])
    assert body["ok"] is False
    assert body["error"] == "invalid_arguments"
    assert [f["field"] for f in body["fields"]] == ["minutes"]
    assert "minutes" in body["reason"]
    assert await orm(Directive.objects.count) == 0


async def test_no_session_id_is_issued_or_needed(owner) -> None:
    async with asgi_http(owner.token) as http:
        response = await rpc(http, "tools/list")
        assert response.status_code == 200
        assert "mcp-session-id" not in response.headers
        # A session id the server never issued changes nothing: every request stands alone.
        again = await rpc(http, "tools/list", headers={"Mcp-Session-Id": "forged-session"})
    assert again.status_code == 200
    assert "mcp-session-id" not in again.headers
    assert parse_sse(again.text)["result"]["tools"]


async def test_notification_gets_202(owner) -> None:
    body = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    response = await _post({"Authorization": f"Bearer {owner.token}"}, body)
    assert response.status_code == 202


async def test_wrong_content_type_and_accept_are_refused(owner) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    async with asgi_http(owner.token) as http:
        wrong_type = await http.post(
            "/mcp", content=body, headers={**SEED_HEADERS, "Content-Type": "text/plain"}
        )
        wrong_accept = await http.post("/mcp", content=body, headers={**SEED_HEADERS, "Accept": "text/html"})
    assert wrong_type.status_code == 400
    assert wrong_accept.status_code == 406
    assert wrong_accept.json()["error"]["code"] == -32600
