"""The human API channel: POST /api/intents/{id}/decide (Django session + CSRF, staff linked to a human
principal only). Tokens never reach it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from intents.models import Decision, Intent

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending(agent: Any, record: Any) -> Intent:
    intent, _ = record(agent)
    return intent


def session(username: str, password: str) -> tuple[Client, str]:
    """A browser-like client: logged in, CSRF enforced, holding its CSRF token."""
    client = Client(enforce_csrf_checks=True)
    assert client.login(username=username, password=password)
    client.get("/admin/login/", follow=True)  # a page with a form: sets the csrftoken cookie
    return client, client.cookies["csrftoken"].value


def decide(client: Client, intent_id: int, token: str | None, **payload: Any) -> Any:
    headers = {"X-CSRFToken": token} if token else {}
    return client.post(
        f"/api/intents/{intent_id}/decide",
        data=json.dumps(payload),
        content_type="application/json",
        headers=headers,
    )


@pytest.fixture
def person(owner: Any) -> tuple[Client, str]:
    return session("owner", "pw-owner-123")


def test_show_and_pending_give_the_digest_to_decide_on(person, pending) -> None:
    client, _ = person
    one = client.get(f"/api/intents/{pending.pk}").json()
    assert one["seen"] == pending.payload_digest and one["status"] == "pending_approval"
    assert one["decision"]["status"] == "pending"
    queue = client.get("/api/intents/pending").json()
    assert [row["id"] for row in queue] == [pending.pk]
    assert client.get("/api/intents/424242").status_code == 404


def test_accept(person, pending) -> None:
    client, token = person
    response = decide(client, pending.pk, token, decision="accept", seen=pending.payload_digest, note="ok")
    assert response.status_code == 200, response.content
    body = response.json()
    decision = Decision.objects.get(intent=pending)
    assert body["status"] == "approved" and body["approval_decision_id"] == decision.id
    assert (decision.decided_by.name, decision.decided_via) == ("owner", "api")
    again = decide(client, pending.pk, token, decision="accept", seen=pending.payload_digest)
    assert again.status_code == 409 and again.json()["error"] == "not_pending"


def test_edit(person, pending) -> None:
    client, token = person
    response = decide(
        client,
        pending.pk,
        token,
        decision="edit",
        seen=pending.payload_digest,
        title="Monthly plan",
        amount_cents=490,
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["title"], body["amount_cents"]) == ("approved", "Monthly plan", 490)
    assert body["idempotency_key"] != pending.idempotency_key


def test_edit_keeps_the_amount_unless_it_is_given(person, pending) -> None:
    client, token = person
    response = decide(
        client, pending.pk, token, decision="edit", seen=pending.payload_digest, body="note to vendor"
    )
    assert response.json()["amount_cents"] == 4900


def test_respond(person, pending) -> None:
    client, token = person
    response = decide(client, pending.pk, token, decision="respond", text="Ask for the nonprofit rate first.")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "pending_approval" and body["response"] == "Ask for the nonprofit rate first."
    empty = decide(client, pending.pk, token, decision="respond", text=" ")
    assert empty.status_code == 400 and empty.json()["error"] == "text_required"


def test_ignore(person, pending) -> None:
    client, token = person
    response = decide(client, pending.pk, token, decision="ignore")
    assert response.status_code == 200
    assert response.json()["decision"]["status"] == "parked"
    assert response.json()["status"] == "pending_approval"


def test_reject(person, pending) -> None:
    client, token = person
    assert decide(client, pending.pk, token, decision="reject", note="no").json()["status"] == "rejected"


def test_a_changed_payload_is_refused(person, pending) -> None:
    client, token = person
    response = decide(client, pending.pk, token, decision="accept", seen="f" * 64)
    assert response.status_code == 409 and response.json()["error"] == "payload_changed"
    missing = decide(client, pending.pk, token, decision="accept")
    assert missing.status_code == 400 and missing.json()["error"] == "seen_required"
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_no_csrf_token_no_decision(person, pending) -> None:
    client, _ = person
    response = decide(client, pending.pk, None, decision="accept", seen=pending.payload_digest)
    assert response.status_code == 403
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_a_bearer_token_never_reaches_approval(agent, owner, pending) -> None:
    """An agent's token — and even the owner's MCP token — is not a session: 401, nothing decided."""
    for holder in (agent, owner):
        client = Client()
        response = client.post(
            f"/api/intents/{pending.pk}/decide",
            data=json.dumps({"decision": "accept", "seen": pending.payload_digest}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {holder.token}"},
        )
        assert response.status_code == 401
        assert (
            client.get(
                "/api/intents/pending", headers={"Authorization": f"Bearer {holder.token}"}
            ).status_code
            == 401
        )
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_a_staff_login_without_a_human_principal_is_403(helper, pending) -> None:
    client, token = session("helper", "pw-helper-123")
    for payload in (
        {"decision": "accept", "seen": pending.payload_digest},
        {"decision": "edit", "seen": pending.payload_digest, "title": "x"},
        {"decision": "respond", "text": "x"},
        {"decision": "ignore"},
        {"decision": "reject"},
    ):
        response = decide(client, pending.pk, token, **payload)
        assert response.status_code == 403 and response.json()["error"] == "not_human", payload
    assert client.get("/api/intents/pending").status_code == 403
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"
    assert Decision.objects.get(intent=pending).status == "pending"


def test_a_non_staff_login_is_401(django_user_model, make_principal, pending) -> None:
    user = django_user_model.objects.create_user("visitor", password="pw-visitor-123")
    make_principal("visitor", kind="human", user=user)
    client, token = session("visitor", "pw-visitor-123")
    assert decide(client, pending.pk, token, decision="ignore").status_code == 401


def test_bad_bodies_are_422_and_unknown_intents_404(person, pending) -> None:
    client, token = person
    assert (
        decide(client, pending.pk, token, decision="approve", seen=pending.payload_digest).status_code == 422
    )
    assert decide(client, pending.pk, token, decision="accept", seen="x", extra=1).status_code == 422
    assert decide(client, pending.pk, token, decision="edit", seen="x", amount_cents=-1).status_code == 422
    assert decide(client, 999999, token, decision="ignore").status_code == 404
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_the_endpoint_is_in_the_openapi_schema(client) -> None:
    schema = client.get("/api/openapi.json").json()
    assert "/api/intents/{intent_id}/decide" in schema["paths"]
