"""The per-request MCP server: the SDK's MCPServer, built for one principal from prebuilt tools."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult

from operator_site import __version__
from operator_site.face import registry
from operator_site.face.dispatch import audit_unknown_tool, dispatch
from operator_site.models import Principal

INSTRUCTIONS = (
    "The operator is the durable memory of one person and the only sanctioned doorway through which "
    "agents act for them. Read operator_context_packet first. Nothing here sends, spends or publishes: "
    "to act on the world, record an intent with operator_record_action_intent; a person approves it. "
    'Every result is one text block of JSON; a refusal reads {"ok": false, "error": code, '
    '"reason": sentence}, and {"retry": true} means re-read and try again.'
)


class OperatorServer(MCPServer):
    """One instance per request (seed §4.1), closed when the response closes.

    `tools/list` shows only the principal's allowed tools (they are the only ones registered on this
    instance). `tools/call` is resolved against the whole registry, so a known tool outside the
    allowlist gets an audited refusal result, and a name that is no tool at all gets the JSON-RPC
    error the spec asks for (-32602), not an `isError` result.
    """

    def __init__(self, principal: Principal) -> None:
        super().__init__(
            name="operator",
            title="The operator",
            version=__version__,
            instructions=INSTRUCTIONS,
            tools=[spec.sdk_tool for spec in registry.all_tools() if principal.may_call(spec.name)],
            log_level="WARNING",
        )
        self.principal = principal

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:
        spec = registry.get(name)
        if spec is None:
            await audit_unknown_tool(self.principal, name, arguments)
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name[:200]}")
        return await dispatch(spec, self.principal, arguments)
