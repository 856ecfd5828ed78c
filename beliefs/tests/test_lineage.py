"""Lineage: each write records the exact version it superseded and the exact pre-image of what it
changed, so an undo restores the true pre-change state even when another writer bumped the version
in between — not "the latest version minus one". Plus the conflict case, restores, who may undo
what, and the database constraints that keep the lineage from forking."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from beliefs import services
from beliefs.models import Belief, WorldModelChange, WorldModelVersion
from beliefs.tests.helpers import add, retire, update
from operator_site.lineage import Draft
from operator_site.models import AppendOnlyError, Notification
from operator_site.refusals import Refusal, VersionConflict

pytestmark = pytest.mark.django_db

UPDATE = "operator_update_world_model"
REVERT = "operator_revert_world_model"


def belief(kind: str, key: str) -> Belief:
    return Belief.objects.get(kind=kind, key=key)


def images() -> dict[str, dict]:
    return {b.entity: services.image_of(b) for b in Belief.objects.all()}


@pytest.fixture
def batch(make_principal):
    return make_principal("batch-worker", kind="agent")


@pytest.fixture
def x_at_v1(owner, say, tool):
    """v1: the person sets identity/name = Ian, with evidence (so the pre-image has an evidence link)."""
    say("For the record my name is Ian.")
    made = tool(
        owner.principal,
        UPDATE,
        {
            "changes": [add("identity", "name", "Ian", confidence=0.9)],
            "confirmedInConversation": True,
            "confirmationQuote": "For the record my name is Ian.",
        },
    )
    assert made["version"] == 1
    return services.image_of(belief("identity", "name"))


def test_undo_restores_the_exact_pre_image_even_after_an_interleaving_bump(
    x_at_v1, agent, batch, say, tool
) -> None:
    # A: the agent changes x (v1 → v2).
    say("Actually my name is Iain with two i's.")
    a = tool(
        agent.principal,
        UPDATE,
        {
            "changes": [update("identity", "name", "Iain", confidence=0.6)],
            "confirmedInConversation": True,
            "confirmationQuote": "Actually my name is Iain with two i's.",
            "expected_version": 1,
        },
    )
    assert (a["version"], a["supersedes"]) == (2, 1)
    # Another writer changes y (v2 → v3).
    b = tool(batch.principal, UPDATE, {"changes": [add("preference", "tea", "green, no milk")]})
    assert (b["version"], b["supersedes"]) == (3, 2)
    y_after_b = services.image_of(belief("preference", "tea"))

    # Undo A: x is back to its exact pre-image (value, confidence, source, version, evidence), y keeps B.
    undo = tool(agent.principal, REVERT, {})
    assert undo["ok"] is True, undo
    assert (undo["version"], undo["supersedes"], undo["reverted_version"]) == (4, 3, 2)
    assert services.image_of(belief("identity", "name")) == x_at_v1
    assert services.image_of(belief("preference", "tea")) == y_after_b
    # The naive "state of the highest superseded version" (v3 minus one = v2's state, or v1 whole)
    # would have been wrong either way:
    assert services.WORLD_MODEL.state_as_of(2)["identity/name"]["value"] == "Iain"
    assert "preference/tea" not in services.WORLD_MODEL.state_as_of(1)
    version = WorldModelVersion.objects.get(number=4)
    assert (version.operation, version.reverts_id, version.principal_id) == ("undo", 2, agent.principal.id)
    change = WorldModelChange.objects.get(version=4)
    assert change.entity == "identity/name"
    assert change.after == x_at_v1
    assert change.before["value"] == "Iain"
    # Reverting a high-stakes change notifies too.
    notice = Notification.objects.get(id=undo["notification"])
    assert (notice.kind, notice.safety, notice.subject_id) == ("world_model_revert", True, 4)


def test_undo_refuses_when_a_later_version_changed_the_same_belief(x_at_v1, agent, owner, say, tool) -> None:
    say("my name is Iain now")
    a = tool(
        agent.principal,
        UPDATE,
        {
            "changes": [update("identity", "name", "Iain")],
            "confirmedInConversation": True,
            "confirmationQuote": "my name is Iain now",
        },
    )
    say("Wait, my name is Iain Mac later on.")
    b = tool(
        owner.principal,
        UPDATE,
        {
            "changes": [update("identity", "name", "Iain Mac")],
            "confirmedInConversation": True,
            "confirmationQuote": "Wait, my name is Iain Mac later on.",
        },
    )
    assert (a["version"], b["version"]) == (2, 3)
    before = images()
    answer = tool(agent.principal, REVERT, {})
    assert answer["ok"] is False
    assert answer["error"] == "revert_conflict"
    assert answer["versions"] == [3]
    assert answer["version"] == 2
    assert WorldModelVersion.objects.count() == 3
    assert images() == before


def test_default_revert_undoes_only_the_callers_own_changes(x_at_v1, agent, batch, tool) -> None:
    # The agent has written nothing: it cannot use revert to undo the person's change.
    answer = tool(agent.principal, REVERT, {})
    assert answer["error"] == "nothing_to_revert"
    assert belief("identity", "name").value == "Ian"
    # The batch worker's change is not the agent's either.
    tool(batch.principal, UPDATE, {"changes": [add("note", "parking", "level 2")]})
    assert tool(agent.principal, REVERT, {})["error"] == "nothing_to_revert"
    assert belief("note", "parking").value == "level 2"
    # Its own change, though, it can undo — and the batch worker's change stays.
    tool(agent.principal, UPDATE, {"changes": [add("note", "gym", "tuesdays")]})
    assert tool(agent.principal, REVERT, {})["ok"] is True
    assert not Belief.objects.filter(key="gym").exists()
    assert belief("note", "parking").value == "level 2"


def test_reverting_twice_undoes_two_changes_it_does_not_redo(agent, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "a", "first")]})
    tool(agent.principal, UPDATE, {"changes": [update("note", "a", "second")]})
    assert tool(agent.principal, REVERT, {})["reverted_version"] == 2
    assert belief("note", "a").value == "first"
    assert tool(agent.principal, REVERT, {})["reverted_version"] == 1
    assert not Belief.objects.filter(key="a").exists()
    assert tool(agent.principal, REVERT, {})["error"] == "nothing_to_revert"
    assert [v.operation for v in WorldModelVersion.objects.order_by("number")] == [
        "change",
        "change",
        "undo",
        "undo",
    ]


def test_restore_to_a_version_brings_back_the_whole_model(x_at_v1, owner, agent, batch, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "a", "one"), add("risk", "r", "burnout")]})
    snapshot_v2 = images()
    tool(batch.principal, UPDATE, {"changes": [update("note", "a", "two"), add("project", "p", "garden")]})
    tool(agent.principal, UPDATE, {"changes": [retire("risk", "r")]})
    assert services.WORLD_MODEL.current_version() == 4
    answer = tool(owner.principal, REVERT, {"to_version": 2})
    assert answer["ok"] is True, answer
    assert (answer["operation"], answer["restored_to"], answer["undid_versions"]) == ("restore", 2, [3, 4])
    assert images() == snapshot_v2
    assert services.WORLD_MODEL.state_as_of(5) == services.WORLD_MODEL.state_as_of(2)
    # Only low-stakes beliefs moved: no notice.
    assert answer["notification"] is None
    # The whole way back to the empty model, and nothing left to do after.
    assert tool(owner.principal, REVERT, {"to_version": 0})["ok"] is True
    assert Belief.objects.count() == 0
    assert tool(owner.principal, REVERT, {"to_version": 0})["error"] == "nothing_to_revert"
    assert tool(owner.principal, REVERT, {"to_version": 99})["error"] == "version_not_found"


def test_an_agent_cannot_restore_over_someone_elses_change(x_at_v1, owner, agent, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "a", "one")]})  # v2, the agent's
    answer = tool(agent.principal, REVERT, {"to_version": 0})  # would also undo the person's v1
    assert answer["error"] == "revert_not_own"
    assert answer["versions"] == [1]
    assert Belief.objects.count() == 2
    # Going back over only its own versions is fine.
    assert tool(agent.principal, REVERT, {"to_version": 1})["ok"] is True
    assert list(Belief.objects.values_list("key", flat=True)) == ["name"]


def test_a_restored_over_change_is_no_longer_the_callers_last_change(agent, owner, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "a", "one")]})  # v1
    tool(agent.principal, UPDATE, {"changes": [add("note", "b", "two")]})  # v2
    tool(owner.principal, REVERT, {"to_version": 1})  # v3: b gone
    assert services.WORLD_MODEL.is_reverted(WorldModelVersion.objects.get(number=2))
    answer = tool(agent.principal, REVERT, {})
    assert answer["reverted_version"] == 1
    assert Belief.objects.count() == 0


def test_as_of_version_and_the_lineage_chain(x_at_v1, agent, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "a", "one")]})
    tool(agent.principal, UPDATE, {"changes": [update("note", "a", "two")]})
    tool(agent.principal, REVERT, {})
    snap = tool(agent.principal, "operator_user_world_model", {"as_of_version": 3})
    assert snap["version"] == 4
    assert snap["beliefs"]["note"][0]["value"] == "two"
    assert tool(agent.principal, "operator_user_world_model", {})["beliefs"]["note"][0]["value"] == "one"
    chain = list(WorldModelVersion.objects.order_by("number").values_list("number", "supersedes"))
    assert chain == [(1, 0), (2, 1), (3, 2), (4, 3)]
    # Every change's pre-image is the post-image of the previous change of the same entity.
    for entity in WorldModelChange.objects.values_list("entity", flat=True).distinct():
        previous = None
        for change in services.WORLD_MODEL.history(entity):
            assert change.before == previous
            previous = change.after
        assert previous == services.WORLD_MODEL.store.snapshot(entity)


def test_undoing_an_undo_is_a_human_act_from_the_admin_side(agent, owner, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "a", "one")]})
    tool(agent.principal, REVERT, {})
    with pytest.raises(Refusal) as not_own:
        services.REVERTER.undo(number=2, principal=owner.principal, expected_version=1)
    assert not_own.value.code == "version_conflict"
    redo = services.REVERTER.undo(number=2, principal=owner.principal, expected_version=2)
    assert redo["reverted_version"] == 2
    assert belief("note", "a").value == "one"
    with pytest.raises(Refusal) as twice:
        services.REVERTER.undo(number=2, principal=owner.principal)
    assert twice.value.code == "already_reverted"
    # An agent cannot undo a version that is not its own, whatever the path.
    with pytest.raises(Refusal) as agent_refused:
        services.REVERTER.undo(number=3, principal=agent.principal)
    assert agent_refused.value.code == "revert_not_own"


# --- version races, without threads (the PostgreSQL tests race them for real) -----------------------
def test_a_stale_expected_version_answers_retry_and_writes_nothing(agent, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "a", "one")]})
    answer = tool(agent.principal, UPDATE, {"changes": [add("note", "b", "two")], "expected_version": 0})
    assert answer == {
        "ok": False,
        "error": "version_conflict",
        "reason": answer["reason"],
        "retry": True,
        "current_version": 1,
        "expected_version": 0,
    }
    assert not Belief.objects.filter(key="b").exists()
    revert = tool(agent.principal, REVERT, {"expected_version": 5})
    assert (revert["retry"], revert["current_version"]) == (True, 1)
    assert belief("note", "a").value == "one"


def test_losing_the_claim_on_a_version_is_retry_and_rolls_back_everything(agent, owner) -> None:
    """A writer that read version 0 and tries to extend it after another writer did: the UNIQUE
    supersedes/number turns the insert into a VersionConflict, and nothing it wrote survives."""
    with transaction.atomic():
        services.update_world_model(principal=owner.principal, changes=[add("note", "a", "one")])
    with pytest.raises(VersionConflict) as conflict, transaction.atomic():
        services.WORLD_MODEL.commit(
            Draft(base=0),
            principal=agent.principal,
            images={"note/b": {**services.image_of(belief("note", "a")), "key": "b"}},
        )
    assert conflict.value.as_result()["retry"] is True
    assert conflict.value.extra["current_version"] == 1
    assert WorldModelVersion.objects.count() == 1
    assert not Belief.objects.filter(key="b").exists()


def test_the_database_refuses_a_forked_or_gapped_lineage(agent) -> None:
    WorldModelVersion.objects.create(number=1, supersedes=0, principal=agent.principal, actor="scout")
    with pytest.raises(IntegrityError), transaction.atomic():  # a second child of version 0
        WorldModelVersion.objects.create(number=2, supersedes=0, principal=agent.principal, actor="scout")
    with pytest.raises(IntegrityError), transaction.atomic():  # a gap
        WorldModelVersion.objects.create(number=5, supersedes=3, principal=agent.principal, actor="scout")
    with pytest.raises(IntegrityError), transaction.atomic():  # an undo without what it undoes
        WorldModelVersion.objects.create(
            number=2, supersedes=1, principal=agent.principal, actor="scout", operation="undo"
        )


def test_versions_and_changes_are_append_only(agent, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "a", "one")]})
    version = WorldModelVersion.objects.get()
    version.summary = "rewritten"
    with pytest.raises(AppendOnlyError):
        version.save()
    with pytest.raises(AppendOnlyError):
        WorldModelVersion.objects.update(summary="x")
    with pytest.raises(AppendOnlyError):
        WorldModelChange.objects.all().delete()


# --- who undoes what: the person undoes the last change anyone made, an agent only its own ---------
def test_the_persons_undo_undoes_the_last_change_whoever_made_it(
    x_at_v1, owner, agent, batch, say, tool
) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "gym", "tuesdays")]})  # v2, the agent's
    tool(batch.principal, UPDATE, {"changes": [add("note", "parking", "level 2")]})  # v3, the batch's
    first = tool(owner.principal, REVERT, {})
    assert (first["ok"], first["reverted_version"]) == (True, 3)
    assert not Belief.objects.filter(key="parking").exists()
    second = tool(owner.principal, REVERT, {})
    assert second["reverted_version"] == 2
    assert not Belief.objects.filter(key="gym").exists()
    third = tool(owner.principal, REVERT, {})  # then the person's own first change
    assert third["reverted_version"] == 1
    assert Belief.objects.count() == 0
    refused = tool(owner.principal, REVERT, {})
    assert refused["error"] == "nothing_to_revert"
    assert "agent" not in refused["reason"]


def test_the_persons_undo_of_an_agents_high_stakes_change_is_loud(x_at_v1, owner, agent, say, tool) -> None:
    say("Actually my name is Iain with two i's.")
    changed = tool(
        agent.principal,
        UPDATE,
        {
            "changes": [update("identity", "name", "Iain")],
            "confirmedInConversation": True,
            "confirmationQuote": "Actually my name is Iain with two i's.",
        },
    )
    assert changed["ok"] is True, changed
    undone = tool(owner.principal, REVERT, {})
    assert (undone["ok"], undone["reverted_version"], undone["high_stakes"]) == (True, 2, True)
    assert belief("identity", "name").value == "Ian"
    assert Notification.objects.get(id=undone["notification"]).safety is True


def test_an_agents_undo_never_reaches_across_anyone_elses_change(x_at_v1, owner, agent, batch, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "gym", "tuesdays")]})  # v2
    tool(batch.principal, UPDATE, {"changes": [update("note", "gym", "fridays")]})  # v3 on the same belief
    before = images()
    refused = tool(agent.principal, REVERT, {})
    assert (refused["error"], refused["versions"]) == ("revert_conflict", [3])
    assert images() == before
    # Its undo skips the others' later changes of other beliefs and undoes only its own.
    tool(agent.principal, UPDATE, {"changes": [add("note", "tea", "green")]})  # v4
    tool(batch.principal, UPDATE, {"changes": [add("note", "coffee", "black")]})  # v5
    undone = tool(agent.principal, REVERT, {})
    assert undone["reverted_version"] == 4
    assert belief("note", "coffee").value == "black"


def _agent_sets_name(tool, agent, say, value: str, sentence: str) -> dict:
    say(sentence)
    return tool(
        agent.principal,
        UPDATE,
        {
            "changes": [update("identity", "name", value)],
            "confirmedInConversation": True,
            "confirmationQuote": sentence,
        },
    )


def test_undo_then_restore_by_an_agent_needs_fresh_evidence(x_at_v1, owner, agent, say, tool) -> None:
    changed = _agent_sets_name(tool, agent, say, "Iain", "My name is Iain from today.")
    assert changed["version"] == 2
    assert tool(agent.principal, REVERT, {})["reverted_version"] == 2  # v3: back to Ian
    before = (images(), WorldModelVersion.objects.count(), Notification.objects.count())
    replay = tool(agent.principal, REVERT, {"to_version": 2})  # would undo v3: Iain again
    assert replay["error"] == "reapply_needs_evidence", replay
    assert replay["entities"] == ["identity/name"]
    assert (images(), WorldModelVersion.objects.count(), Notification.objects.count()) == before
    # With fresh words, as a new write, it is fine.
    again = _agent_sets_name(tool, agent, say, "Iain", "Yes, my name is Iain, put it back.")
    assert again["ok"] is True, again
    assert belief("identity", "name").value == "Iain"


def test_the_person_may_restore_an_undone_high_stakes_change_freely(x_at_v1, owner, agent, say, tool) -> None:
    _agent_sets_name(tool, agent, say, "Iain", "My name is Iain from today.")  # v2
    tool(agent.principal, REVERT, {})  # v3
    restored = tool(owner.principal, REVERT, {"to_version": 2})
    assert restored["ok"] is True, restored
    assert belief("identity", "name").value == "Iain"


def test_an_agent_may_replay_its_own_low_stakes_undo(agent, tool) -> None:
    tool(agent.principal, UPDATE, {"changes": [add("note", "a", "one")]})  # v1
    tool(agent.principal, REVERT, {})  # v2
    assert tool(agent.principal, REVERT, {"to_version": 1})["ok"] is True
    assert belief("note", "a").value == "one"
