"""The small typed JSON API under /api/ (django-ninja), with its OpenAPI schema at /api/openapi.json.

- `GET /api/health`: is the database reachable, are migrations applied, which version runs.
- `GET /api/tools`: the tool catalogue the bearer's principal may call (the same list `tools/list`
  gives over MCP).

- `/api/intents/...`: the human approval channel (`intents/api.py`; Django session + CSRF, staff
  linked to a human principal only).
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest
from ninja import NinjaAPI, Schema
from ninja.security import HttpBearer

from intents.api import router as intents_router
from operator_site import __version__
from operator_site.face import registry
from operator_site.face.auth import authenticate
from operator_site.models import Principal

api = NinjaAPI(title="The operator", version=__version__, urls_namespace="api")
# The human approval channel (Django session + CSRF, staff linked to a human principal only).
api.add_router("/intents", intents_router)


class BearerPrincipal(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Principal | None:
        return authenticate(token)


class Health(Schema):
    ok: bool
    database: str
    migrations: str
    version: str


def _migrations_pending() -> int:
    connection = connections[DEFAULT_DB_ALIAS]
    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


@api.get("/health", response={200: Health, 503: Health}, auth=None, summary="Service health")
def health(request: HttpRequest) -> tuple[int, dict[str, Any]]:
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
        database = "ok"
        pending = _migrations_pending()
        migrations = "applied" if pending == 0 else f"{pending} pending"
    except Exception as exc:  # any failure to reach the database is "unhealthy", never a 500
        database = f"unreachable: {type(exc).__name__}"
        migrations = "unknown"
    ok = database == "ok" and migrations == "applied"
    return (200 if ok else 503), {
        "ok": ok,
        "database": database,
        "migrations": migrations,
        "version": __version__,
    }


class ToolInfo(Schema):
    name: str
    title: str
    tool_class: str
    description: str
    input_schema: dict[str, Any]


@api.get("/tools", response=list[ToolInfo], auth=BearerPrincipal(), summary="The caller's tool catalogue")
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
