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
