"""The single exchange (face/exchange.py) answers exactly as the SDK's stateless transport would.

Every request of the corpus is sent twice, once with the face's single exchange and once with every
request going through the SDK's `StreamableHTTPSessionManager`, and the two answers must agree byte
for byte: status, headers, body (clock readings and new rows' ids inside a tool's answer are the
only things masked).
A second test proves which path each request took, so the comparison cannot pass by both sides
quietly going through the same code.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from operator_site.face import endpoint, exchange
from tests.fixtures import SEED_HEADERS, Holder, asgi_http

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

_LEGACY = "2025-11-25"

# (label, JSON-RPC message, extra headers, whether the single exchange answers it)
CORPUS: list[tuple[str, dict[str, Any], dict[str, str], bool]] = [
    ("tools/list", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {}, True),
    (
        "tools/list, string id",
        {"jsonrpc": "2.0", "id": "abc", "method": "tools/list", "params": {}},
        {},
        True,
    ),
    ("ping", {"jsonrpc": "2.0", "id": 2, "method": "ping"}, {}, True),
    (
        "a read",
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "operator_list_directives"}},
        {},
        True,
    ),
    (
        "a write",
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "operator_record_instruction", "arguments": {"text": "Keep it short."}},
        },
        {},
        True,
    ),
    (
        "a refusal (invalid arguments)",
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "operator_list_directives", "arguments": {"bogus": 1}},
        },
        {},
        True,
    ),
    (
        "a tool outside the allowlist",
        {
            "jsonrpc": "2.0",
            "id": 6,
            "method": "tools/call",
            "params": {
                "name": "operator_update_decision",
                "arguments": {"intent_id": 1, "decision": "accept"},
            },
        },
        {},
        True,
    ),
    (
        "an unknown tool (-32602)",
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "no_such_tool"}},
        {},
        True,
    ),
    (
        "a tool name that is not a string",
        {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": 5}},
        {},
        True,
    ),
    ("an unknown method", {"jsonrpc": "2.0", "id": 9, "method": "resources/list"}, {}, True),
    (
        "a lone surrogate in a string",
        {"jsonrpc": "2.0", "id": 19, "method": "tools/call", "params": {"name": "\ud800"}},
        {},
        False,
    ),
    (
        "with a progress token",
        {
            "jsonrpc": "2.0",
            "id": 10,
            "method": "tools/call",
            "params": {"name": "operator_list_directives", "_meta": {"progressToken": "p1"}},
        },
        {},
        True,
    ),
    (
        "legacy version header",
        {"jsonrpc": "2.0", "id": 11, "method": "tools/list"},
        {"MCP-Protocol-Version": _LEGACY},
        True,
    ),
    ("Accept */*", {"jsonrpc": "2.0", "id": 12, "method": "ping"}, {"Accept": "*/*"}, True),
    # Left to the SDK's manager:
    (
        "initialize",
        {
            "jsonrpc": "2.0",
            "id": 13,
            "method": "initialize",
            "params": {
                "protocolVersion": _LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {},
        False,
    ),
    ("a notification", {"jsonrpc": "2.0", "method": "notifications/initialized"}, {}, False),
    ("a response", {"jsonrpc": "2.0", "id": 14, "result": {}}, {}, False),
    (
        "Accept without SSE",
        {"jsonrpc": "2.0", "id": 15, "method": "ping"},
        {"Accept": "application/json"},
        False,
    ),
    (
        "Accept without JSON",
        {"jsonrpc": "2.0", "id": 16, "method": "ping"},
        {"Accept": "text/event-stream"},
        False,
    ),
    (
        "unknown protocol version",
        {"jsonrpc": "2.0", "id": 17, "method": "ping"},
        {"MCP-Protocol-Version": "1999-01-01"},
        False,
    ),
    (
        "the 2026 era",
        {"jsonrpc": "2.0", "id": 18, "method": "ping"},
        {"MCP-Protocol-Version": "2026-07-28"},
        False,
    ),
]

# What legitimately differs between two runs of the same call: clock readings and new rows' ids.
_CLOCK = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
_ROW_ID = re.compile(r'(\\"id\\": )\d+')


async def _answer(token: str, message: dict[str, Any], headers: dict[str, str]) -> tuple[int, list, str]:
    async with asgi_http(token) as http:
        response = await http.post("/mcp", content=json.dumps(message), headers={**SEED_HEADERS, **headers})
    header_list = [(k.lower(), v) for k, v in response.headers.items() if k.lower() != "content-length"]
    return response.status_code, header_list, _ROW_ID.sub(r"\1N", _CLOCK.sub("T", response.text))


@pytest.mark.parametrize(("label", "message", "headers", "fast"), CORPUS, ids=[c[0] for c in CORPUS])
async def test_single_exchange_answers_as_the_sdk_transport(
    label: str, message: dict[str, Any], headers: dict[str, str], fast: bool, agent: Holder, monkeypatch: Any
) -> None:
    ours = await _answer(agent.token, message, headers)
    monkeypatch.setattr(endpoint, "SINGLE_EXCHANGE", False)
    sdk = await _answer(agent.token, message, headers)
    assert ours == sdk, label


@pytest.mark.parametrize(("label", "message", "headers", "fast"), CORPUS, ids=[c[0] for c in CORPUS])
async def test_each_request_takes_the_path_it_should(
    label: str, message: dict[str, Any], headers: dict[str, str], fast: bool, agent: Holder, monkeypatch: Any
) -> None:
    taken: list[str] = []
    real_answer, real_handle = exchange.answer, StreamableHTTPSessionManager.handle_request

    async def spy_answer(*args: Any) -> None:
        taken.append("exchange")
        await real_answer(*args)

    async def spy_handle(self: Any, *args: Any) -> None:
        taken.append("manager")
        await real_handle(self, *args)

    monkeypatch.setattr(exchange, "answer", spy_answer)
    monkeypatch.setattr(StreamableHTTPSessionManager, "handle_request", spy_handle)
    status, _, _ = await _answer(agent.token, message, headers)
    assert status < 500
    assert taken == ["exchange" if fast else "manager"], label


async def test_the_sdk_client_works_through_the_single_exchange(agent: Holder, monkeypatch: Any) -> None:
    """The official client in legacy mode: initialize through the manager, every call after it
    through the single exchange, and the answers are what the client expects."""
    from tests.fixtures import mcp_client, tool_json

    taken: list[str] = []
    real_answer = exchange.answer

    async def spy_answer(*args: Any) -> None:
        taken.append("exchange")
        await real_answer(*args)

    monkeypatch.setattr(exchange, "answer", spy_answer)
    async with mcp_client(agent.token, mode="legacy") as client:
        tools = await client.list_tools()
        result = await client.call_tool("operator_list_directives", {})
    assert "operator_list_directives" in {t.name for t in tools.tools}
    assert tool_json(result)["ok"] is True
    assert len(taken) >= 2
