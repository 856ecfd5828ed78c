"""The rest of the site: health and the tool catalogue under /api/, the admin with its static files."""

from __future__ import annotations

import pytest

from operator_site.models import AuditEvent
from tests.fixtures import asgi_http

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def test_health_reports_database_migrations_and_version() -> None:
    async with asgi_http() as http:
        response = await http.get("/api/health")
    assert response.status_code == 200
    body = response.json()
    assert {k: body[k] for k in ("ok", "status", "degraded", "database", "migrations", "version")} == {
        "ok": True,
        "status": "ok",
        "degraded": [],
        "database": "ok",
        "migrations": "applied",
        "version": "0.1.0",
    }


async def test_openapi_schema_is_published() -> None:
    async with asgi_http() as http:
        schema = (await http.get("/api/openapi.json")).json()
    assert "/api/health" in schema["paths"]
    assert "/api/tools" in schema["paths"]


async def test_the_openapi_page_describes_every_operation() -> None:
    """Every operation the API serves is in the schema with a summary, a description and its answers;
    the human channel's operations name both ways in (a human's bearer token, a session cookie)."""
    from operator_site.cross_domain.api import api

    async with asgi_http() as http:
        schema = (await http.get("/api/openapi.json")).json()
        assert (await http.get("/api/docs")).status_code == 200
    served = {
        (method.upper(), "/api" + path.rstrip("/"))
        for path, item in api._routers[0][1].path_operations.items()  # the root router's own
        for operation in item.operations
        for method in operation.methods
    }
    for prefix, router in api._routers[1:]:
        for path, item in router.path_operations.items():
            for operation in item.operations:
                served |= {
                    (m.upper(), f"/api/{prefix.strip('/')}{path}".rstrip("/")) for m in operation.methods
                }
    documented = {
        (method.upper(), path.rstrip("/")) for path, item in schema["paths"].items() for method in item
    }
    assert served == documented
    expected = {
        ("GET", "/api/intents/pending"),
        ("GET", "/api/intents/{intent_id}"),
        ("POST", "/api/intents/{intent_id}/decide"),
        ("POST", "/api/intents/{intent_id}/withdraw"),
    }
    assert expected <= documented
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            assert operation.get("summary") and operation.get("description"), (method, path)
            assert operation.get("responses"), (method, path)
            if path.startswith("/api/intents"):
                schemes = {name for entry in operation.get("security", []) for name in entry}
                assert schemes == {"HumanBearer", "StaffSession"}, (method, path, schemes)
    assert schema["components"]["securitySchemes"]["HumanBearer"]["scheme"] == "bearer"


async def test_tool_catalogue_needs_a_bearer_and_shows_the_callers_tools(make_principal) -> None:
    from tests.fixtures import orm

    reader = await orm(lambda: make_principal("reader", tools=["operator_list_directives"]))
    async with asgi_http() as http:
        assert (await http.get("/api/tools")).status_code == 401
        listed = (await http.get("/api/tools", headers={"Authorization": f"Bearer {reader.token}"})).json()
    assert [t["name"] for t in listed] == ["operator_list_directives"]
    assert listed[0]["tool_class"] == "read"


async def test_admin_login_page_and_its_static_files_are_served() -> None:
    async with asgi_http() as http:
        login = await http.get("/admin/login/")
        css = await http.get("/static/admin/css/base.css")
        missing = await http.get("/static/admin/css/nope.css")
    assert login.status_code == 200
    assert "/static/admin/css/base.css" in login.text
    assert css.status_code == 200 and "body" in css.text
    assert missing.status_code == 404


def test_audit_is_read_only_in_the_admin(admin_client, agent) -> None:
    event = AuditEvent.objects.create(
        principal=agent.principal, tool="t", outcome="ok", duration_ms=1, args_sha256="0" * 64
    )
    assert admin_client.get("/admin/operator_site/auditevent/").status_code == 200
    assert admin_client.get("/admin/operator_site/auditevent/add/").status_code == 403
    page = admin_client.get(f"/admin/operator_site/auditevent/{event.pk}/change/")
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
    assert (
        admin_client.post(f"/admin/operator_site/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert AuditEvent.objects.count() == 1
