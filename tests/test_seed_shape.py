"""The request shape the runners send (docs/client.md), reproduced byte for byte with a raw HTTP
client: the same headers, a bearer token, no protocol-version header, no prior initialize —
answered as one SSE `event: message` carrying one text block of indented JSON (the tool result
nested one level inside the MCP envelope)."""

from __future__ import annotations

import json

import pytest

from tests.fixtures import SEED_HEADERS, asgi_http

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def test_the_seed_request_shape_works_verbatim(owner) -> None:
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{\n'
        '      "name":"operator_set_directive",\n'
        '      "arguments":{"kind":"quiet","minutes":45,"reason":"school run"}}}'
    )
    async with asgi_http() as http:
        response = await http.post(
            "/mcp", content=body, headers={**SEED_HEADERS, "Authorization": f"Bearer {owner.token}"}
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "mcp-session-id" not in response.headers
    assert response.text.startswith("event: message\r\ndata: ") or response.text.startswith(
        "event: message\ndata: "
    )
    data_lines = [line for line in response.text.splitlines() if line.startswith("data: ")]
    assert len(data_lines) == 1
    message = json.loads(data_lines[0][len("data: ") :])
    assert message["jsonrpc"] == "2.0" and message["id"] == 1
    content = message["result"]["content"]
    assert len(content) == 1 and content[0]["type"] == "text"
    text = content[0]["text"]
    decoded = json.loads(text)
    assert text == json.dumps(decoded, indent=2, ensure_ascii=False)
    assert decoded["ok"] is True
    assert decoded["directive"]["kind"] == "quiet"
    assert decoded["directive"]["reason"] == "school run"
    assert decoded["directive"]["minutes_left"] == 45
