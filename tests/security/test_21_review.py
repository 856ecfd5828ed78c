"""Check 21 — the person's review flow refuses everyone else: acknowledging a notice ("Looks right"),
undoing from its page, withdrawing an approved intent (admin and API) and every operation of the human
API, tried by every caller that is not the person — each agent token kind (also next to the person's
session cookie), a staff login not linked to a human principal, an anonymous visitor — and by the
person in ways that must not work (GET instead of POST, a POST without the CSRF token). Nothing is
acknowledged, undone, withdrawn or decided; then the person does each, once, as the control."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from beliefs import services as beliefs
from intents import approval
from intents import lifecycle as intents
from intents.models import Intent
from operator_site.models import Notification
from operator_site.revert_links import revert_token
from tests.security.conftest import KINDS

pytestmark = pytest.mark.django_db

QUOTE = "Please remember my name is Ian Example and that I go by Ian."


def _world(principals: dict[str, Any]) -> dict[str, Any]:
    owner, agent = principals["owner"].principal, principals["full_agent"].principal
    with transaction.atomic():
        beliefs.record_instruction(principal=owner, text=QUOTE)
        beliefs.update_world_model(
            principal=agent,
            changes=[{"op": "add", "kind": "identity", "key": "name", "value": "Ian Example"}],
            confirmed=True,
            quote=QUOTE,
        )
        pending, _ = intents.record_intent(
            principal=agent,
            action=intents.ActionInput(type="send_email", title="Tell Bob", recipient="bob@x.org"),
        )
        to_withdraw, _ = intents.record_intent(
            principal=agent, action=intents.ActionInput(type="spend", title="Renewal", amount_cents=4900)
        )
    approval.approve_intent(to_withdraw, by=owner.user, seen=to_withdraw.payload_digest, via="admin")
    return {
        "notice": Notification.objects.get(kind="world_model_change"),
        "pending": pending,
        "approved": Intent.objects.get(pk=to_withdraw.pk),
    }


def _state(world: dict[str, Any]) -> tuple[Any, ...]:
    notice = Notification.objects.get(pk=world["notice"].pk)
    return (
        notice.acknowledged_at,
        notice.revert_used_at,
        Intent.objects.get(pk=world["pending"].pk).status,
        Intent.objects.get(pk=world["approved"].pk).status,
    )


def _attempts(world: dict[str, Any]) -> list[tuple[str, str, Any]]:
    notice, pending, approved = world["notice"], world["pending"], world["approved"]
    api_accept = json.dumps({"decision": "accept", "seen": pending.payload_digest})
    return [
        ("POST", f"/admin/operator_site/notification/{notice.pk}/acknowledge/", {}),
        ("POST", f"/revert/{revert_token(notice)}/", {"confirm": "Undo"}),
        ("POST", f"/admin/intents/intent/{approved.pk}/withdraw/", {"note": "x"}),
        ("POST", f"/admin/intents/intent/{pending.pk}/decide/accept/", {"seen": pending.payload_digest}),
        ("API", f"/api/intents/{pending.pk}/decide", api_accept),
        ("API", f"/api/intents/{approved.pk}/withdraw", "{}"),
        ("GET-API", "/api/intents/pending", None),
        ("GET-API", f"/api/intents/{pending.pk}", None),
    ]


def _send(client: Client, method: str, path: str, data: Any, headers: dict[str, str]) -> Any:
    if method == "POST":
        return client.post(path, data, headers=headers)
    if method == "API":
        return client.post(path, data=data, content_type="application/json", headers=headers)
    return client.get(path, headers=headers)


def test_no_one_but_the_person_acknowledges_undoes_withdraws_or_decides(
    principals: dict[str, Any], django_user_model: Any, scorecard: Any
) -> None:
    world = _world(principals)
    before = _state(world)
    helper = django_user_model.objects.create_user("helper", password="pw-helper-1", is_staff=True)
    owner_user = principals["owner"].principal.user
    callers: list[tuple[str, Client, dict[str, str]]] = [("anonymous", Client(), {})]
    for kind, (nature, _tools) in KINDS.items():
        if nature == "agent":
            token = {"Authorization": f"Bearer {principals[kind].token}"}
            callers.append((f"{kind} token", Client(enforce_csrf_checks=True), token))
            beside = Client(enforce_csrf_checks=True)
            beside.force_login(owner_user)  # the person's session cookie, but no CSRF token: a forgery
            callers.append((f"{kind} token beside the person's cookie", beside, token))
    staff = Client()
    staff.force_login(helper)
    callers.append(("staff login without a person", staff, {}))
    no_csrf = Client(enforce_csrf_checks=True)
    no_csrf.force_login(owner_user)
    callers.append(("the person without the CSRF token", no_csrf, {}))
    tried, got_through = 0, []
    for name, client, headers in callers:
        for method, path, data in _attempts(world):
            if name == "the person without the CSRF token" and method == "GET-API":
                continue  # reading is the person's right; CSRF guards writes
            tried += 1
            response = _send(client, method, path, data, headers)
            if (
                response.status_code == 200
                and method != "GET-API"
                and "errornote" not in response.content.decode()
            ):
                got_through.append(f"{name}: {method} {path} → 200")
            if method == "GET-API" and response.status_code == 200:
                got_through.append(f"{name}: read the approval queue")
            if _state(world) != before:
                got_through.append(f"{name}: {method} {path} changed {before} → {_state(world)}")
                before = _state(world)
    # The person, with a GET where a POST is needed: nothing happens either.
    person = Client()
    person.force_login(owner_user)
    for path in (
        f"/admin/operator_site/notification/{world['notice'].pk}/acknowledge/",
        f"/admin/intents/intent/{world['approved'].pk}/withdraw/",
        f"/revert/{revert_token(world['notice'])}/",
    ):
        tried += 1
        person.get(path)
        if _state(world) != before:
            got_through.append(f"the person's GET {path} changed something")
    scorecard(
        21,
        "no one but the person acknowledges, undoes, withdraws or decides (review pages, human API)",
        cases=tried,
        bypasses=len(got_through),
        got_through=got_through,
    )
    assert got_through == []
    # The control: the person does each, once.
    assert (
        person.post(f"/admin/operator_site/notification/{world['notice'].pk}/acknowledge/").status_code == 302
    )
    assert person.post(f"/admin/intents/intent/{world['approved'].pk}/withdraw/").status_code == 302
    assert person.post(f"/revert/{revert_token(world['notice'])}/").status_code == 302
    owner_api = {"Authorization": f"Bearer {principals['owner'].token}"}
    accepted = Client().post(
        f"/api/intents/{world['pending'].pk}/decide",
        data=json.dumps({"decision": "accept", "seen": world["pending"].payload_digest}),
        content_type="application/json",
        headers=owner_api,
    )
    assert accepted.status_code == 200
    notice, _revert, pending, approved = _state(world)
    assert notice is not None and _revert is not None and (pending, approved) == ("approved", "cancelled")
