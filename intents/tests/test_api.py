"""The human API channel: /api/intents/... — a Django session (+ CSRF) of a staff login linked to a
human principal, or a human principal's bearer token (no CSRF: a browser never sends one by itself).
Agents' tokens never reach it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from intents.models import MAX_AMOUNT_CENTS, Decision, Intent

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


def test_the_queue_reads_its_decisions_in_one_query_whatever_its_length(person, agent, record) -> None:
    """Each intent's decision comes from the listing's prefetch: no query per intent."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client, _ = person

    def queue_queries() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as seen:
            rows = client.get("/api/intents/pending").json()
        assert all(row["decision"]["status"] == "pending" for row in rows)
        return len(rows), len(seen)

    record(agent, title="One renewal")
    few = queue_queries()
    for n in range(5):
        record(agent, title=f"Renewal {n}")
    many = queue_queries()
    assert (few[0], many[0]) == (1, 6)
    assert many[1] == few[1], f"{few[1]} queries for 1 intent, {many[1]} for 6"


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


@pytest.mark.parametrize("amount", [-1, MAX_AMOUNT_CENTS + 1, 2**63, 10**19, 10**40])
def test_an_edit_amount_out_of_bounds_is_refused_and_writes_nothing(person, pending, amount: int) -> None:
    """The bound the agent's tool and the admin's form hold (MAX_AMOUNT_CENTS): never a 500 from a
    number past the database's 64-bit column."""
    client, token = person
    response = decide(
        client, pending.pk, token, decision="edit", seen=pending.payload_digest, amount_cents=amount
    )
    assert response.status_code == 422 and "amount_cents" in response.content.decode(), response.content
    fresh = Intent.objects.get(pk=pending.pk)
    assert (fresh.status, fresh.amount_cents) == ("pending_approval", 4900)
    assert (
        decide(
            client,
            pending.pk,
            token,
            decision="edit",
            seen=pending.payload_digest,
            amount_cents=MAX_AMOUNT_CENTS,
        ).status_code
        == 200
    )


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


def test_an_agent_token_never_reaches_approval(agent, make_principal, pending) -> None:
    """An agent's token — even one whose allowlist names every tool — is not the person: 401 on every
    operation, nothing decided, nothing withdrawn."""
    everything = make_principal("all-tools", kind="agent", tools=None)
    for holder in (agent, everything):
        client = Client(enforce_csrf_checks=True)
        auth = {"Authorization": f"Bearer {holder.token}"}
        response = client.post(
            f"/api/intents/{pending.pk}/decide",
            data=json.dumps({"decision": "accept", "seen": pending.payload_digest}),
            content_type="application/json",
            headers=auth,
        )
        assert response.status_code == 401
        assert client.get("/api/intents/pending", headers=auth).status_code == 401
        assert client.get(f"/api/intents/{pending.pk}", headers=auth).status_code == 401
        assert (
            client.post(
                f"/api/intents/{pending.pk}/withdraw",
                data="{}",
                content_type="application/json",
                headers=auth,
            ).status_code
            == 401
        )
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def bearer(holder: Any, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
    """A script's request: a bearer token, no cookie, no CSRF token."""
    client = Client(enforce_csrf_checks=True)
    auth = {"Authorization": f"Bearer {holder.token}"}
    if method == "GET":
        return client.get(path, headers=auth)
    return client.post(path, data=json.dumps(payload or {}), content_type="application/json", headers=auth)


def bearer_accept(holder: Any, intent_id: int, seen: str) -> Any:
    return bearer(holder, "POST", f"/api/intents/{intent_id}/decide", {"decision": "accept", "seen": seen})


def test_a_human_token_decides_without_a_session_or_csrf(owner, pending) -> None:
    """The person's own script or phone shortcut: the human principal's bearer token lists, shows and
    accepts — recorded as that principal's decision, via the API."""
    queue = bearer(owner, "GET", "/api/intents/pending")
    assert queue.status_code == 200 and [row["id"] for row in queue.json()] == [pending.pk]
    seen = bearer(owner, "GET", f"/api/intents/{pending.pk}").json()["seen"]
    response = bearer_accept(owner, pending.pk, seen)
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "approved"
    assert "brain" in response.json()["follow_through"]["text"]  # no brain here: it says nothing runs
    decision = Decision.objects.select_related("decided_by").get(intent=pending)
    assert (decision.decided_by.name, decision.decided_via) == ("owner", "api")


def test_a_revoked_or_unknown_human_token_is_401(owner, pending) -> None:
    from operator_site.face.auth import revoke

    revoke(owner.principal)
    seen = pending.payload_digest
    response = bearer_accept(owner, pending.pk, seen)
    assert response.status_code == 401
    unknown = {"Authorization": "Bearer opk_nope-" + "x" * 30}
    assert Client().get("/api/intents/pending", headers=unknown).status_code == 401
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_an_agent_token_next_to_a_session_is_refused(agent, person, pending) -> None:
    """A caller that presents a bearer token is judged by that token: an agent's bearer header next to
    the person's session cookie is refused (401), it does not borrow the session."""
    client, _ = person
    response = client.post(
        f"/api/intents/{pending.pk}/decide",
        data=json.dumps({"decision": "accept", "seen": pending.payload_digest}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {agent.token}"},
    )
    assert response.status_code == 401
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_a_session_without_csrf_is_refused(person, pending) -> None:
    """CSRF applies to cookie sessions: the person's session cookie without the CSRF token is 403."""
    client, _ = person
    response = decide(client, pending.pk, None, decision="accept", seen=pending.payload_digest)
    assert response.status_code == 403
    withdraw = client.post(f"/api/intents/{pending.pk}/withdraw", data="{}", content_type="application/json")
    assert withdraw.status_code == 403
    assert Intent.objects.get(pk=pending.pk).status == "pending_approval"


def test_withdraw_through_the_api(owner, pending) -> None:
    seen = pending.payload_digest
    assert bearer_accept(owner, pending.pk, seen).status_code == 200
    response = bearer(owner, "POST", f"/api/intents/{pending.pk}/withdraw", {"note": "changed my mind"})
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "cancelled"
    again = bearer(owner, "POST", f"/api/intents/{pending.pk}/withdraw", {})
    assert again.status_code == 409 and again.json()["error"] == "not_withdrawable"
    assert bearer(owner, "POST", "/api/intents/424242/withdraw", {}).status_code == 404


def test_withdraw_after_the_executor_claimed_is_409(owner, pending) -> None:
    seen = pending.payload_digest
    assert bearer_accept(owner, pending.pk, seen).status_code == 200
    Intent.objects.filter(pk=pending.pk).update(status="executing", lease_token="t", lease_holder="executor")
    response = bearer(owner, "POST", f"/api/intents/{pending.pk}/withdraw", {})
    assert response.status_code == 409 and response.json()["error"] == "already_claimed"
    assert Intent.objects.get(pk=pending.pk).status == "executing"


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
