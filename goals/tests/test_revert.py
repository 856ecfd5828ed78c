"""operator_revert_goal_model, with the world model's rules: undo restores the exact pre-image of what
a change touched even after an interleaved writer changed other things; a later change of the same
entity is a conflict (refused, nothing written); an agent undoes only its own changes; a revert is
itself a version with lineage; every change and revert notifies the person, and no directive holds
those notices."""

from __future__ import annotations

import pytest
from django.core import mail

from goals import goal_model
from goals.models import Goal, GoalModelVersion, Project, Task
from goals.services import task_dict, update_task
from goals.tests.helpers import RECONCILE, REVERT, everything, ranking
from intents import directives
from operator_site import revert_links
from operator_site.models import Notification

pytestmark = pytest.mark.django_db


@pytest.fixture
def batch(make_principal):
    return make_principal("batch-worker", kind="agent")


@pytest.fixture
def base(add_goal):
    """v1 Run a marathon, v2 Learn Italian, v3 Write a novel — all the person's."""
    return [add_goal("Run a marathon"), add_goal("Learn Italian"), add_goal("Write a novel")]


def image(goal_id: int) -> dict:
    return goal_model.image_of(goal_model.GOAL, Goal.everything.get(pk=goal_id))


def test_undo_restores_the_exact_pre_image_after_an_interleaved_writer(
    agent, batch, goal_change, tool, base
) -> None:
    italian_before = image(base[1])
    paused = goal_change(agent, action="pause", goal="Learn Italian")
    assert paused["version"] == 4
    # Another writer, in between: a project (another entity) and a re-rank (the ranking entity).
    other = tool(
        batch.principal,
        RECONCILE,
        {"changes": [{"entity": "project", "op": "add", "fields": {"title": "Duolingo streak"}}]},
    )
    assert other["version"] == 5
    reranked = goal_change(action="rerank", goal="Write a novel", importance=1)
    assert reranked["version"] == 6
    ranking_after_6 = ranking()

    undone = tool(agent.principal, REVERT, {"actor": "owner"})
    assert undone["ok"] is True, undone
    assert (undone["version"], undone["supersedes"], undone["reverted_version"]) == (7, 6, 4)
    assert undone["operation"] == "undo"
    # Exactly what v4 superseded: status, title, detail, source, the version that set it, evidence.
    assert image(base[1]) == italian_before
    assert Project.objects.get().title == "Duolingo streak"  # v5 keeps its change
    assert ranking() == ranking_after_6  # v6 keeps its change
    assert GoalModelVersion.objects.get(number=7).actor == "scout"


def test_a_later_change_of_the_same_goal_is_a_conflict_and_nothing_is_written(
    agent, goal_change, tool, base
) -> None:
    goal_change(agent, action="pause", goal="Learn Italian")  # v4
    goal_change(action="resume", goal="Learn Italian")  # v5, by the person
    before = everything()
    refused = tool(agent.principal, REVERT, {})
    assert (refused["error"], refused["versions"]) == ("revert_conflict", [5])
    assert everything() == before


def test_undoing_an_add_conflicts_with_a_later_reranking(agent, goal_change, tool, base) -> None:
    goal_change(agent, action="add", title="Sleep more", importance=1)  # v4: ranking changed
    goal_change(action="add", title="Cook at home")  # v5: the ranking changed again
    refused = tool(agent.principal, REVERT, {})
    assert (refused["error"], refused["versions"]) == ("revert_conflict", [5])
    assert Goal.objects.filter(title="Sleep more").exists()


def test_undoing_an_add_leaves_a_tombstone_and_an_undo_of_the_undo_brings_it_back(
    owner, agent, goal_change, tool, base
) -> None:
    made = goal_change(agent, action="add", title="Sleep more", importance=1)
    new_id = made["goal"]["id"]
    task = update_task(
        principal=agent.principal, key="bedtime", patch={"title": "Bed at 11"}, goal=new_id
    ).task
    undone = tool(agent.principal, REVERT, {})
    assert undone["ok"] is True, undone
    assert ranking() == ["Run a marathon", "Learn Italian", "Write a novel"]
    assert not Goal.objects.filter(pk=new_id).exists()
    assert Goal.everything.get(pk=new_id).present is False  # the id is never reused
    task.refresh_from_db()
    assert task_dict(task)["goal"] == {"id": new_id, "title": "Sleep more", "status": "absent"}
    # The person undoes the undo: the goal, its rank and the task's link come back.
    redo = goal_model.REVERTER.undo(number=undone["version"], principal=owner.principal)
    assert redo["ok"] is True
    assert ranking()[0] == "Sleep more"
    task.refresh_from_db()
    assert task_dict(task)["goal"]["status"] == "active"
    later = goal_change(action="add", title="Stretch")
    assert later["goal"]["id"] > new_id


def test_undo_twice_undoes_two_changes_it_never_redoes(agent, goal_change, tool, base) -> None:
    goal_change(agent, action="pause", goal="Learn Italian")  # v4
    goal_change(agent, action="mark_under_review", goal="Run a marathon")  # v5
    first = tool(agent.principal, REVERT, {})
    second = tool(agent.principal, REVERT, {})
    assert (first["reverted_version"], second["reverted_version"]) == (5, 4)
    assert set(Goal.objects.values_list("status", flat=True)) == {"active"}
    third = tool(agent.principal, REVERT, {})
    assert third["error"] == "nothing_to_revert"


def test_an_agent_cannot_undo_the_persons_changes(agent, goal_change, tool, base) -> None:
    assert tool(agent.principal, REVERT, {})["error"] == "nothing_to_revert"
    goal_change(agent, action="pause", goal="Learn Italian")  # v4
    refused = tool(agent.principal, REVERT, {"to_version": 2})
    assert (refused["error"], refused["versions"]) == ("revert_not_own", [3])
    assert goal_model.current_version() == 4
    own = tool(agent.principal, REVERT, {"to_version": 3})
    assert own["ok"] is True and own["operation"] == "restore"
    assert Goal.objects.get(title="Learn Italian").status == "active"


def test_the_person_restores_a_version_as_a_whole(owner, goal_change, tool, base) -> None:
    goal_change(action="remove", goal="Run a marathon")
    goal_change(action="rerank", goal="Write a novel", importance=1)
    restored = tool(owner.principal, REVERT, {"to_version": 1, "expected_version": 5})
    assert restored["ok"] is True, restored
    assert (restored["restored_to"], restored["undid_versions"]) == (1, [2, 3, 4, 5])
    assert ranking() == ["Run a marathon"]
    assert Goal.everything.filter(present=False).count() == 2
    stale = tool(owner.principal, REVERT, {"to_version": 0, "expected_version": 5})
    assert stale["retry"] is True
    assert tool(owner.principal, REVERT, {"to_version": 99})["error"] == "version_not_found"
    empty = tool(owner.principal, REVERT, {"to_version": 0})
    assert empty["ok"] is True
    assert Goal.objects.count() == 0
    assert tool(owner.principal, REVERT, {"to_version": 0})["error"] == "nothing_to_revert"


def test_undoing_a_goal_a_later_project_links_to_is_refused(owner, agent, goal_change, tool, base) -> None:
    made = goal_change(agent, action="add", title="Sleep more")  # v4 (at the end: the ranking)
    tool(
        owner.principal,
        RECONCILE,
        {
            "changes": [
                {
                    "entity": "project",
                    "op": "add",
                    "fields": {"title": "Blackout blinds", "goal": "Sleep more"},
                }
            ]
        },
    )  # v5: a project that links to it (touches no entity of v4)
    before = everything()
    refused = tool(agent.principal, REVERT, {})
    assert refused["error"] == "revert_conflict"
    assert refused["projects"] == [Project.objects.get().pk]
    assert refused["versions"] == [5]
    assert everything() == before
    assert goal_model.REVERTER.describe_undo(4)["refusal"]["error"] == "revert_conflict"
    assert Goal.objects.filter(pk=made["goal"]["id"]).exists()


def test_every_change_and_revert_notifies_and_no_directive_holds_it(
    owner, agent, goal_change, tool, base, django_capture_on_commit_callbacks
) -> None:
    for kind, topic in (("quiet", None), ("focus", "taxes"), ("topic_mute", "goal model")):
        directives.set_directive(principal=owner.principal, kind=kind, topic=topic, minutes=60, reason="test")
    with django_capture_on_commit_callbacks(execute=True):
        changed = goal_change(agent, action="pause", goal="Learn Italian")
        reverted = tool(agent.principal, REVERT, {})
        project = tool(
            agent.principal,
            RECONCILE,
            {"changes": [{"entity": "project", "op": "add", "fields": {"title": "Low-stakes thing"}}]},
        )
    notices = {
        n.subject_id: n for n in Notification.objects.filter(subject_kind="goal_model", subject_id__gte=4)
    }
    assert set(notices) == {changed["version"], reverted["version"], project["version"]}
    assert notices[reverted["version"]].kind == "goal_model_revert"
    for version, notice in notices.items():
        notice.refresh_from_db()
        assert revert_links.revert_url(notice)
        if version == project["version"]:
            # Projects only: an ordinary notice, which directives may hold (spec, Notification).
            assert notice.safety is False
            assert notice.state == Notification.State.HELD
            continue
        assert notice.safety is True
        assert notice.state == Notification.State.DELIVERED, (notice.kind, notice.held_reason)
    bodies = [m.body for m in mail.outbox if "Goal model v" in m.subject]
    assert len(bodies) >= 2 and all("/revert/" in b for b in bodies)
    assert "status: paused → active" in notices[reverted["version"]].body


def test_the_one_tap_link_undoes_the_version_it_reports(owner, agent, goal_change) -> None:
    made = goal_change(agent, action="add", title="Run a marathon")
    notice = Notification.objects.get(id=made["notification"])
    handler = revert_links.revert_handler("goal_model")
    described = handler.describe(notice.subject_id)
    assert "Undo version 1" in described["title"]
    assert any(row["what"] == "goal ranking" for row in described["changes"])
    message = revert_links.revert_from_link(notice, by=owner.principal)
    assert "Undid version 1 of the goal model" in message
    assert Goal.objects.count() == 0
    assert GoalModelVersion.objects.get(number=2).principal_id == owner.principal.id


def test_tasks_keep_their_links_through_revert_and_are_not_versioned(agent, goal_change, base) -> None:
    update_task(principal=agent.principal, key="t", patch={"title": "T"}, goal="Run a marathon")
    assert goal_model.current_version() == 3  # the board is not part of the goal model's lineage
    assert Task.objects.get().goal.title == "Run a marathon"


# --- who undoes what ----------------------------------------------------------------------------------
def test_the_persons_undo_undoes_the_agents_last_change(owner, agent, goal_change, tool, base) -> None:
    goal_change(agent, action="pause", goal="Learn Italian")  # v4, the agent's
    undone = tool(owner.principal, REVERT, {})
    assert (undone["ok"], undone["reverted_version"]) == (True, 4), undone
    assert Goal.objects.get(title="Learn Italian").status == "active"
    # Then the person's own last change (v3, "Write a novel").
    assert tool(owner.principal, REVERT, {})["reverted_version"] == 3


def test_undo_then_restore_of_a_goal_change_by_an_agent_needs_fresh_evidence(
    owner, agent, goal_change, tool, base
) -> None:
    goal_change(agent, action="pause", goal="Learn Italian")  # v4
    assert tool(agent.principal, REVERT, {})["reverted_version"] == 4  # v5
    before = everything()
    replay = tool(agent.principal, REVERT, {"to_version": 4})
    assert replay["error"] == "reapply_needs_evidence", replay
    assert everything() == before
    # The person may put it back; an agent does it as a new change with the person's words.
    assert tool(owner.principal, REVERT, {"to_version": 4})["ok"] is True
    assert Goal.objects.get(title="Learn Italian").status == "paused"


def test_an_agent_may_replay_its_own_project_undo(agent, tool, base) -> None:
    project = {"changes": [{"entity": "project", "op": "add", "fields": {"title": "Duolingo streak"}}]}
    made = tool(agent.principal, RECONCILE, project)
    tool(agent.principal, REVERT, {})
    again = tool(agent.principal, REVERT, {"to_version": made["version"]})
    assert again["ok"] is True, again
    assert Project.objects.get().title == "Duolingo streak"
