"""Principals: the tool allowlist, the actor overwrite, the audit row per call, and OPERATOR_TOKEN."""

from __future__ import annotations

import hashlib

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from intents.models import Directive
from operator_site.face.auth import authenticate, digest
from operator_site.models import AppendOnlyError, AuditEvent, Principal
from tests.fixtures import ROOT, asgi_http, call, mcp_client, orm, tool_json

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def test_allowlisted_agent_sees_one_tool_and_is_refused_the_others(make_principal) -> None:
    reader = await orm(lambda: make_principal("reader", tools=["operator_list_directives"]))
    async with mcp_client(reader.token) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        assert listed == ["operator_list_directives"]
        assert tool_json(await client.call_tool("operator_list_directives", {}))["ok"] is True
        refused = await client.call_tool("operator_set_directive", {"kind": "quiet"})
    body = tool_json(refused)
    assert refused.is_error is True
    assert body["error"] == "tool_not_allowed"
    assert body["tool"] == "operator_set_directive"
    assert body["principal"] == "reader"
    assert "operator_set_directive" in body["reason"] and "reader" in body["reason"]
    assert await orm(Directive.objects.count) == 0
    rows = await orm(
        lambda: list(AuditEvent.objects.order_by("id").values_list("tool", "outcome", "error_code"))
    )
    assert rows == [
        ("operator_list_directives", "ok", ""),
        ("operator_set_directive", "refused", "tool_not_allowed"),
    ]


@pytest.mark.parametrize("kind", ["agent", "human"])
@pytest.mark.parametrize("claimed", ["owner", {"name": "owner", "kind": "human"}, None, 42, ["a", "b"]])
async def test_actor_is_overwritten_with_the_principal_and_the_claim_is_audited(
    make_principal, kind: str, claimed: object
) -> None:
    holder = await orm(lambda: make_principal(f"someone-{kind}", kind=kind))
    async with asgi_http(holder.token) as http:
        made = await call(http, "operator_set_directive", {"kind": "quiet", "actor": claimed})
    assert made["directive"]["set_by"] == holder.name
    directive = await orm(lambda: Directive.objects.get())
    assert directive.actor == holder.name
    assert directive.set_by_id == holder.principal.id
    audit = await orm(lambda: AuditEvent.objects.get())
    assert audit.principal_id == holder.principal.id
    assert audit.claimed_actor == claimed


async def test_huge_claimed_actor_is_kept_as_a_digest(agent) -> None:
    claimed = "x" * 50_000
    async with asgi_http(agent.token) as http:
        await call(http, "operator_set_directive", {"kind": "quiet", "actor": claimed})
    audit = await orm(lambda: AuditEvent.objects.get())
    assert audit.claimed_actor["truncated"] is True
    assert audit.claimed_actor["chars"] == 50_002


async def test_every_call_appends_one_audit_row_whatever_the_outcome(agent) -> None:
    async with asgi_http(agent.token) as http:
        await call(http, "operator_list_directives", {})
        await call(http, "operator_set_directive", {"kind": "topic_mute"})  # refused: topic missing
        await call(http, "operator_set_directive", {"kind": "quiet", "minutes": 0})  # invalid arguments
        await call(http, "operator_clear_directive", {"all": True})
    rows = await orm(
        lambda: list(AuditEvent.objects.order_by("id").values_list("tool", "outcome", "error_code"))
    )
    assert rows == [
        ("operator_list_directives", "ok", ""),
        ("operator_set_directive", "refused", "topic_required"),
        ("operator_set_directive", "refused", "invalid_arguments"),
        ("operator_clear_directive", "ok", ""),
    ]
    first = await orm(lambda: AuditEvent.objects.order_by("id").first())
    canonical = b"{}"
    assert first.args_sha256 == hashlib.sha256(canonical).hexdigest()
    assert first.duration_ms >= 0


def test_audit_rows_are_append_only(agent) -> None:
    event = AuditEvent.objects.create(
        principal=agent.principal, tool="t", outcome="ok", duration_ms=1, args_sha256="0" * 64
    )
    event.tool = "changed"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.all().update(tool="changed")
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.all().delete()
    assert AuditEvent.objects.get().tool == "t"


def test_tokens_are_stored_only_as_digests(agent) -> None:
    row = Principal.objects.get(pk=agent.principal.pk)
    assert row.token_digest == hashlib.sha256(agent.token.encode()).hexdigest()
    for field in Principal._meta.concrete_fields:
        assert agent.token not in str(getattr(row, field.attname))


@override_settings(OPERATOR_TOKEN="opk_bootstrapOwnerTokenFromTheEnvironment0001")
def test_operator_token_maps_to_the_built_in_human_owner() -> None:
    principal = authenticate("opk_bootstrapOwnerTokenFromTheEnvironment0001")
    assert principal is not None
    assert (principal.name, principal.kind) == ("owner", "human")
    assert Principal.objects.get(name="owner").token_digest == digest(
        "opk_bootstrapOwnerTokenFromTheEnvironment0001"
    )
    assert authenticate("opk_bootstrapOwnerTokenFromTheEnvironment0002") is None
    # The setting only seeds an owner without a token: changing it later changes nothing (the
    # database is the one source of truth; rotation is `operator_token create owner --rotate`).
    with override_settings(OPERATOR_TOKEN="opk_rotatedOwnerTokenFromTheEnvironment00009"):
        assert authenticate("opk_rotatedOwnerTokenFromTheEnvironment00009") is None
        assert authenticate("opk_bootstrapOwnerTokenFromTheEnvironment0001").name == "owner"


@override_settings(OPERATOR_TOKEN="opk_bootstrapOwnerTokenFromTheEnvironment0001")
def test_a_revoked_owner_stays_revoked_even_with_operator_token() -> None:
    owner = authenticate("opk_bootstrapOwnerTokenFromTheEnvironment0001")
    owner.active = False
    owner.save()
    assert authenticate("opk_bootstrapOwnerTokenFromTheEnvironment0001") is None


@pytest.mark.parametrize("name", ["operator-executor", "operator-observe", "operator-tick"])
async def test_a_service_principal_is_a_tokenless_agent_and_is_never_borrowed(make_principal, name) -> None:
    """`Principal.objects.service(name)`: what the executor, the observe step and the ticks act as."""
    first = await orm(lambda: Principal.objects.service(name))
    assert (first.kind, first.token_digest, first.tools, first.active) == ("agent", None, [], True)
    assert (await orm(lambda: Principal.objects.service(name))).pk == first.pk
    await orm(lambda: Principal.objects.filter(pk=first.pk).delete())
    await orm(lambda: make_principal(name, kind="agent"))  # a token-holding principal of that name
    with pytest.raises(ImproperlyConfigured, match="token-less agent"):
        await orm(lambda: Principal.objects.service(name))


def test_service_principals_are_made_in_one_place() -> None:
    """No module of the apps creates a principal by hand: the one rule is the manager's."""
    made_by_hand = [
        str(path.relative_to(ROOT))
        for app in ("intents", "runs", "beliefs", "goals")
        for path in (ROOT / app).rglob("*.py")
        if "/tests/" not in str(path) and "Principal.objects.get_or_create" in path.read_text()
    ]
    assert made_by_hand == []
