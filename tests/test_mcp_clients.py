"""The official Python SDK client drives /mcp end to end, in both protocol eras, in-process over an
ASGI transport and over a real uvicorn socket."""

from __future__ import annotations

import pytest

from intents.models import Directive
from operator_site.models import AuditEvent
from tests.fixtures import mcp_client, orm, tool_json

DIRECTIVE_TOOLS = {"operator_set_directive", "operator_clear_directive", "operator_list_directives"}
ERAS = {"legacy": "2025-11-25", "auto": "2026-07-28"}

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def _exercise_directive_tools(client) -> None:
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) >= DIRECTIVE_TOOLS
    assert listed["operator_list_directives"].annotations.read_only_hint is True
    # A write leaves readOnlyHint out: MCP's default for it is false.
    assert listed["operator_set_directive"].annotations.read_only_hint in (None, False)
    assert all(t.annotations.destructive_hint is False for t in listed.values())
    assert listed["operator_set_directive"].input_schema["properties"]["minutes"]["maximum"] == 1440

    made = tool_json(
        await client.call_tool("operator_set_directive", {"kind": "focus", "topic": "Tax return"})
    )
    assert made["ok"] is True
    assert made["directive"]["topic"] == "tax return"
    assert made["directive"]["minutes_left"] == 60

    listing = tool_json(await client.call_tool("operator_list_directives", {}))
    assert [d["id"] for d in listing["directives"]] == [made["directive"]["id"]]

    cleared = tool_json(await client.call_tool("operator_clear_directive", {"id": made["directive"]["id"]}))
    assert cleared["count"] == 1
    assert tool_json(await client.call_tool("operator_list_directives", {}))["directives"] == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_client_in_process_both_eras(owner, mode: str) -> None:
    async with mcp_client(owner.token, mode=mode) as client:
        assert client.protocol_version == ERAS[mode]
        await _exercise_directive_tools(client)
    # set, list, clear, list: four audited calls, all ok
    assert await orm(lambda: list(AuditEvent.objects.values_list("outcome", flat=True))) == ["ok"] * 4
    assert await orm(Directive.objects.count) == 1


@pytest.mark.socket
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_client_over_real_uvicorn_socket(owner, live_server_uvicorn, mode: str) -> None:
    async with mcp_client(owner.token, mode=mode, base_url=live_server_uvicorn.url) as client:
        assert client.protocol_version == ERAS[mode]
        await _exercise_directive_tools(client)
    assert await orm(AuditEvent.objects.filter(principal=owner.principal, outcome="ok").count) == 4
