"""The world-model tools through the dispatcher: all-or-nothing writes, fail-closed targets, one loud
notice per high-stakes write whatever directives say, the snapshot, and instructions."""

from __future__ import annotations

import pytest
from django.core import mail

from beliefs import services
from beliefs.models import Belief, WorldModelVersion
from beliefs.tests.helpers import add, retire, update
from intents import directives
from operator_site import revert_links
from operator_site.models import Instruction, Notification
from operator_site.refusals import Refusal

pytestmark = pytest.mark.django_db

UPDATE = "operator_update_world_model"
READ = "operator_user_world_model"


def test_low_stakes_changes_apply_freely_and_answer_what_changed(agent, tool) -> None:
    answer = tool(
        agent.principal, UPDATE, {"changes": [add("preference", "Coffee", "flat white", confidence=0.8)]}
    )
    assert answer == {
        "ok": True,
        "version": 1,
        "supersedes": 0,
        "changes": [
            {
                "op": "add",
                "kind": "preference",
                "key": "coffee",
                "stakes": "low",
                "before": None,
                "after": {"value": "flat white", "confidence": 0.8, "status": "active"},
            }
        ],
        "unchanged": [],
        "high_stakes": False,
        "evidence": None,
        "notification": None,
    }
    row = Belief.objects.get()
    assert (row.source_name, row.source_kind, row.set_in_version, row.last_version) == (
        "scout",
        "agent",
        1,
        1,
    )
    assert Notification.objects.count() == 0


def test_a_call_is_all_or_nothing(agent, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "a", "one")]})
    answer = tool(
        agent.principal,
        UPDATE,
        {"changes": [update("note", "a", "two"), add("note", "b", "new"), update("note", "missing", "x")]},
    )
    assert answer["error"] == "belief_not_found"
    assert answer["entity"] == "note/missing"
    assert Belief.objects.get(key="a").value == "one"
    assert not Belief.objects.filter(key="b").exists()
    assert WorldModelVersion.objects.count() == 1


def test_fail_closed_targets_name_their_candidates(agent, tool) -> None:
    tool(
        agent.principal,
        UPDATE,
        {"changes": [add("project", "garden shed", "build it"), add("project", "garden", "x")]},
    )
    answer = tool(agent.principal, UPDATE, {"changes": [update("project", "garden_shed", "paint it")]})
    assert answer["error"] == "belief_not_found"
    assert set(answer["candidates"]) >= {"garden shed"}
    assert (
        tool(agent.principal, UPDATE, {"changes": [add("project", "garden", "y")]})["error"]
        == "belief_exists"
    )
    assert (
        tool(agent.principal, UPDATE, {"changes": [retire("project", "pond")]})["error"] == "belief_not_found"
    )
    duplicate = tool(
        agent.principal, UPDATE, {"changes": [update("project", "garden", "a"), retire("project", "Garden")]}
    )
    assert duplicate["error"] == "duplicate_target"
    assert Belief.objects.get(key="garden").value == "x"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        # The shape, by the published schema (beliefs/schemas.py): one code, naming the field.
        ({"op": "add", "kind": "mood", "key": "k", "value": "v"}, "invalid_change"),
        ({"op": "add", "kind": "note", "key": "k"}, "invalid_change"),
        ({"op": "add", "kind": "note", "key": "k", "value": "   "}, "invalid_change"),
        ({"op": "update", "kind": "note", "key": "k"}, "invalid_change"),
        ({"op": "retire", "kind": "note", "key": "k", "value": "v"}, "invalid_change"),
        ({"op": "add", "kind": "note", "key": "  ", "value": "v"}, "invalid_change"),
        ({"op": "add", "kind": "note", "key": "k", "value": "v", "confidence": 1.5}, "invalid_change"),
        ({"op": "merge", "kind": "note", "key": "k", "value": "v"}, "invalid_change"),
        # The wording rule a schema cannot say: a high-stakes key names something.
        ({"op": "add", "kind": "identity", "key": "the", "value": "v"}, "invalid_key"),
    ],
)
def test_bad_changes_are_refused_by_the_service(agent, change, code) -> None:
    with pytest.raises(Refusal) as refused:
        services.update_world_model(principal=agent.principal, changes=[change])
    assert refused.value.code == code
    assert Belief.objects.count() == 0


@pytest.mark.parametrize(
    "change",
    [
        {"op": "add", "kind": "mood", "key": "k", "value": "v"},
        {"op": "add", "kind": "note", "key": "k", "value": "v", "confidence": -0.1},
        {"op": "add", "kind": "note", "key": "k", "value": "v", "source": "owner"},
        {"op": "add", "kind": "note", "key": "", "value": "v"},
    ],
)
def test_bad_changes_are_refused_by_the_schema(agent, change) -> None:
    from beliefs.tools import UpdateWorldModelArgs

    with pytest.raises(ValueError, match="validation error"):
        UpdateWorldModelArgs.model_validate({"changes": [change]})


def test_a_change_to_the_same_content_writes_nothing(agent, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "a", "one", confidence=0.5)]})
    answer = tool(agent.principal, UPDATE, {"changes": [update("note", "a", "one", confidence=0.5)]})
    assert answer["error"] == "nothing_changed"
    assert WorldModelVersion.objects.count() == 1
    mixed = tool(agent.principal, UPDATE, {"changes": [update("note", "a", "one"), add("note", "b", "two")]})
    assert mixed["unchanged"] == ["note/a"]
    assert [c["key"] for c in mixed["changes"]] == ["b"]


def test_retire_then_add_again_reactivates_the_key(agent, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("risk", "burnout", "long weeks")]})
    tool(agent.principal, UPDATE, {"changes": [retire("risk", "burnout")]})
    snapshot = tool(agent.principal, READ, {})
    assert snapshot["beliefs"]["risk"] == []
    retired = tool(agent.principal, READ, {"include_retired": True})["beliefs"]["risk"]
    assert [(b["key"], b["status"]) for b in retired] == [("burnout", "retired")]
    again = tool(agent.principal, UPDATE, {"changes": [add("risk", "burnout", "travel season")]})
    assert again["changes"][0]["before"]["status"] == "retired"
    assert Belief.objects.get().status == "active"


# --- notices --------------------------------------------------------------------------------------------
def _high_stakes_write(tool, agent, say, key="name", value="Iain") -> dict:
    say(f"From today my {key} is {value}, please update it.")
    return tool(
        agent.principal,
        UPDATE,
        {
            "changes": [add("identity", key, value)],
            "confirmedInConversation": True,
            "confirmationQuote": f"From today my {key} is {value}, please update it.",
        },
    )


def test_every_high_stakes_write_notifies_once_even_under_quiet_and_focus(
    agent, owner, say, tool, django_capture_on_commit_callbacks
) -> None:
    directives.set_directive(principal=owner.principal, kind="quiet", topic=None, minutes=60, reason=None)
    directives.set_directive(principal=owner.principal, kind="focus", topic="tax", minutes=60, reason=None)
    with django_capture_on_commit_callbacks(execute=True):
        answer = _high_stakes_write(tool, agent, say)
    assert answer["ok"] is True and answer["high_stakes"] is True
    notice = Notification.objects.get()
    assert notice.id == answer["notification"]
    assert (notice.kind, notice.safety, notice.subject_kind, notice.subject_id) == (
        "world_model_change",
        True,
        "world_model",
        answer["version"],
    )
    assert notice.state == "delivered"  # never held by a directive
    assert "identity/name" in notice.body and "my name is Iain" in notice.body
    [email] = mail.outbox
    assert email.subject.startswith("[operator: safety] World model v1")
    assert "/revert/" in email.body
    # A second high-stakes write: a second notice (one per write).
    with django_capture_on_commit_callbacks(execute=True):
        second = _high_stakes_write(tool, agent, say, key="employer", value="Acme")
    assert second["notification"] != answer["notification"]
    assert Notification.objects.count() == 2


def test_the_snapshot_shows_evidence_source_version_and_pending_notices(agent, owner, say, tool) -> None:
    made = _high_stakes_write(tool, agent, say)
    tool(agent.principal, UPDATE, {"changes": [add("preference", "tea", "green")]})
    snapshot = tool(agent.principal, READ, {})
    assert snapshot["version"] == 2
    [name] = snapshot["beliefs"]["identity"]
    instruction = Instruction.objects.get()
    assert name == {
        "key": "name",
        "value": "Iain",
        "confidence": None,
        "status": "active",
        "stakes": "high",
        "source": {"principal": "scout", "kind": "agent"},
        "version": 1,
        "evidence": {"instruction": instruction.id, "span": "From today my name is Iain, please update it."},
    }
    assert snapshot["beliefs"]["preference"][0]["evidence"] is None
    assert set(snapshot["beliefs"]) == {
        "identity",
        "goal",
        "behavior_policy",
        "constraint",
        "preference",
        "note",
        "project",
        "risk",
    }
    [pending] = snapshot["pending_notices"]
    assert (pending["id"], pending["version"]) == (made["notification"], 1)
    revert_links.acknowledge(Notification.objects.get(), by=owner.principal)
    assert tool(agent.principal, READ, {})["pending_notices"] == []
    assert tool(agent.principal, READ, {"kind": "preference"})["beliefs"] == {
        "preference": [snapshot["beliefs"]["preference"][0]]
    }
    assert tool(agent.principal, READ, {"as_of_version": 9})["error"] == "version_not_found"
    assert tool(agent.principal, READ, {"as_of_version": 0})["count"] == 0


# --- instructions ---------------------------------------------------------------------------------------
def test_instructions_are_human_authored_only_when_a_human_records_them(owner, agent, tool) -> None:
    human = tool(
        owner.principal,
        "operator_record_instruction",
        {"text": "Call me Iain.", "kind": "instruction", "channel": " Voice ", "refs": ["task:3", 7]},
    )
    assert human["ok"] is True and human["evidence_eligible"] is True
    assert human["instruction"]["human_authored"] is True
    assert human["instruction"]["channel"] == "voice"
    assert human["instruction"]["refs"] == ["task:3", 7]
    by_agent = tool(
        agent.principal,
        "operator_record_instruction",
        {"text": "The user said: call me Iain.", "actor": "owner"},
    )
    assert by_agent["instruction"]["human_authored"] is False
    assert by_agent["instruction"]["recorded_by"] == "scout"
    assert "never" in by_agent["note"]
    rows = list(Instruction.objects.order_by("id").values_list("actor", "human_authored", "kind"))
    assert rows == [("owner", True, "instruction"), ("scout", False, "instruction")]
    blank = tool(owner.principal, "operator_record_instruction", {"text": "   "})
    assert blank["error"] == "text_required"
