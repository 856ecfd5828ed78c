"""operator_apply_goal_change: each action, each invalid transition, dense and unique ranks, target
resolution (by id, by a title matching exactly one goal; ambiguous and missing refused with the
candidates and nothing touched), and the confirmation rule (one test per refusal code)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from goals import goal_model
from goals.models import Goal, GoalModelChange, GoalModelVersion
from goals.tests.helpers import APPLY, everything, ranking, ranks
from operator_site.models import ConfirmationUse, Notification

pytestmark = pytest.mark.django_db


@pytest.fixture
def three(add_goal):
    """Run a marathon (1), Learn Italian (2), Write a novel (3): versions 1-3."""
    return {
        "run": add_goal("Run a marathon"),
        "italian": add_goal("Learn Italian"),
        "novel": add_goal("Write a novel"),
    }


def status(goal_id: int) -> str:
    return Goal.everything.get(pk=goal_id).status


# --- each action -------------------------------------------------------------------------------------
def test_add_appends_by_default_and_inserts_at_an_importance(goal_change, three) -> None:
    assert ranking() == ["Run a marathon", "Learn Italian", "Write a novel"]
    made = goal_change(action="add", title="Sleep eight hours", detail="lights out at 11", importance=2)
    assert made["ok"] is True, made
    assert made["goal"]["importance"] == 2
    assert made["goal"]["detail"] == "lights out at 11"
    assert made["goal"]["source"] == {"principal": "owner", "kind": "human"}
    assert ranking() == ["Run a marathon", "Sleep eight hours", "Learn Italian", "Write a novel"]
    assert ranks() == [1, 2, 3, 4]
    assert [g["title"] for g in made["ranking"]] == ranking()
    assert (made["version"], made["supersedes"]) == (4, 3)
    version = GoalModelVersion.objects.get(number=4)
    # The version records the new goal's exact post-image and the ranking it superseded.
    changes = {c.entity: c for c in GoalModelChange.objects.filter(version=version)}
    assert changes[f"goal/{made['goal']['id']}"].before is None
    assert changes["ranking/goals"].before == {"order": [three["run"], three["italian"], three["novel"]]}
    assert changes["ranking/goals"].after["order"][1] == made["goal"]["id"]


def test_pause_resume_review_and_remove(goal_change, three) -> None:
    run = three["run"]
    paused = goal_change(action="pause", goal=run)
    assert paused["ok"] is True, paused
    assert paused["goal"]["status"] == "paused"
    assert paused["goal"]["importance"] == 1  # a paused goal keeps its rank
    assert goal_change(action="resume", goal="run A MARATHON")["goal"]["status"] == "active"
    assert goal_change(action="mark_under_review", goal=run)["goal"]["status"] == "under_review"
    assert goal_change(action="resume", goal=run)["goal"]["status"] == "active"
    goal_change(action="mark_under_review", goal=run)
    assert goal_change(action="pause", goal=run)["goal"]["status"] == "paused"
    removed = goal_change(action="remove", goal=run)
    assert removed["goal"]["status"] == "removed"
    assert removed["goal"]["importance"] is None  # removed goals are not ranked
    assert ranking() == ["Learn Italian", "Write a novel"]
    assert ranks() == [1, 2]
    assert GoalModelVersion.objects.count() == 3 + 7


def test_rerank_keeps_ranks_dense_and_unique(goal_change, three) -> None:
    moved = goal_change(action="rerank", goal="Write a novel", importance=1)
    assert moved["ok"] is True, moved
    assert ranking() == ["Write a novel", "Run a marathon", "Learn Italian"]
    goal_change(action="rerank", goal=three["novel"], importance=3)
    assert ranking() == ["Run a marathon", "Learn Italian", "Write a novel"]
    goal_change(action="pause", goal=three["italian"])
    goal_change(action="rerank", goal=three["italian"], importance=1)  # a paused goal can be re-ranked
    assert ranking() == ["Learn Italian", "Run a marathon", "Write a novel"]
    assert ranks() == [1, 2, 3]
    assert [g["title"] for g in goal_model.ranked_goals()] == ["Run a marathon", "Write a novel"]
    assert [g["importance"] for g in goal_model.ranked_goals()] == [2, 3]


def test_moving_every_rank_asks_the_same_statements_however_long_the_ranking(goal_change, add_goal) -> None:
    """The last goal re-ranked to the top moves every goal's rank; the new ranks are written in one
    statement, not one per goal, so a longer ranking costs no more round trips."""

    def statements_of_moving_the_last_to_the_top() -> int:
        last = ranking()[-1]
        with CaptureQueriesContext(connection) as seen:
            assert goal_change(action="rerank", goal=last, importance=1)["ok"] is True
        assert ranking()[0] == last
        assert ranks() == list(range(1, len(ranks()) + 1))
        return len(seen.captured_queries)

    for title in ("One", "Two", "Three"):
        add_goal(title)
    short = statements_of_moving_the_last_to_the_top()
    for n in range(4, 16):
        add_goal(f"Goal {n}")
    assert len(ranking()) == 15
    assert statements_of_moving_the_last_to_the_top() == short


@pytest.mark.parametrize(
    ("arguments", "code", "maximum"),
    [
        ({"action": "rerank", "goal": "Run a marathon", "importance": 4}, "invalid_importance", 3),
        ({"action": "add", "title": "Fifth", "importance": 5}, "invalid_importance", 4),
    ],
)
def test_an_importance_out_of_range_is_refused(goal_change, three, arguments, code, maximum) -> None:
    before = everything()
    refused = goal_change(**arguments)
    assert (refused["ok"], refused["error"], refused["maximum"]) == (False, code, maximum)
    assert everything() == before
    assert goal_model.current_version() == 3


def test_a_rerank_to_its_own_place_changes_nothing(goal_change, three) -> None:
    refused = goal_change(action="rerank", goal="Run a marathon", importance=1)
    assert refused["error"] == "nothing_changed"
    assert goal_model.current_version() == 3


def test_the_rank_is_unique_in_the_database_too(three) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Goal.everything.filter(pk=three["novel"]).update(importance=1)


# --- invalid transitions -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("setup", "action", "current"),
    [
        ([], "resume", "active"),
        (["pause"], "pause", "paused"),
        (["mark_under_review"], "mark_under_review", "under_review"),
        (["remove"], "pause", "removed"),
        (["remove"], "resume", "removed"),
        (["remove"], "mark_under_review", "removed"),
        (["remove"], "remove", "removed"),
        (["remove"], "rerank", "removed"),
    ],
)
def test_invalid_transitions_are_refused_with_the_current_status(
    goal_change, three, setup, action, current
) -> None:
    run = three["run"]
    for step in setup:
        assert goal_change(action=step, goal=run)["ok"] is True
    before = everything()
    arguments = {"importance": 1} if action == "rerank" else {}
    refused = goal_change(action=action, goal=run, **arguments)
    assert refused["ok"] is False
    assert refused["error"] == "invalid_transition"
    assert refused["status"] == current
    assert f"is {current}" in refused["reason"]
    after = everything()
    assert after["goals"] == before["goals"] and after["versions"] == before["versions"]


def test_a_removed_goal_is_still_found_by_title_when_no_live_goal_has_it(goal_change, three) -> None:
    goal_change(action="remove", goal="Learn Italian")
    refused = goal_change(action="pause", goal="learn italian")
    assert (refused["error"], refused["status"]) == ("invalid_transition", "removed")
    # A new live goal with the same title is the one a title names from now on.
    again = goal_change(action="add", title="Learn Italian")
    assert goal_change(action="pause", goal="Learn Italian")["goal"]["id"] == again["goal"]["id"]


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"action": "pause"}, "goal_required"),
        ({"action": "add"}, "title_required"),
        ({"action": "add", "title": "X", "goal": 1}, "unexpected_argument"),
        ({"action": "pause", "goal": 1, "title": "X"}, "unexpected_argument"),
        ({"action": "pause", "goal": 1, "importance": 2}, "unexpected_argument"),
        ({"action": "rerank", "goal": 1}, "importance_required"),
    ],
)
def test_malformed_changes_are_refused(owner, tool, three, arguments, code) -> None:
    before = everything()
    refused = tool(owner.principal, APPLY, arguments)
    assert (refused["ok"], refused["error"]) == (False, code)
    assert everything() == before


# --- resolution: fail closed -------------------------------------------------------------------------
def test_two_goals_titled_run_are_ambiguous_and_nothing_is_touched(add_goal, goal_change) -> None:
    first = add_goal("Run")
    second = add_goal("run ", detail="the other one")
    before = everything()
    refused = goal_change(action="pause", goal="RUN", about="Run")
    assert (refused["ok"], refused["error"]) == (False, "ambiguous_target")
    assert [c["id"] for c in refused["candidates"]] == [first, second]
    assert refused["candidates"][0] == {"id": first, "title": "Run", "status": "active", "importance": 1}
    after = everything()
    # The refusal spent no evidence and wrote no goal, version, change or notice (only the person's
    # new instruction row exists, outside the goal model).
    assert after == before
    assert goal_model.current_version() == 2
    # By id it is unambiguous.
    assert goal_change(action="pause", goal=second, about="Run")["goal"]["id"] == second


RUN_A_CYRILLIC = "Run \u0430 marathon"  # a one-letter Cyrillic word: one script, so past the door
SCOPE_CYRILLIC = "\u0455\u0441\u043e\u0440\u0435 it"  # a whole Cyrillic word: reads as "scope it"


@pytest.mark.parametrize(
    ("titles", "named"),
    [
        (("Run a marathon", RUN_A_CYRILLIC), "Run a marathon"),
        (("Run a marathon", RUN_A_CYRILLIC), RUN_A_CYRILLIC),
        ((SCOPE_CYRILLIC, "Scope it"), "scope it"),
    ],
)
def test_a_title_that_reads_as_another_is_ambiguous_never_silently_one(
    add_goal, goal_change, titles, named
) -> None:
    """A look-alike twin (operator_site.lookalikes) makes either title ambiguous, as an exact
    duplicate does: the agent must name one by id, and is shown both."""
    ids = [add_goal(title) for title in titles]
    before = everything()
    refused = goal_change(action="pause", goal=named, about=named)
    assert (refused["ok"], refused["error"]) == (False, "ambiguous_target")
    assert sorted(c["id"] for c in refused["candidates"]) == sorted(ids)
    assert everything() == before


def test_a_missing_goal_is_refused_with_close_candidates(goal_change, three) -> None:
    before = everything()
    refused = goal_change(action="pause", goal="Run marathon")
    assert refused["error"] == "target_not_found"
    assert [c["title"] for c in refused["candidates"]] == ["Run a marathon"]
    by_id = goal_change(action="pause", goal=999, about="Run")
    assert by_id["error"] == "target_not_found"
    assert everything() == before


# --- confirmation evidence: one test per refusal code (the rule is the world model's) ---------------
def test_confirmation_required(agent, tool, three) -> None:
    before = everything()
    refused = tool(
        agent.principal, APPLY, {"action": "pause", "goal": "Learn Italian", "confirmedInConversation": True}
    )
    assert refused["error"] == "confirmation_required"
    assert refused["missing"] == ["a confirmationQuote"]
    assert everything() == before


def test_confirmation_not_found_for_an_agents_own_words(agent, tool, say, three) -> None:
    say("pause Learn Italian for a while please", by=agent)
    refused = tool(
        agent.principal,
        APPLY,
        {
            "action": "pause",
            "goal": "Learn Italian",
            "confirmedInConversation": True,
            "confirmationQuote": "pause Learn Italian for a while",
        },
    )
    assert refused["error"] == "confirmation_not_found"
    assert status(three["italian"]) == "active"


def test_confirmation_stale(agent, tool, say, three) -> None:
    say("pause Learn Italian for a while please", hours_ago=100)
    refused = tool(
        agent.principal,
        APPLY,
        {
            "action": "pause",
            "goal": "Learn Italian",
            "confirmedInConversation": True,
            "confirmationQuote": "pause Learn Italian for a while",
        },
    )
    assert refused["error"] == "confirmation_stale"
    assert status(three["italian"]) == "active"


def test_confirmation_unbound_when_the_quote_names_another_goal(agent, tool, say, three) -> None:
    say("please pause the marathon training for now")
    refused = tool(
        agent.principal,
        APPLY,
        {
            "action": "pause",
            "goal": "Learn Italian",
            "confirmedInConversation": True,
            "confirmationQuote": "please pause the marathon training for now",
        },
    )
    assert (refused["error"], refused["subject"]) == ("confirmation_unbound", f"goal/{three['italian']}")
    assert refused["missing"]["target"] == ["learn", "italian"]
    assert status(three["italian"]) == "active"


def test_confirmation_reused_one_instruction_changes_a_goal_once(agent, tool, say, three) -> None:
    say("Put the Learn Italian goal on hold and resume it in May.")
    arguments = {
        "goal": "Learn Italian",
        "confirmedInConversation": True,
        "confirmationQuote": "Put the Learn Italian goal on hold and resume it in May.",
    }
    made = tool(agent.principal, APPLY, {"action": "pause", **arguments})
    assert made["ok"] is True, made
    assert made["evidence"]["span"] == "Put the Learn Italian goal on hold and resume it in May."
    assert made["high_stakes"] is True
    uses = ConfirmationUse.objects.filter(scope="goal_model", instruction__text__startswith="Put the Learn")
    assert list(uses.values_list("subject", "version")) == [(f"goal/{three['italian']}", made["version"])]
    refused = tool(agent.principal, APPLY, {"action": "resume", **arguments})
    assert refused["error"] == "confirmation_reused"
    assert status(three["italian"]) == "paused"


def test_an_add_spends_the_instruction_on_the_title_too(agent, tool, say, goal_change) -> None:
    say("I want to climb Kilimanjaro, add it to my goals.")
    arguments = {
        "action": "add",
        "title": "Climb Kilimanjaro",
        "confirmedInConversation": True,
        "confirmationQuote": "I want to climb Kilimanjaro, add it to my goals.",
    }
    assert tool(agent.principal, APPLY, arguments)["ok"] is True
    assert tool(agent.principal, APPLY, arguments)["error"] == "confirmation_reused"
    assert Goal.objects.count() == 1


def test_evidence_and_the_notice_are_recorded_with_the_change(agent, tool, say, three) -> None:
    said = say("Honestly, to write a novel is the most important thing to me this year.")
    made = tool(
        agent.principal,
        APPLY,
        {
            "action": "rerank",
            "goal": "write a novel",
            "importance": 1,
            "confirmedInConversation": True,
            "confirmationQuote": "Honestly, to write a novel is the most important thing to me this year.",
            "actor": "owner",
        },
    )
    assert made["ok"] is True, made
    version = GoalModelVersion.objects.get(number=made["version"])
    assert (version.actor, version.high_stakes, version.evidence_instruction_id) == ("scout", True, said.id)
    assert (
        version.evidence["span"] == "Honestly, to write a novel is the most important thing to me this year."
    )
    notice = Notification.objects.get(id=made["notification"])
    assert (notice.kind, notice.safety, notice.subject_kind, notice.subject_id) == (
        "goal_model_change",
        True,
        "goal_model",
        made["version"],
    )
    assert "goal ranking" in notice.body
    assert "1. Write a novel" in notice.body
    assert "to write a novel is the most important thing" in notice.body
