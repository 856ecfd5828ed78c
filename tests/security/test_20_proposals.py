"""Check 20 — proposals: a proposed change to the person's world model or goal model changes nothing
until the person accepts it. Every approval attempt of check 6, from every token kind, and every
other route an agent has toward applying it (the gated tool without evidence, the lifecycle tool,
the executor, the human channels' endpoints with an agent's bearer token — and the admin's with a
second human's token, which is a person only on the human API) is tried on a proposal of each
model: nothing is approved, nothing is applied. The positive control: the person accepts it
through the human API, and it applies with their approval as the evidence."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings

from beliefs import services as beliefs_services
from beliefs.models import Belief, WorldModelVersion
from goals import goal_model
from goals.models import Goal, GoalModelVersion
from intents.models import Intent
from tests.fixtures import asgi_http, orm
from tests.security.conftest import KINDS
from tests.security.helpers import envelope_of, message_of, post, run_tool, tools_call
from tests.security.test_06_withheld_power import _approved_anything, attempts

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

PROPOSALS: dict[str, dict[str, Any]] = {
    "world_model_change": {
        "type": "world_model_change",
        "title": "Home city: Springfield",
        "changes": [{"op": "add", "kind": "identity", "key": "home_city", "value": "Springfield"}],
        "reason": "A text message said so.",
    },
    "goal_model_change": {
        "type": "goal_model_change",
        "title": "Drop the marathon",
        "changes": [{"entity": "goal", "op": "remove", "target": "Run a marathon"}],
        "reason": "You seemed tired.",
    },
}


def _applied(kind: str) -> bool:
    """Did the proposed change happen (whatever else the attempts wrote: notes, tasks...)?"""
    if kind == "world_model_change":
        return Belief.objects.filter(kind="identity", key="home_city").exists()
    return Goal.objects.get(title="Run a marathon").status == "removed"


def _approval_evidence() -> int:
    """Versions whose evidence is an approval: only the person's acceptance may write one."""
    return sum(
        1
        for model in (WorldModelVersion, GoalModelVersion)
        for evidence in model.objects.values_list("evidence", flat=True)
        if isinstance(evidence, dict) and "approval" in evidence
    )


def _setup(person: Any) -> None:
    beliefs_services.record_instruction(principal=person, text="Add the goal Run a marathon.")
    goal_model.apply_goal_change(
        principal=person,
        action="add",
        title="Run a marathon",
        confirmed=True,
        quote="Add the goal Run a marathon.",
    )


def _other_routes(proposal: dict[str, Any], intent_id: int) -> list[tuple[str, dict[str, Any]]]:
    """What else an agent might try to get the proposed change applied without the person."""
    routes: list[tuple[str, dict[str, Any]]] = [
        ("operator_record_action_intent", {"action": proposal}),  # the same again: the same row
        ("operator_record_action_intent", {"action": {**proposal, "title": proposal["title"] + " (urgent)"}}),
        ("operator_update_action_intent", {"id": intent_id, "to": "executing"}),
        ("operator_update_action_intent", {"id": intent_id, "to": "executed", "note": "applied"}),
    ]
    if proposal["type"] == "world_model_change":
        routes += [
            ("operator_update_world_model", {"changes": proposal["changes"]}),
            (
                "operator_update_world_model",
                {
                    "changes": proposal["changes"],
                    "confirmedInConversation": True,
                    "confirmationQuote": proposal["reason"],
                },
            ),
        ]
    else:
        routes += [
            ("operator_reconcile_goal_model", {"changes": proposal["changes"]}),
            (
                "operator_apply_goal_change",
                {
                    "action": "remove",
                    "goal": "Run a marathon",
                    "confirmedInConversation": True,
                    "confirmationQuote": proposal["reason"],
                },
            ),
        ]
    return routes


@pytest.mark.parametrize("kind", sorted(PROPOSALS))
async def test_no_token_applies_a_proposal(principals, scorecard, no_rate_limit, kind) -> None:
    await orm(_setup, principals["owner"].principal)
    proposal = PROPOSALS[kind]
    async with asgi_http(principals["full_agent"].token) as http:
        row, _ = envelope_of(
            message_of(await post(http, tools_call("operator_record_action_intent", {"action": proposal})))
        )
    assert row["status"] == "pending_approval", row
    intent_id, decision_id = row["id"], row["decision_id"]
    assert not await orm(_applied, kind)
    tried = 0
    got_through: list[str] = []
    for holder_kind in KINDS:
        if holder_kind == "owner":
            continue  # the person's own token may approve nothing either, but the control below is theirs
        async with asgi_http(principals[holder_kind].token) as http:
            for tool, arguments in [*attempts(intent_id, decision_id), *_other_routes(proposal, intent_id)]:
                tried += 1
                await post(http, tools_call(tool, arguments))
                found = await orm(_approved_anything)
                if found or await orm(_applied, kind) or await orm(_approval_evidence):
                    got_through.append(f"{holder_kind} {tool} {arguments}: {found or 'applied'}")
                    break
            digest = await orm(lambda: Intent.objects.get(pk=intent_id).payload_digest)
            for path, data in (
                (f"/api/intents/{intent_id}/decide", {"decision": "accept", "seen": digest}),
                (f"/admin/intents/intent/{intent_id}/decide/accept/", {"seen": digest}),
            ):
                if path.startswith("/api") and KINDS[holder_kind][0] == "human":
                    continue  # a human principal's token is a person on the human API, by design
                tried += 1
                if path.startswith("/api"):
                    response = await http.post(path, json=data)
                else:
                    response = await http.post(path, data=data)
                if response.status_code == 200 or await orm(_applied, kind):
                    got_through.append(f"{holder_kind} POST {path}: {response.status_code}")
    from intents.executor import execute_step

    await orm(lambda: execute_step(limit=50))
    if await orm(_applied, kind) or await orm(_approved_anything):
        got_through.append("the executor applied it")
    # The same proposal again is the same row; a retitled one (or one made against a newer version)
    # is another proposal, and every one of them still waits for the person.
    statuses = await orm(
        lambda: set(Intent.objects.filter(action_type=kind).values_list("status", flat=True))
    )
    assert statuses == {"pending_approval"}
    assert (await orm(lambda: Intent.objects.get(pk=intent_id).status)) == "pending_approval"
    scorecard(
        20,
        f"no token applies a {kind} proposal (5 token kinds x every approval attempt and route)",
        cases=tried,
        bypasses=len(got_through),
        got_through=got_through,
    )
    assert got_through == []

    # The positive control: the person accepts it (the human API, their session), and it applies.
    from django.test import Client

    def accept() -> int:
        client = Client()
        client.force_login(principals["owner"].principal.user)
        digest = Intent.objects.get(pk=intent_id).payload_digest
        response = client.post(
            f"/api/intents/{intent_id}/decide",
            {"decision": "accept", "seen": digest},
            content_type="application/json",
        )
        return response.status_code

    assert await orm(accept) == 200
    assert await orm(_applied, kind)
    assert await orm(_approval_evidence) == 1
    assert (await orm(lambda: Intent.objects.get(pk=intent_id).status)) == "executed"


@pytest.mark.parametrize("as_written_before", [False, True], ids=["now", "image with the intent's id"])
@pytest.mark.parametrize("kind", sorted(PROPOSALS))
def test_an_accepted_proposal_is_one_tap_from_undone(principals, client, kind, as_written_before) -> None:
    """What the person accepted is announced with a one-tap undo, and the undo works: the version's
    image of each entry is what the live row keeps (the approval and its sentence), so the undo's
    check that nothing changed since passes (an image that also held the intent's id never matched,
    and the undo was refused as a conflict). A version accepted before that fix, whose images hold
    the id, is undone too: the undo compares the row with the image as a row keeps it."""
    from intents.approval import approve_intent
    from operator_site.models import Notification
    from operator_site.revert_links import revert_url

    _setup(principals["owner"].principal)
    version_model = WorldModelVersion if kind == "world_model_change" else GoalModelVersion
    proposal = {**PROPOSALS[kind], "proposed_against": version_model.objects.count()}
    row = run_tool(principals["full_agent"].principal, "operator_record_action_intent", {"action": proposal})
    assert row["status"] == "pending_approval", row
    intent = Intent.objects.get(pk=row["id"])
    approve_intent(intent, by=principals["owner"].principal.user, seen=intent.payload_digest, via="admin")
    assert _applied(kind)
    accepted = version_model.objects.order_by("-number").first()
    if as_written_before:  # the images as the code before 2026-12-07 wrote them
        changes = accepted.changes.exclude(after=None)
        assert changes.exists()
        for change in changes:
            after = {**change.after, "evidence": {**change.after["evidence"], "intent": intent.pk}}
            type(change)._base_manager.filter(pk=change.pk).update(after=after)
    notice = Notification.objects.filter(subject_id=accepted.number).exclude(subject_kind="").latest("id")
    url = revert_url(notice).removeprefix(settings.OPERATOR_PUBLIC_URL)
    client.login(username="owner", password="pw-owner-123")
    shown = client.get(url)
    assert shown.status_code == 200 and b"no longer holds" not in shown.content
    done = client.post(url)
    assert done.status_code == 302, done.content.decode()[:2000]
    assert not _applied(kind)
    undo = version_model.objects.order_by("-number").first()
    assert undo.number == accepted.number + 1 and undo.reverts_id == accepted.number
