"""The small typed JSON API under /api/ (django-ninja), with its OpenAPI schema at /api/openapi.json.

- `GET /api/health`: what is degraded — the database and its migrations (503 when down), the
  deliverer's backlog, safety notices still undelivered, a stale run (operator_site/cross_domain/health.py).
- `GET /api/tools`: the tool catalogue the bearer's principal may call (the same list `tools/list`
  gives over MCP).

- `/api/intents/...`: the human approval channel (`intents/api.py`): a human principal's bearer
  token, or the Django session (with CSRF) of a staff login linked to a human principal. Agents'
  tokens are refused.

Every operation carries a summary and a description in the OpenAPI schema (`/api/docs` renders it;
tests/test_site.py checks none is missing).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import NinjaAPI, Schema
from ninja.security import HttpBearer

from intents.api import router as intents_router
from operator_site import __version__
from operator_site.cross_domain.health import report as health_report
from operator_site.face import registry
from operator_site.face.auth import authenticate
from operator_site.models import Principal

api = NinjaAPI(title="The operator", version=__version__, urls_namespace="api")
# The human approval channel (a human's bearer token, or a staff session + CSRF; never an agent).
api.add_router("/intents", intents_router)


class BearerPrincipal(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Principal | None:
        return authenticate(token)


class Health(Schema):
    ok: bool
    status: str
    degraded: list[str]
    database: str
    migrations: str
    version: str
    checks: dict[str, Any]


@api.get(
    "/health",
    response={200: Health, 503: Health},
    auth=None,
    summary="Service health: what is degraded",
    description="`status` is ok, degraded (200: serving, but `degraded` names what needs attention: "
    "deliverer, safety_notices, run) or down (503: the database is unreachable or not migrated).",
)
def health(request: HttpRequest) -> tuple[int, dict[str, Any]]:
    return health_report()


class ToolInfo(Schema):
    name: str
    title: str
    tool_class: str
    description: str
    input_schema: dict[str, Any]


@api.get(
    "/tools",
    response=list[ToolInfo],
    auth=BearerPrincipal(),
    summary="The caller's tool catalogue",
    description="The tools the bearer token's principal may call (its allowlist), each with its class "
    "and input schema: the same list `tools/list` gives over MCP. Any active principal's token; 401 "
    "without one.",
)
def tools(request: HttpRequest) -> list[dict[str, Any]]:
    principal: Principal = request.auth  # type: ignore[attr-defined]
    return [
        {
            "name": spec.name,
            "title": spec.title,
            "tool_class": str(spec.tool_class),
            "description": spec.description,
            "input_schema": spec.mcp_tool.input_schema,
        }
        for spec in registry.all_tools()
        if principal.may_call(spec.name)
    ]
