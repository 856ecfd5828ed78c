"""operator_reconcile_goal_model: all-or-nothing across goals, priorities and projects; fail closed
on any missing or ambiguous target or link (nothing written, no version at all, every change's
resolution in the answer); a reconciliation that changes nothing writes no version; projects are
low-stakes, goals and priorities need the person's words."""

from __future__ import annotations

from typing import Any

import pytest

from goals import goal_model
from goals.models import Goal, GoalModelVersion, Priority, Project
from goals.tests.helpers import RECONCILE, everything, ranking
from operator_site.refusals import Refusal

pytestmark = pytest.mark.django_db


def change(entity: str, op: str, target: Any = None, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"entity": entity, "op": op, "fields": fields}
    if target is not None:
        out["target"] = target
    return out


@pytest.fixture
def reconcile(owner, say, tool):
    """Reconcile as `by` (default: the person), quoting `quote` after the person said `said`."""

    def run(changes: list[dict], by: Any = None, said: str | None = None, quote: str | None = None, **kw):
        if said:
            say(said)
        arguments: dict[str, Any] = {"changes": changes, **kw}
        if quote:
            arguments.update(confirmedInConversation=True, confirmationQuote=quote)
        return tool((by or owner).principal, RECONCILE, arguments)

    return run


@pytest.fixture
def model(reconcile):
    """v1: goals Run (1) and Read more (2), priority Health, project Couch to 5k for Run."""
    made = reconcile(
        [
            change("goal", "add", title="Run"),
            change("goal", "add", title="Read more"),
            change("priority", "add", name="Health"),
            change("project", "add", title="Couch to 5k", goal="Run"),
        ],
        said="Add the goal Run. Add the goal Read more. Health is my priority.",
        quote="Add the goal Run. Add the goal Read more. Health is my priority.",
    )
    assert made["ok"] is True, made
    assert made["version"] == 1
    return made


def test_one_reconciliation_is_one_version_with_links_to_goals_added_in_it(model) -> None:
    assert ranking() == ["Run", "Read more"]
    project = Project.objects.get()
    assert project.goal.title == "Run"
    assert [r["outcome"] for r in model["resolution"]] == ["new", "new", "new", "new"]
    assert model["resolution"][3]["links"]["goal"] == {
        "target": "Run",
        "outcome": "resolved",
        "id": project.goal_id,
    }
    assert GoalModelVersion.objects.get().high_stakes is True
    entities = sorted(c["entity"] for c in model["changes"])
    assert entities == ["goal", "goal", "goal_ranking", "priority", "priority_order", "project"]


def test_projects_alone_are_low_stakes_and_apply_freely(agent, reconcile, model) -> None:
    made = reconcile(
        [
            change("project", "update", "couch to 5K", status="done"),
            change("project", "add", title="Library card"),
        ],
        by=agent,
    )
    assert made["ok"] is True, made
    assert made["high_stakes"] is False
    assert made["evidence"] is None
    assert made["notification"] is not None  # every goal-model change notifies, whatever its stakes
    assert sorted(Project.objects.values_list("title", "status")) == [
        ("Couch to 5k", "done"),
        ("Library card", "active"),
    ]


def test_a_goal_in_the_mix_needs_the_persons_words(agent, reconcile, model) -> None:
    before = everything()
    refused = reconcile(
        [change("project", "add", title="Library card"), change("goal", "pause", "Read more")], by=agent
    )
    assert refused["error"] == "confirmation_required"
    assert everything() == before


def test_the_third_of_three_changes_failing_applies_none_of_them(agent, reconcile, model) -> None:
    before = everything()
    refused = reconcile(
        [
            change("project", "add", title="Library card", goal="Read more"),
            change("goal", "rerank", "Read more", importance=1),
            change("goal", "resume", "Run"),  # Run is active: an invalid transition
        ],
        by=agent,
        said="read more first; and carry on running",
        quote="read more first; and carry on running",
    )
    assert (refused["error"], refused["index"], refused["status"]) == ("invalid_transition", 2, "active")
    assert everything() == before
    assert ranking() == ["Run", "Read more"]
    assert goal_model.current_version() == 1


def test_a_failure_at_commit_time_also_leaves_nothing(agent, reconcile, model) -> None:
    """The third change only fails when the evidence is spent (the instruction already authorised a
    change of that goal), after the first two were planned."""
    reconcile(
        [change("goal", "pause", "Read more")],
        said="pause read more until spring",
        quote="pause read more until spring",
    )
    before = everything()
    refused = reconcile(
        [
            change("project", "add", title="Library card"),
            change("priority", "update", "Health", detail="sleep, food, running"),
            change("goal", "resume", "Read more"),
        ],
        by=agent,
        quote="pause read more until spring",
    )
    assert refused["error"] in {"confirmation_reused", "confirmation_unbound"}
    assert everything() == before


def test_two_goals_titled_run_fail_closed_listing_every_resolution(reconcile, model) -> None:
    reconcile(
        [change("goal", "add", title="RUN")], said="add run as a goal again", quote="add run as a goal again"
    )
    goals = list(Goal.objects.filter(title__iexact="run").order_by("id").values_list("id", flat=True))
    before = everything()
    refused = reconcile(
        [
            change("project", "add", title="Park run", goal="run"),
            change("goal", "pause", "Run"),
            change("goal", "rerank", "Read more", importance=1),
        ],
        said="pause Run and read more first",
        quote="pause Run and read more first",
    )
    assert refused["ok"] is False
    assert refused["error"] == "ambiguous_target"
    assert refused["failed"] == [0, 1]
    resolution = refused["resolution"]
    assert resolution[0]["outcome"] == "new"
    assert resolution[0]["links"]["goal"]["outcome"] == "ambiguous"
    assert [c["id"] for c in resolution[0]["links"]["goal"]["candidates"]] == goals
    assert resolution[1]["outcome"] == "ambiguous"
    assert [c["id"] for c in resolution[1]["candidates"]] == goals
    assert resolution[2] == {
        "index": 2,
        "entity": "goal",
        "op": "rerank",
        "target": "Read more",
        "outcome": "resolved",
        "id": Goal.objects.get(title="Read more").id,
    }
    assert everything() == before
    assert goal_model.current_version() == 2


def test_a_missing_project_fails_closed_and_nothing_is_touched(agent, reconcile, model) -> None:
    before = everything()
    refused = reconcile(
        [
            change("project", "add", title="Library card"),
            change("project", "update", "Couch to 10k", status="done"),
            change("project", "remove", 999),
        ],
        by=agent,
    )
    assert refused["error"] == "target_not_found"
    assert refused["failed"] == [1, 2]
    assert refused["resolution"][1]["outcome"] == "missing"
    assert [c["title"] for c in refused["resolution"][1]["candidates"]] == ["Couch to 5k"]
    assert refused["resolution"][2] == {
        "index": 2,
        "entity": "project",
        "op": "remove",
        "target": 999,
        "outcome": "missing",
        "candidates": [],
    }
    assert "no project 'Couch to 10k'" in refused["reason"]
    assert everything() == before
    assert goal_model.current_version() == 1


def test_a_reconciliation_that_changes_nothing_writes_no_version(agent, reconcile, model) -> None:
    before = everything()
    same = reconcile(
        [
            change("project", "update", "Couch to 5k", title="Couch to 5k", goal="Run"),
            change("goal", "update", "Run", title="Run"),
            change("goal", "rerank", "Read more", importance=2),
            change("priority", "move", "health", position=1),
        ],
        by=agent,  # no confirmation needed: nothing high-stakes changes
    )
    assert same["ok"] is True, same
    assert (same["written"], same["version"], same["changes"]) == (False, 1, [])
    assert [r["changed"] for r in same["resolution"]] == [False, False, False, False]
    assert everything() == before


def test_priorities_are_ordered_and_move(reconcile, model) -> None:
    made = reconcile(
        [
            change("priority", "add", name="Family", position=1),
            change("priority", "add", name="Craft"),
        ],
        said="Family comes first. Then craft.",
        quote="Family comes first. Then craft.",
    )
    assert made["ok"] is True, made
    assert [p["name"] for p in goal_model.ordered_priorities()] == ["Family", "Health", "Craft"]
    reconcile(
        [change("priority", "move", "Craft", position=1), change("priority", "remove", "Family")],
        said="Craft first now. Drop family from the list.",
        quote="Craft first now. Drop family from the list.",
    )
    assert [(p["name"], p["position"]) for p in goal_model.ordered_priorities()] == [
        ("Craft", 1),
        ("Health", 2),
    ]
    assert Priority.everything.get(name="Family").position is None


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (change("goal", "add"), "fields.title"),
        (change("goal", "pause", "Run", title="x"), "fields.title"),
        (change("goal", "add", "Run", title="x"), "target"),
        (change("project", "update", "Couch to 5k"), "fields"),
        (change("project", "update", "Couch to 5k", status="removed"), "fields.status"),
        (change("project", "add", title="   "), "fields.title"),
        (change("priority", "move", "Health", position=0), "fields.position"),
        (change("goal", "rerank", "Run", importance="1"), "fields.importance"),
        (change("goal", "pause"), "target"),
    ],
)
def test_malformed_changes_are_refused_naming_the_change(agent, model, bad, field) -> None:
    """The shape is the published schema's (goals/goal_model/schemas.py): at the MCP door such a call
    is `invalid_arguments` (goals/tests/test_change_schemas.py); the service, given dicts, refuses
    it the same way, naming the change and the field."""
    before = everything()
    with pytest.raises(Refusal) as refused:
        goal_model.reconcile_goal_model(
            principal=agent.principal, changes=[change("project", "add", title="Fine"), bad]
        )
    assert refused.value.code == "invalid_change"
    assert (refused.value.extra["index"], refused.value.extra["field"]) == (1, field)
    assert refused.value.reason.startswith(f"Change 2 ({bad['entity']} {bad['op']}): {field}: ")
    assert everything() == before


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        (change("priority", "move", "Health", position=2), "invalid_position"),
        (change("goal", "rerank", "Run", importance=3), "invalid_importance"),
        (change("goal", "add", title="Third", importance=4), "invalid_importance"),
    ],
)
def test_a_rank_past_the_end_of_the_order_is_refused(agent, reconcile, model, bad, code) -> None:
    """What depends on the state stays with planning: a rank within the order as it stands."""
    before = everything()
    refused = reconcile([change("project", "add", title="Fine"), bad], by=agent)
    assert refused["error"] == code, refused
    assert refused["index"] == 1
    assert everything() == before


def test_a_project_cannot_link_to_a_removed_goal(reconcile, model) -> None:
    reconcile(
        [change("goal", "remove", "Read more")],
        said="drop read more entirely",
        quote="drop read more entirely",
    )
    refused = reconcile([change("project", "add", title="Book club", goal="Read more")])
    assert refused["error"] == "invalid_link"


def test_one_item_twice_in_one_call_is_ambiguous(reconcile, model) -> None:
    refused = reconcile(
        [change("goal", "pause", "Run"), change("goal", "resume", Goal.objects.get(title="Run").pk)],
        said="pause run then resume run",
        quote="pause run then resume run",
    )
    assert refused["error"] == "duplicate_target", refused
    assert refused["indices"] == [0, 1]


def test_a_change_naming_an_item_added_further_down_finds_nothing(reconcile, model) -> None:
    refused = reconcile(
        [
            change("project", "add", title="Zine", goal="Make zines"),
            change("goal", "add", title="Make zines"),
        ],
        said="make zines is a new goal",
        quote="make zines is a new goal",
    )
    assert refused["error"] == "target_not_found"
    assert refused["failed"] == [0]


def test_the_snapshot_reads_the_model_now_and_as_of_a_version(reconcile, model) -> None:
    reconcile(
        [change("goal", "remove", "Run")], said="remove run from my goals", quote="remove run from my goals"
    )
    now = goal_model.goal_model_snapshot()
    assert [g["title"] for g in now["goals"]] == ["Read more"]
    then = goal_model.goal_model_snapshot(as_of_version=1)
    assert [(g["title"], g["importance"]) for g in then["goals"]] == [("Run", 1), ("Read more", 2)]
    assert then["projects"][0]["goal"]["title"] == "Run"
    assert [p["name"] for p in then["priorities"]] == ["Health"]
    removed = goal_model.goal_model_snapshot(include_removed=True)
    assert [(g["title"], g["status"]) for g in removed["goals"]] == [
        ("Read more", "active"),
        ("Run", "removed"),
    ]
