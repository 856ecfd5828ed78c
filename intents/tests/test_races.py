"""Races, proven on PostgreSQL: identical concurrent intents make one row and one notice; concurrent
transitions, approvals and the expiry sweep each let exactly one writer win."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.db import connection, transaction

from intents import approval
from intents.decisions import update_decision
from intents.lifecycle import ActionInput, expire_pending, record_intent, transition_intent
from intents.models import Decision, Intent, IntentEvent
from operator_site.models import Notification
from operator_site.refusals import Refusal
from tests.fixtures import asgi_http, call, orm

RACERS = 8


def race(fn: Callable[[int], Any], n: int = RACERS) -> list[Any]:
    """Run fn(i) on n threads released together; each result is a value or the exception raised."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = fn(i)
        except Exception as exc:  # the caller inspects what each racer got
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.mark.postgres
@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_eight_identical_calls_over_mcp_make_one_intent_and_one_notice(agent) -> None:
    for round_ in range(5):
        arguments = {
            "action": {"type": "spend", "title": f"Annual plan renewal {round_}", "amount_cents": 4900}
        }
        async with asgi_http(agent.token) as http:
            answers = await asyncio.gather(
                *(call(http, "operator_record_action_intent", arguments) for _ in range(RACERS))
            )
        ids = {answer["id"] for answer in answers}
        assert len(ids) == 1, answers
        assert sorted(answer["created"] for answer in answers) == [False] * (RACERS - 1) + [True]
        [intent_id] = ids
        assert (
            await orm(lambda t=round_: Intent.objects.filter(title=f"Annual plan renewal {t}").count()) == 1
        )
        assert await orm(lambda i=intent_id: Decision.objects.filter(intent_id=i).count()) == 1
        assert (
            await orm(lambda i=intent_id: Notification.objects.filter(dedupe_key=f"intent:{i}").count()) == 1
        )
    assert await orm(Intent.objects.count) == 5
    assert await orm(Notification.objects.count) == 5
    assert len(mail.outbox) == 5


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_identical_concurrent_records_many_rounds(agent) -> None:
    for round_ in range(20):
        action = ActionInput(type="email", title=f"Hello {round_}", recipient="bob@example.com")

        def record(_: int, action: ActionInput = action) -> tuple[int, bool]:
            with transaction.atomic():
                intent, created = record_intent(principal=agent.principal, action=action)
            return intent.id, created

        results = race(record)
        assert not [r for r in results if isinstance(r, Exception)], results
        assert len({intent_id for intent_id, _ in results}) == 1
        assert sum(created for _, created in results) == 1
    assert Intent.objects.count() == Decision.objects.count() == Notification.objects.count() == 20


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_transitions_let_exactly_one_win(agent) -> None:
    for round_ in range(10):
        with transaction.atomic():
            intent, _ = record_intent(
                principal=agent.principal, action=ActionInput(type="note", title=f"note {round_}")
            )

        def move(i: int, intent_id: int = intent.id) -> str:
            with transaction.atomic():
                moved, _ = transition_intent(
                    principal=agent.principal, intent_id=intent_id, to="executing" if i % 2 else "cancelled"
                )
            return moved.status

        results = race(move)
        winners = [r for r in results if isinstance(r, str)]
        assert len(winners) == 1, results
        assert all(
            isinstance(r, Refusal) and r.code in {"conflict", "terminal_status", "illegal_transition"}
            for r in results
            if not isinstance(r, str)
        )
        assert Intent.objects.get(pk=intent.id).status == winners[0]
        assert IntentEvent.objects.filter(intent_id=intent.id, event="transition").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_approvals_approve_once(agent, owner) -> None:
    user = owner.principal.user
    for round_ in range(5):
        with transaction.atomic():
            intent, _ = record_intent(
                principal=agent.principal,
                action=ActionInput(type="spend", title=f"plan {round_}", amount_cents=100),
            )

        decision_id = Decision.objects.get(intent=intent).id

        def decide(i: int, intent: Intent = intent, decision_id: int = decision_id) -> str:
            affordance = ["accept", "edit", "reject", "tool_reject"][i % 4]
            if affordance == "tool_reject":  # an agent rejecting through operator_update_decision
                decision, _ = update_decision(
                    principal=agent.principal, decision_id=decision_id, status="rejected"
                )
                return decision.status
            decided = approval.decide(
                intent.id, affordance, by=user, via="api", seen=intent.payload_digest, title=f"edited {i}"
            )
            return decided.status

        results = race(decide)
        winners = [r for r in results if isinstance(r, str)]
        assert len(winners) == 1, results
        assert all(isinstance(r, Refusal) for r in results if not isinstance(r, str)), results
        fresh = Intent.objects.get(pk=intent.id)
        decision = Decision.objects.get(intent=intent)
        assert fresh.status == winners[0] == decision.status
        assert IntentEvent.objects.filter(intent=intent, event__in=["approved", "transition"]).count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_approval_racing_the_expiry_sweep(agent, owner) -> None:
    user = owner.principal.user
    for round_ in range(5):
        with transaction.atomic():
            intent, _ = record_intent(
                principal=agent.principal,
                action=ActionInput(type="spend", title=f"sweep {round_}", amount_cents=100),
            )
        # the person approves just before the deadline while a sweep runs just after it
        before = intent.expires_at - timedelta(seconds=1)
        after = intent.expires_at

        def act(i: int, intent: Intent = intent, before: Any = before, after: Any = after) -> str:
            if i % 2:
                return "expired" if expire_pending(after) else "nothing"
            return approval.approve_intent(
                intent, by=user, seen=intent.payload_digest, via="admin", now=before
            ).status

        results = race(act, 4)
        final = Intent.objects.get(pk=intent.id).status
        assert final in {"approved", "expired"}
        assert results.count(final) == 1, results
        assert Decision.objects.get(intent=intent).status == final
