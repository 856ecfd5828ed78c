"""The per-request MCP server: the SDK's low-level `Server`, built for one principal; a fresh one
for each request, closed when the response closes (stateless `/mcp`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
)

from operator_site import __version__
from operator_site.face import registry
from operator_site.face.admission import Presented, admit
from operator_site.face.db import run_db
from operator_site.face.dispatch import audit_tool_name, audit_unknown_tool, dispatch
from operator_site.models import Principal

INSTRUCTIONS = (
    "The operator is the durable memory of one person and the only sanctioned doorway through which "
    "agents act for them. Read operator_context_packet first. Nothing here sends, spends or publishes: "
    "to act on the world, record an intent with operator_record_action_intent; a person approves it. "
    'Every result is one text block of JSON; a refusal reads {"ok": false, "error": code, '
    '"reason": sentence}, and {"retry": true} means re-read and try again.'
)


def _input_schema(name: str) -> dict[str, Any] | None:
    spec = registry.get(name)
    return None if spec is None else spec.mcp_tool.input_schema


class OperatorServer(Server):
    """One instance per request, for one principal — or, for a `tools/call` of a registered tool,
    for the bearer token presented, admitted in the call's own unit of database work
    (face/admission.py).

    `tools/list` shows only the principal's allowed tools. `tools/call` is resolved against the
    whole registry, so a known tool outside the allowlist gets an audited refusal result, and a name
    that is no tool at all gets the JSON-RPC error the spec asks for (-32602), not an `isError`
    result.
    """

    def __init__(self, caller: Principal | Presented) -> None:
        super().__init__(
            name="operator",
            title="The operator",
            version=__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            get_tool_input_schema=_input_schema,
        )
        if not settings.OPERATOR_OPENTELEMETRY:
            # The SDK opens an OpenTelemetry span per message by default; without an exporter it is
            # pure cost on every call.
            self.middleware.clear()
        self.caller = caller

    async def principal(self) -> Principal:
        """The principal served; a presented token is admitted first (raises NotAdmitted)."""
        if isinstance(self.caller, Presented):
            self.caller = await run_db(admit, self.caller.token)
        return self.caller

    async def _list_tools(self, ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        principal = await self.principal()
        return ListToolsResult(
            tools=[spec.mcp_tool for spec in registry.all_tools() if principal.may_call(spec.name)]
        )

    async def _call_tool(self, ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        arguments = params.arguments or {}
        spec = registry.get(params.name)
        if spec is None:
            await audit_unknown_tool(await self.principal(), params.name, arguments)
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {audit_tool_name(params.name)}")
        return await dispatch(spec, self.caller, arguments)
