"""Proposals: when the person's words are not enough, an agent proposes the exact high-stakes change
(an intent of type world_model_change / goal_model_change); nothing changes until the person
accepts it, and their approval decision is the evidence on the new version."""

from __future__ import annotations

import json
from typing import Any

import pytest

from beliefs import services as beliefs_services
from beliefs.models import Belief, WorldModelVersion
from beliefs.tests.helpers import run_tool
from goals import goal_model
from goals.models import Goal, GoalModelVersion
from intents import approval
from intents.models import Decision, Intent, IntentStatus
from operator_site.models import Notification
from operator_site.refusals import Refusal

pytestmark = pytest.mark.django_db

RECORD = "operator_record_action_intent"
HOME = [{"op": "add", "kind": "identity", "key": "home_city", "value": "Lisbon"}]


@pytest.fixture
def person(owner: Any) -> Any:
    return owner.principal.user


@pytest.fixture
def say(owner: Any) -> Any:
    def record(text: str) -> Any:
        return beliefs_services.record_instruction(principal=owner.principal, text=text)

    return record


def _propose(agent: Any, changes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    action = {"type": "world_model_change", "title": "Home city: Lisbon", "changes": changes, **extra}
    return run_tool(agent.principal, RECORD, {"action": action})


def _model() -> tuple:
    return (
        WorldModelVersion.objects.count(),
        GoalModelVersion.objects.count(),
        sorted(Belief.objects.values_list("kind", "key", "value", "status")),
        sorted(Goal.objects.values_list("title", "status")),
    )


def test_a_proposal_changes_nothing_until_the_person_accepts(agent, person) -> None:
    before = _model()
    made = _propose(agent, HOME, reason="You said it on a call; I could not quote it.")
    assert made["created"] is True, made
    assert (made["status"], made["policy_decision"]) == ("pending_approval", "requires_approval")
    assert any("approval is its evidence" in r for r in made["policy_reasons"])
    assert _model() == before  # nothing was written to the model
    intent = Intent.objects.get(id=made["id"])
    assert json.loads(intent.body) == {
        "changes": HOME,
        "proposed_against": 0,
        "reason": "You said it on a call; I could not quote it.",
    }
    decision = Decision.objects.get(intent=intent)
    assert "add identity/home_city = 'Lisbon'" in decision.detail
    notice = Notification.objects.get(kind="approval_request")
    assert "Proposed change to the world model" in notice.body

    accepted = approval.approve_intent(intent, by=person, seen=intent.payload_digest, via="admin")
    assert accepted.status == IntentStatus.EXECUTED
    belief = Belief.objects.get(kind="identity", key="home_city")
    assert (belief.value, belief.evidence_instruction_id, belief.evidence_approval) == (
        "Lisbon",
        None,
        decision.id,
    )
    version = WorldModelVersion.objects.get(number=accepted.execution_result["version"])
    assert (version.actor, version.high_stakes, version.evidence_instruction_id) == ("owner", True, None)
    assert version.evidence["approval"] == {
        "decision": decision.id,
        "intent": intent.id,
        "by": "owner",
        "via": "admin",
        "at": version.evidence["approval"]["at"],
        "proposed_by": "scout",
    }
    snapshot = beliefs_services.world_model_snapshot()
    assert snapshot["beliefs"]["identity"][0]["evidence"]["approval"] == decision.id
    safety = Notification.objects.get(kind="world_model_change", subject_id=version.number)
    assert safety.safety is True
    assert f"accepted proposal #{intent.id} from scout" in safety.body


def test_the_same_proposal_twice_the_same_day_is_one_intent(agent) -> None:
    first = _propose(agent, HOME)
    again = _propose(agent, HOME)
    assert (again["id"], again["created"]) == (first["id"], False)
    assert Intent.objects.count() == 1 and Decision.objects.count() == 1


@pytest.mark.parametrize(
    ("changes", "extra", "code"),
    [
        ([{"op": "add", "kind": "identity", "key": "home_city"}], {}, "invalid_proposal"),
        ([{"op": "add", "kind": "feelings", "key": "mood", "value": "x"}], {}, "invalid_proposal"),
        (
            [{"op": "add", "kind": "identity", "key": "home_city", "value": "x", "evil": 1}],
            {},
            "invalid_proposal",
        ),
        ([{"op": "update", "kind": "identity", "key": "employer", "value": "x"}], {}, "belief_not_found"),
        ([{"op": "add", "kind": "identity", "key": "the", "value": "x"}], {}, "invalid_key"),
        ([], {}, "changes_required"),
        (HOME, {"recipient": "bob@example.com"}, "unexpected_argument"),
        (HOME, {"body": "raw text"}, "unexpected_argument"),
        (HOME, {"amount_cents": 100}, "unexpected_argument"),
        (HOME, {"proposed_against": 5}, "invalid_proposal"),
    ],
)
def test_a_proposal_that_could_not_be_applied_is_refused_at_once(agent, changes, extra, code) -> None:
    answer = _propose(agent, changes, **extra)
    assert (answer["ok"], answer["error"]) == (False, code), answer
    assert Intent.objects.count() == 0


@pytest.mark.parametrize(
    ("action_type", "changes", "field"),
    [
        ("goal_model_change", [{"entity": "goal", "op": "add", "fields": {}}], "changes.0.fields.title"),
        ("goal_model_change", [{"entity": "goal", "op": "pause"}], "changes.0.target"),
        (
            "goal_model_change",
            [{"entity": "priority", "op": "move", "target": "Health", "fields": {"position": True}}],
            "changes.0.fields.position",
        ),
        ("goal_model_change", [{"entity": "project", "op": "rerank", "target": 1}], "changes.0.op"),
        (
            "world_model_change",
            [{"op": "retire", "kind": "note", "key": "k", "value": "v"}],
            "changes.0.value",
        ),
        ("world_model_change", [{"op": "update", "kind": "note", "key": "k"}], "changes.0"),
    ],
)
def test_a_proposal_of_the_wrong_shape_is_refused_by_the_tools_own_schema(
    agent, action_type, changes, field
) -> None:
    """A proposal carries exactly what the gated tool takes: the same per-operation schema
    (operator_site/changes.py), refused as invalid_proposal naming the field."""
    action = {"type": action_type, "title": "A change", "changes": changes}
    answer = run_tool(agent.principal, RECORD, {"action": action})
    assert (answer["ok"], answer["error"], answer["field"]) == (False, "invalid_proposal", field), answer
    assert Intent.objects.count() == 0


def test_changes_belong_to_proposals_only(agent) -> None:
    answer = run_tool(agent.principal, RECORD, {"action": {"type": "note", "title": "x", "changes": HOME}})
    assert answer["error"] == "unexpected_argument"


def test_a_stale_proposal_is_refused_at_accept_and_nothing_is_merged(owner, agent, person, say) -> None:
    say("My home city is Porto.")
    made = _propose(agent, HOME)
    run_tool(
        owner.principal,
        "operator_update_world_model",
        {
            "changes": [{"op": "add", "kind": "identity", "key": "home_city", "value": "Porto"}],
            "confirmedInConversation": True,
            "confirmationQuote": "My home city is Porto.",
        },
    )
    intent = Intent.objects.get(id=made["id"])
    before = _model()
    with pytest.raises(Refusal) as refused:
        approval.approve_intent(intent, by=person, seen=intent.payload_digest, via="admin")
    assert refused.value.code == "proposal_stale"
    assert "identity/home_city" in refused.value.reason
    assert _model() == before
    intent.refresh_from_db()
    assert intent.status == IntentStatus.PENDING_APPROVAL
    assert Decision.objects.get(intent=intent).status == "pending"


def test_an_unrelated_later_change_does_not_make_it_stale(owner, agent, person) -> None:
    made = _propose(agent, HOME)
    run_tool(
        owner.principal,
        "operator_update_world_model",
        {"changes": [{"op": "add", "kind": "note", "key": "gym", "value": "tuesdays"}]},
    )
    intent = Intent.objects.get(id=made["id"])
    assert (
        approval.approve_intent(intent, by=person, seen=intent.payload_digest, via="admin").status
        == "executed"
    )


def test_edit_applies_the_persons_values(agent, person) -> None:
    made = _propose(agent, HOME)
    intent = Intent.objects.get(id=made["id"])
    edited = json.loads(intent.body)
    edited["changes"][0]["value"] = "Lisbon, Portugal"
    done = approval.edit_and_approve(
        intent, by=person, seen=intent.payload_digest, via="admin", body=json.dumps(edited)
    )
    assert done.status == "executed"
    assert Belief.objects.get(key="home_city").value == "Lisbon, Portugal"
    # An edit is held to the same schema.
    other = Intent.objects.get(
        id=_propose(agent, [{"op": "add", "kind": "identity", "key": "employer", "value": "Acme"}])["id"]
    )
    bad = json.loads(other.body)
    bad["changes"][0]["kind"] = "feelings"
    with pytest.raises(Refusal) as refused:
        approval.edit_and_approve(
            other, by=person, seen=other.payload_digest, via="admin", body=json.dumps(bad)
        )
    assert refused.value.code == "invalid_proposal"
    assert not Belief.objects.filter(key="employer").exists()


def test_respond_records_the_persons_words_which_are_then_evidence(agent, person) -> None:
    made = _propose(agent, HOME)
    approval.respond_to_intent(made["id"], by=person, text="Yes. My home city is Lisbon now.", via="admin")
    assert Belief.objects.count() == 0  # a response applies nothing
    written = run_tool(
        agent.principal,
        "operator_update_world_model",
        {
            "changes": HOME,
            "confirmedInConversation": True,
            "confirmationQuote": "My home city is Lisbon now.",
        },
    )
    assert written["ok"] is True, written


def test_ignore_parks_it_and_it_stays_pending(agent, person) -> None:
    made = _propose(agent, HOME)
    approval.ignore_intent(made["id"], by=person, via="admin")
    assert Intent.objects.get(id=made["id"]).status == "pending_approval"
    assert Belief.objects.count() == 0


def test_no_agent_path_approves_or_applies_a_proposal(agent) -> None:
    made = _propose(agent, HOME)
    for to in ("approved", "executing", "executed"):
        answer = run_tool(agent.principal, "operator_update_action_intent", {"id": made["id"], "to": to})
        assert answer["ok"] is False, (to, answer)
    decision = Decision.objects.get(intent_id=made["id"])
    answer = run_tool(agent.principal, "operator_update_decision", {"id": decision.id, "status": "approved"})
    assert answer["error"] == "approval_is_human"
    with pytest.raises(Refusal) as refused:
        approval.approve_intent(
            made["id"], by=None, seen=Intent.objects.get(id=made["id"]).payload_digest, via="admin"
        )
    assert refused.value.code == "not_human"
    assert Belief.objects.count() == 0
    assert Intent.objects.get(id=made["id"]).status == "pending_approval"


def test_a_goal_model_proposal_applies_on_approval(owner, agent, person, say) -> None:
    say("Add the goal Learn Italian.")
    goal_model.apply_goal_change(
        principal=owner.principal,
        action="add",
        title="Learn Italian",
        confirmed=True,
        quote="Add the goal Learn Italian.",
    )
    changes = [{"entity": "goal", "op": "pause", "target": "Learn Italian"}]
    made = run_tool(
        agent.principal,
        RECORD,
        {
            "action": {
                "type": "goal_model_change",
                "title": "Pause Italian",
                "changes": changes,
                "reason": "You sounded unsure.",
            }
        },
    )
    assert made["status"] == "pending_approval", made
    assert Goal.objects.get(title="Learn Italian").status == "active"
    intent = Intent.objects.get(id=made["id"])
    done = approval.approve_intent(intent, by=person, seen=intent.payload_digest, via="admin")
    goal = Goal.objects.get(title="Learn Italian")
    assert (done.status, goal.status, goal.evidence_approval) == (
        "executed",
        "paused",
        intent.approval_decision_id or done.approval_decision_id,
    )
    version = GoalModelVersion.objects.get(number=done.execution_result["version"])
    assert version.evidence["approval"]["intent"] == intent.id


def test_the_executor_never_claims_a_proposal(agent, person) -> None:
    from intents.executor import _claimable

    made = _propose(agent, HOME)
    Intent.objects.filter(id=made["id"]).update(
        status="approved", approval_decision=Decision.objects.get(intent_id=made["id"])
    )
    assert (
        not _claimable(made and Intent.objects.get(id=made["id"]).created_at).filter(id=made["id"]).exists()
    )


def test_a_stale_goal_model_proposal_is_refused_and_an_accepted_one_is_one_tap_from_undone(
    owner, agent, person, say
) -> None:
    for title in ("Learn Italian", "Run a marathon"):
        say(f"Add the goal {title}.")
        goal_model.apply_goal_change(
            principal=owner.principal,
            action="add",
            title=title,
            confirmed=True,
            quote=f"Add the goal {title}.",
        )
    remove = [{"entity": "goal", "op": "remove", "target": "Learn Italian"}]
    stale = run_tool(
        agent.principal,
        RECORD,
        {"action": {"type": "goal_model_change", "title": "Drop Italian", "changes": remove}},
    )
    rerank = [{"entity": "goal", "op": "rerank", "target": "Run a marathon", "fields": {"importance": 1}}]
    fine = run_tool(
        agent.principal,
        RECORD,
        {"action": {"type": "goal_model_change", "title": "Marathon first", "changes": rerank}},
    )
    say("Pause the goal Learn Italian for now.")
    goal_model.apply_goal_change(
        principal=owner.principal,
        action="pause",
        goal="Learn Italian",
        confirmed=True,
        quote="Pause the goal Learn Italian for now.",
    )
    intent = Intent.objects.get(id=stale["id"])
    with pytest.raises(Refusal) as refused:
        approval.approve_intent(intent, by=person, seen=intent.payload_digest, via="api")
    assert refused.value.code == "proposal_stale"
    assert Goal.objects.get(title="Learn Italian").status == "paused"
    # The re-rank's target (the marathon, and the ranking) did not change: it applies...
    other = Intent.objects.get(id=fine["id"])
    done = approval.approve_intent(other, by=person, seen=other.payload_digest, via="api")
    assert [g.title for g in Goal.objects.order_by("importance")] == ["Run a marathon", "Learn Italian"]
    # ... and, like any high-stakes write, it is one tap from undone.
    goal_model.REVERTER.undo(number=done.execution_result["version"], principal=owner.principal)
    assert [g.title for g in Goal.objects.order_by("importance")] == ["Learn Italian", "Run a marathon"]


def test_the_packet_lists_pending_proposals(agent) -> None:
    made = _propose(agent, HOME)
    run_tool(
        agent.principal, RECORD, {"action": {"type": "email", "title": "Hi", "recipient": "bob@example.com"}}
    )
    packet = run_tool(agent.principal, "operator_context_packet", {})
    assert packet["awaiting_approval"]["total"] == 2
    assert packet["awaiting_approval"]["proposals"] == [
        {"id": made["id"], "type": "world_model_change", "title": "Home city: Lisbon"}
    ]


def test_an_evidence_refusal_points_to_a_proposal(owner, agent, say) -> None:
    say("Maybe my home city is Lisbon now.")
    refused = run_tool(
        agent.principal,
        "operator_update_world_model",
        {
            "changes": HOME,
            "confirmedInConversation": True,
            "confirmationQuote": "Maybe my home city is Lisbon now.",
        },
    )
    assert refused["error"] == "confirmation_not_firm"
    assert "world_model_change" in refused["reason"]
    # ... and the proposal it points to is one call away, with the same changes.
    assert _propose(agent, HOME)["status"] == "pending_approval"


# --- the approval page ---------------------------------------------------------------------------------
def _decide_url(intent_id: int, affordance: str | None = None) -> str:
    from django.urls import reverse

    if affordance:
        return reverse("admin:intents_intent_decide_one", args=[intent_id, affordance])
    return reverse("admin:intents_intent_decide", args=[intent_id])


def test_the_approval_page_shows_the_diff_and_accept_applies_it(client, owner, agent, say) -> None:
    say("My home city is Porto.")
    run_tool(
        owner.principal,
        "operator_update_world_model",
        {
            "changes": [{"op": "add", "kind": "identity", "key": "home_city", "value": "Porto"}],
            "confirmedInConversation": True,
            "confirmationQuote": "My home city is Porto.",
        },
    )
    update = [{"op": "update", "kind": "identity", "key": "home_city", "value": "Lisbon"}]
    made = _propose(agent, update, reason="You said you moved, on a call.")
    client.force_login(owner.principal.user)
    page = client.get(_decide_url(made["id"]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "The proposed change to your world model" in html
    assert "Porto" in html and "Lisbon" in html and "<del>" in html and "<ins>" in html
    assert "You said you moved, on a call." in html
    assert Belief.objects.get(key="home_city").value == "Porto"  # looking changes nothing
    intent = Intent.objects.get(id=made["id"])
    done = client.post(_decide_url(made["id"], "accept"), {"seen": intent.payload_digest})
    assert done.status_code == 302, done.content[:500]
    assert Belief.objects.get(key="home_city").value == "Lisbon"


def test_the_edit_form_applies_the_persons_value(client, owner, agent) -> None:
    made = _propose(agent, HOME)
    client.force_login(owner.principal.user)
    page = client.get(_decide_url(made["id"], "edit")).content.decode()
    assert 'name="change-0-value"' in page
    intent = Intent.objects.get(id=made["id"])
    posted = {"seen": intent.payload_digest, "title": intent.title, "change-0-value": "Lisbon, Portugal"}
    done = client.post(_decide_url(made["id"], "edit"), posted)
    assert done.status_code == 302, done.content[:800]
    assert Belief.objects.get(key="home_city").value == "Lisbon, Portugal"


def test_a_stale_proposal_page_says_accept_will_refuse(client, owner, agent, say) -> None:
    made = _propose(agent, HOME)
    say("My home city is Porto.")
    run_tool(
        owner.principal,
        "operator_update_world_model",
        {
            "changes": [{"op": "add", "kind": "identity", "key": "home_city", "value": "Porto"}],
            "confirmedInConversation": True,
            "confirmationQuote": "My home city is Porto.",
        },
    )
    client.force_login(owner.principal.user)
    page = client.get(_decide_url(made["id"])).content.decode()
    assert "Accept will refuse" in page
    intent = Intent.objects.get(id=made["id"])
    refused = client.post(_decide_url(made["id"], "accept"), {"seen": intent.payload_digest})
    assert refused.status_code == 409
    assert Belief.objects.get(key="home_city").value == "Porto"
