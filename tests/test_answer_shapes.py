"""The declared answer shapes (`<app>/answers.py` of beliefs, goals, intents and runs) are what the
tools answer: the real tools over the in-process MCP client, and every answer's keys exactly its
shape's keys, so a shape and the function that builds it cannot drift apart."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from beliefs.answers import BeliefAnswer, InstructionAnswer, SourceAnswer
from goals.answers import (
    DecisionLogAnswer,
    GoalAnswer,
    LinkAnswer,
    PriorityAnswer,
    ProjectAnswer,
    TaskAnswer,
)
from intents.answers import (
    DecisionAnswer,
    DirectiveAnswer,
    ExecutionAnswer,
    IntentAnswer,
    RecordedIntentAnswer,
)
from intents.models import Intent
from runs.answers import (
    DayAnswer,
    EndedRunAnswer,
    FencedObservations,
    ObservationAnswer,
    ProgressAnswer,
    RunningRunAnswer,
    RunStatusAnswer,
    TickAnswer,
)
from runs.records import fenced_observations
from tests.fixtures import mcp_client, orm, tool_json

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

SHAPES = (
    DirectiveAnswer,
    IntentAnswer,
    RecordedIntentAnswer,
    ExecutionAnswer,
    DecisionAnswer,
    DayAnswer,
    RunningRunAnswer,
    EndedRunAnswer,
    RunStatusAnswer,
    ProgressAnswer,
    ObservationAnswer,
    FencedObservations,
    TickAnswer,
)


def declared(shape: Any) -> set[str]:
    return set(shape.__required_keys__ | shape.__optional_keys__)


class Checked:
    def __init__(self) -> None:
        self.seen: set[Any] = set()

    def __call__(self, answer: Any, shape: Any, where: str) -> None:
        assert isinstance(answer, dict), f"{where}: {answer!r}"
        extra, missing = set(answer) - declared(shape), declared(shape) - set(answer)
        assert not extra and not missing, f"{where} ({shape.__name__}): extra {extra}, missing {missing}"
        self.seen.add(shape)


async def test_every_answer_has_exactly_the_keys_of_its_declared_shape(agent) -> None:
    check = Checked()
    async with mcp_client(agent.token) as client:

        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            answer = tool_json(await client.call_tool(name, arguments))
            assert answer.get("ok") is not False, (name, answer)
            return answer

        # Directives.
        answer = await call("operator_set_directive", {"kind": "topic_mute", "topic": "news", "minutes": 30})
        check(answer["directive"], DirectiveAnswer, "operator_set_directive")
        answer = await call("operator_list_directives", {})
        check(answer["directives"][0], DirectiveAnswer, "operator_list_directives")
        answer = await call("operator_clear_directive", {"all": True})
        check(answer["cleared"][0], DirectiveAnswer, "operator_clear_directive")

        # Intents and decisions: one awaiting approval (rejected through its decision), one queued and
        # carried out as far as an agent may (no executor: no execution), one the executor claimed.
        spend = {"action": {"type": "spend", "title": "Renew the plan", "amount_cents": 1200}}
        recorded = await call("operator_record_action_intent", spend)
        check({k: v for k, v in recorded.items() if k != "ok"}, RecordedIntentAnswer, "record (new)")
        again = await call("operator_record_action_intent", spend)
        assert again["created"] is False
        check({k: v for k, v in again.items() if k != "ok"}, RecordedIntentAnswer, "record (existing)")
        answer = await call("operator_update_decision", {"id": recorded["decision_id"], "status": "parked"})
        check(answer["decision"], DecisionAnswer, "operator_update_decision")
        check(answer["intent"], IntentAnswer, "operator_update_decision (its intent)")
        note = await call("operator_record_action_intent", {"action": {"type": "note", "title": "Jot"}})
        answer = await call("operator_update_action_intent", {"id": note["id"], "to": "cancelled"})
        check(answer["intent"], IntentAnswer, "operator_update_action_intent")
        assert answer["intent"]["execution"] is None

        claimed = await call("operator_record_action_intent", {"action": {"type": "note", "title": "Later"}})
        await orm(
            lambda: Intent.objects.filter(pk=claimed["id"]).update(
                claims=1, execution_result={"ok": False, "called": False, "error": "no_handler"}
            )
        )
        answer = await call("operator_update_action_intent", {"id": claimed["id"], "to": "cancelled"})
        check(answer["intent"]["execution"], ExecutionAnswer, "an intent's execution")

        # Runs.
        started = await call("operator_run_start", {"kind": "shape", "stale_after_s": 60})
        check(started["run"], RunningRunAnswer, "operator_run_start")
        status = await call("operator_tick", {"mode": "status"})
        check(status["runs"], RunStatusAnswer, "operator_tick status (runs)")
        check(status["runs"]["running"], RunningRunAnswer, "operator_tick status (running)")
        finished = await call(
            "operator_run_finish", {"run_id": started["run_id"], "token": started["token"], "status": "ok"}
        )
        check(finished["run"], EndedRunAnswer, "operator_run_finish")

        # The day and its record.
        answer = await call(
            "operator_record_progress", {"summary": "did it", "outcome": "done", "tried": ["a"], "failed": []}
        )
        check(answer["progress"], ProgressAnswer, "operator_record_progress")
        answer = await call(
            "operator_record_observation", {"kind": "world", "summary": "rain", "data": {"mm": 3}}
        )
        check(answer["observation"], ObservationAnswer, "operator_record_observation")
        checked_in = await call("operator_tick", {"mode": "check-in"})
        check(checked_in["tick"], TickAnswer, "operator_tick check-in")
        check(checked_in["progress"], ProgressAnswer, "operator_tick check-in (progress)")
        night = await call("operator_tick", {"mode": "night"})
        check(night["day"], DayAnswer, "operator_tick night")
        check(night["tick"], TickAnswer, "operator_tick night (tick)")
        status = await call("operator_tick", {"mode": "status", "date": timezone.localdate().isoformat()})
        check(status["day"], DayAnswer, "operator_tick status (day)")
        check(status["runs"]["last_finished"], EndedRunAnswer, "operator_tick status (last finished)")

    # No tool answers the fenced section on its own; the reads embed it.
    fenced = await orm(lambda: fenced_observations(limit=5))
    check(fenced, FencedObservations, "fenced_observations")
    check(fenced["items"][0], ObservationAnswer, "fenced_observations (an item)")

    assert check.seen == set(SHAPES), f"shapes never checked: {set(SHAPES) - check.seen}"


async def test_beliefs_and_goals_answers_have_exactly_their_declared_keys(owner) -> None:
    """The same check for the beliefs and goals apps' shapes (the person's token: goal-model and
    high-stakes writes need the person's words, which this test does not stage)."""
    check = Checked()
    async with mcp_client(owner.token) as client:

        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            answer = tool_json(await client.call_tool(name, arguments))
            assert answer.get("ok") is not False, (name, answer)
            return answer

        said = await call("operator_record_instruction", {"text": "Call me Sam.", "kind": "instruction"})
        check(said["instruction"], InstructionAnswer, "operator_record_instruction")
        await call(
            "operator_update_world_model",
            {"changes": [{"op": "add", "kind": "preference", "key": "tea", "value": "green"}]},
        )
        world = await call("operator_user_world_model", {})
        beliefs = [b for items in world["beliefs"].values() for b in items]
        assert beliefs, world
        check(beliefs[0], BeliefAnswer, "operator_user_world_model")
        check(beliefs[0]["source"], SourceAnswer, "a belief's source")

        words = "I want to run a marathon. Health first."
        await call("operator_record_instruction", {"text": words, "kind": "instruction"})
        await call(
            "operator_reconcile_goal_model",
            {
                "changes": [
                    {"entity": "goal", "op": "add", "fields": {"title": "Run a marathon", "importance": 1}},
                    {"entity": "priority", "op": "add", "fields": {"name": "Health first", "position": 1}},
                    {
                        "entity": "project",
                        "op": "add",
                        "fields": {"title": "Marathon plan", "goal": "Run a marathon"},
                    },
                ],
                "confirmedInConversation": True,
                "confirmationQuote": words,
            },
        )
        task = await call("operator_update_task", {"key": "shoes", "patch": {"title": "Buy shoes"}})
        check(task["task"], TaskAnswer, "operator_update_task")
        entry = await call(
            "operator_log_decision",
            {"title": "Shoes", "decision": "buy", "rationale": "worn out", "alternatives": ["wait"]},
        )
        check(entry["entry"], DecisionLogAnswer, "operator_log_decision")
        packet = await call("operator_context_packet", {})
        goals = packet["goals"]
        check(goals["active"]["items"][0], GoalAnswer, "the packet's goals")
        check(goals["priorities"]["items"][0], PriorityAnswer, "the packet's priorities")
        check(goals["projects"]["items"][0], ProjectAnswer, "the packet's projects")
        check(goals["projects"]["items"][0]["goal"], LinkAnswer, "a project's goal")
    assert check.seen == {
        InstructionAnswer,
        BeliefAnswer,
        SourceAnswer,
        TaskAnswer,
        DecisionLogAnswer,
        GoalAnswer,
        PriorityAnswer,
        ProjectAnswer,
        LinkAnswer,
    }
