"""Goal-model version races with real threads on PostgreSQL (its READ COMMITTED is where a lost
update or a forked lineage would show). Every write goes through the dispatcher's transaction code,
exactly as a tools/call does: several writers against the same version — no lost update, no forked
lineage, every loser told retry: true with nothing of its call written (no version, no row, no spent
evidence)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from django.db import connection

from beliefs import services as beliefs_services
from beliefs.tests.helpers import run_tool
from goals import goal_model
from goals.models import Goal, GoalModelChange, GoalModelVersion, Project
from goals.tests.helpers import APPLY, RECONCILE, ranks
from operator_site.models import ConfirmationUse

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITERS = 8


def _run_writers(target: Any, writers: int = WRITERS) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:  # surfaced by the caller's assertion
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    return errors


def _assert_one_straight_lineage(successes: int) -> None:
    chain = list(GoalModelVersion.objects.order_by("number").values_list("number", "supersedes"))
    assert chain == [(n, n - 1) for n in range(1, successes + 1)], "the lineage forked or has gaps"
    # Every change row's pre-image is exactly the post-image the previous version left.
    last: dict[str, Any] = {}
    for change in GoalModelChange.objects.order_by("version_id", "entity"):
        assert change.before == last.get(change.entity), f"v{change.version_id} {change.entity}"
        last[change.entity] = change.after


def _read_counter() -> tuple[int, int]:
    snapshot = goal_model.goal_model_snapshot()
    [project] = [p for p in snapshot["projects"] if p["title"] == "counter"]
    return snapshot["version"], int(project["detail"])


def test_writers_in_lockstep_against_the_same_version_lose_no_update(owner, make_principal) -> None:
    rounds = 25
    made = run_tool(
        owner.principal,
        RECONCILE,
        {"changes": [{"entity": "project", "op": "add", "fields": {"title": "counter", "detail": "0"}}]},
    )
    assert made["ok"] is True, made
    writers = [make_principal(f"writer-{i}").principal for i in range(WRITERS)]
    barrier = threading.Barrier(WRITERS)
    outcomes: list[tuple[int, dict[str, Any]]] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        for _ in range(rounds):
            version, value = _read_counter()
            barrier.wait(timeout=60)  # everyone has read the same version before anyone writes
            answer = run_tool(
                writers[i],
                RECONCILE,
                {
                    "changes": [
                        {
                            "entity": "project",
                            "op": "update",
                            "target": "counter",
                            "fields": {"detail": str(value + 1)},
                        }
                    ],
                    "expected_version": version,
                },
            )
            with lock:
                outcomes.append((version, answer))
            barrier.wait(timeout=60)

    assert _run_writers(writer) == []
    ok = [a for _, a in outcomes if a["ok"]]
    losers = [a for _, a in outcomes if not a["ok"]]
    assert len(ok) == rounds  # exactly one winner per round
    assert set(Counter(v for v, a in outcomes if a["ok"]).values()) == {1}
    assert all(a["retry"] is True and a["error"] == "version_conflict" for a in losers), Counter(
        a.get("error") for a in losers
    )
    _assert_one_straight_lineage(rounds + 1)
    assert Project.objects.get(title="counter").detail == str(rounds)  # zero lost updates
    assert Project.everything.count() == 1


def test_concurrent_gated_reranks_one_winner_per_version_and_no_spent_evidence_for_losers(
    owner, make_principal
) -> None:
    for i in range(WRITERS):
        said = f"add the goal project {i} to my list please"
        beliefs_services.record_instruction(principal=owner.principal, text=said)
        assert run_tool(
            owner.principal,
            APPLY,
            {
                "action": "add",
                "title": f"project {i}",
                "confirmedInConversation": True,
                "confirmationQuote": said,
            },
        )["ok"]
    writers = [make_principal(f"writer-{i}").principal for i in range(WRITERS)]
    rounds = 6
    quotes = {}
    for r in range(rounds):
        for i in range(WRITERS):
            quotes[(r, i)] = f"round {r}: put project {i} first for me"
            beliefs_services.record_instruction(principal=owner.principal, text=quotes[(r, i)])
    barrier = threading.Barrier(WRITERS)
    answers: list[tuple[int, dict[str, Any]]] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        for r in range(rounds):
            version = goal_model.current_version()
            barrier.wait(timeout=60)
            answer = run_tool(
                writers[i],
                APPLY,
                {
                    "action": "rerank",
                    "goal": f"project {i}",
                    "importance": 1,
                    "confirmedInConversation": True,
                    "confirmationQuote": quotes[(r, i)],
                    "expected_version": version,
                },
            )
            with lock:
                answers.append((r, answer))
            barrier.wait(timeout=60)

    assert _run_writers(writer) == []
    wins = [a for _, a in answers if a["ok"]]
    others = [a for _, a in answers if not a["ok"]]
    # At most one winner per round; everyone else is told to retry (or, while the model is still at
    # the version they read, that their goal is already first: nothing changed).
    assert set(Counter(r for r, a in answers if a["ok"]).values()) <= {1}
    assert all(a.get("retry") is True or a["error"] == "nothing_changed" for a in others), Counter(
        a.get("error") for a in others
    )
    assert len(wins) == rounds  # seven of the eight would change the ranking: someone wins each round
    _assert_one_straight_lineage(WRITERS + len(wins))
    assert ranks() == list(range(1, WRITERS + 1))
    spent = ConfirmationUse.objects.filter(scope="goal_model", span__startswith="round")
    assert spent.count() == len(wins)  # a loser's evidence is not spent
    assert Goal.everything.count() == WRITERS


def test_concurrent_adds_with_retries_keep_ranks_dense_and_unique(owner, make_principal) -> None:
    adds = 4
    writers = [make_principal(f"writer-{i}").principal for i in range(WRITERS)]
    for i in range(WRITERS):
        for j in range(adds):
            beliefs_services.record_instruction(
                principal=owner.principal,
                text=f"add the goal writer {i} step {j} to the top of my list please",
            )
    barrier = threading.Barrier(WRITERS)
    retries: Counter = Counter()
    other: Counter = Counter()

    def writer(i: int) -> None:
        for j in range(adds):
            barrier.wait(timeout=60)  # everyone starts the round on the same version
            while True:
                answer = run_tool(
                    writers[i],
                    APPLY,
                    {
                        "action": "add",
                        "title": f"writer {i} step {j}",
                        "importance": 1,
                        "confirmedInConversation": True,
                        "confirmationQuote": f"add the goal writer {i} step {j} to the top of my list please",
                    },
                )
                if answer["ok"]:
                    break
                if answer.get("retry") is True:
                    retries[i] += 1
                    continue
                other[answer.get("error")] += 1
                return

    assert _run_writers(writer) == []
    assert not other, other
    # The writers start every round together on the same version, unpinned: they queue on the
    # model's advisory lock, so none collides and no retry reaches a caller.
    assert sum(retries.values()) == 0, retries
    total = WRITERS * adds
    _assert_one_straight_lineage(total)
    assert ranks() == list(range(1, total + 1))
    assert Goal.everything.count() == total  # no tombstone left behind by a loser
    assert Counter(GoalModelVersion.objects.values_list("actor", flat=True)) == {
        f"writer-{i}": adds for i in range(WRITERS)
    }
    goal_model.verify_consistency()
