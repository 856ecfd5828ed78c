"""Version races with real threads on PostgreSQL (its READ COMMITTED is where a lost update would
show): 8 writers x 50 writes against the same version — zero lost updates, no forked lineage, every
loser told retry: true, one version per successful write. Each write goes through the dispatcher's
transaction code, exactly as a tools/call does."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from django.db import connection

from beliefs import services
from beliefs.models import Belief, WorldModelChange, WorldModelVersion
from beliefs.tests.helpers import run_tool
from operator_site.lookalikes import fold
from operator_site.models import ConfirmationUse

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WRITERS = 8
WRITES = 50


def _read_counter() -> tuple[int, int | None]:
    snapshot = services.world_model_snapshot(kind="note")
    notes = {b["key"]: b for b in snapshot["beliefs"]["note"]}
    counter = notes.get("counter")
    return snapshot["version"], int(counter["value"]) if counter else None


def _increment(principal: Any, version: int, value: int | None) -> dict[str, Any]:
    change = (
        {"op": "add", "kind": "note", "key": "counter", "value": "1"}
        if value is None
        else {"op": "update", "kind": "note", "key": "counter", "value": str(value + 1)}
    )
    return run_tool(
        principal, "operator_update_world_model", {"changes": [change], "expected_version": version}
    )


def _assert_one_straight_lineage(successes: int) -> None:
    chain = list(WorldModelVersion.objects.order_by("number").values_list("number", "supersedes"))
    assert chain == [(n, n - 1) for n in range(1, successes + 1)], "the lineage forked or has gaps"
    assert WorldModelVersion.objects.count() == successes
    previous = None
    for change in WorldModelChange.objects.filter(entity="note/counter").order_by("version_id"):
        assert change.before == previous, f"v{change.version_id} did not supersede what was there"
        previous = change.after
    assert int(Belief.objects.get(key="counter").value) == successes  # zero lost updates


def _run_writers(target: Any) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    return errors


def test_eight_writers_fifty_rounds_against_the_same_version(make_principal) -> None:
    writers = [make_principal(f"writer-{i}").principal for i in range(WRITERS)]
    barrier = threading.Barrier(WRITERS)
    outcomes: list[tuple[int, dict[str, Any]]] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        for _ in range(WRITES):
            version, value = _read_counter()
            barrier.wait(timeout=60)  # everyone has read the same version before anyone writes
            answer = _increment(writers[i], version, value)
            with lock:
                outcomes.append((version, answer))
            barrier.wait(timeout=60)  # the round is over for everyone

    assert _run_writers(writer) == []
    assert len(outcomes) == WRITERS * WRITES
    ok = [a for _, a in outcomes if a["ok"]]
    losers = [a for _, a in outcomes if not a["ok"]]
    assert len(ok) == WRITES  # exactly one winner per round
    assert all(a["retry"] is True and a["error"] == "version_conflict" for a in losers), Counter(
        a.get("error") for a in losers
    )
    assert all(a["current_version"] >= 1 for a in losers)
    per_round = Counter(version for version, a in outcomes if a["ok"])
    assert set(per_round.values()) == {1}
    _assert_one_straight_lineage(len(ok))


def test_eight_writers_fifty_successful_increments_each_with_retries(make_principal) -> None:
    writers = [make_principal(f"writer-{i}").principal for i in range(WRITERS)]
    retries = Counter()
    other = Counter()

    def writer(i: int) -> None:
        done = 0
        while done < WRITES:
            version, value = _read_counter()
            answer = _increment(writers[i], version, value)
            if answer["ok"]:
                done += 1
            elif answer.get("retry") is True:
                retries[i] += 1
            else:
                other[answer.get("error")] += 1
                return

    assert _run_writers(writer) == []
    assert not other, other
    assert sum(retries.values()) > 0, "no writer ever collided: the race was not exercised"
    _assert_one_straight_lineage(WRITERS * WRITES)
    counts = Counter(WorldModelVersion.objects.values_list("actor", flat=True))
    assert counts == {f"writer-{i}": WRITES for i in range(WRITERS)}


def test_one_instruction_cannot_authorise_the_same_key_twice_under_a_race(owner, make_principal) -> None:
    services.record_instruction(principal=owner.principal, text="My name is Iain from now on.")
    writers = [make_principal(f"writer-{i}").principal for i in range(WRITERS)]
    barrier = threading.Barrier(WRITERS)
    answers: list[dict[str, Any]] = []

    def writer(i: int) -> None:
        barrier.wait(timeout=60)
        answers.append(
            run_tool(
                writers[i],
                "operator_update_world_model",
                {
                    "changes": [{"op": "add", "kind": "identity", "key": "name", "value": "Iain"}],
                    "confirmedInConversation": True,
                    "confirmationQuote": "My name is Iain from now on.",
                },
            )
        )

    assert _run_writers(writer) == []
    assert sum(1 for a in answers if a["ok"]) == 1
    assert all(
        a.get("retry") or a["error"] in {"confirmation_reused", "belief_exists"}
        for a in answers
        if not a["ok"]
    )
    assert ConfirmationUse.objects.count() == 1
    assert WorldModelVersion.objects.count() == 1


def test_unpinned_writers_racing_take_turns_instead_of_colliding(make_principal) -> None:
    """Without expected_version the caller did not ask for a particular version: on PostgreSQL the
    writers of the model queue (advisory lock) before reading the version to extend, so 8 writers x
    25 rounds in lockstep all succeed, none told to retry."""
    rounds = 25
    writers = [make_principal(f"writer-{i}").principal for i in range(WRITERS)]
    barrier = threading.Barrier(WRITERS)
    answers: list[dict[str, Any]] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        for r in range(rounds):
            barrier.wait(timeout=60)  # all eight claim the same next version at once
            answer = run_tool(
                writers[i],
                "operator_update_world_model",
                {"changes": [{"op": "add", "kind": "note", "key": f"w{i}-r{r}", "value": "x"}]},
            )
            with lock:
                answers.append(answer)

    assert _run_writers(writer) == []
    assert Counter(a.get("error") for a in answers) == {None: WRITERS * rounds}
    chain = list(WorldModelVersion.objects.order_by("number").values_list("number", "supersedes"))
    assert chain == [(n, n - 1) for n in range(1, WRITERS * rounds + 1)], "the lineage forked or has gaps"
    assert Belief.objects.filter(kind="note").count() == WRITERS * rounds


# Eight spellings of "scope" that read the same (operator_site.lookalikes): plain, and with one or more
# Cyrillic letters in place of Latin ones — each a new key the door takes only word by word, so here
# they are whole Cyrillic words or plain. Written at once, exactly one may stand.
SCOPES = (
    "scope",
    "\u0455\u0441\u043e\u0440\u0435",  # all Cyrillic
    "scope one",
    "\u0455\u0441\u043e\u0440\u0435 one",
    "scope \u043e\u0441\u0435",  # reads as "scope oce"
    "scope oce",
    "\u0455\u0441\u043e\u0440\u0435 \u043e\u0441\u0435",
    "\u0455\u0441\u043e\u0440\u0435 oce",
)


def test_eight_writers_adding_keys_that_read_the_same_at_once_leave_one_of_each_reading(
    make_principal,
) -> None:
    """Each round, eight writers each add one spelling at once; only one key per reading may be
    active afterwards, and each loser is told it reads as the stored one or to retry (never written)."""
    writers = [make_principal(f"alike-{i}").principal for i in range(WRITERS)]
    barrier = threading.Barrier(WRITERS)
    outcomes: list[dict[str, Any]] = []
    lock = threading.Lock()
    rounds = 10

    def write(i: int) -> None:
        for r in range(rounds):
            barrier.wait(timeout=60)
            key = f"{SCOPES[i]} {r}"
            answer = run_tool(
                writers[i],
                "operator_update_world_model",
                {"changes": [{"op": "add", "kind": "note", "key": key, "value": "v"}]},
            )
            with lock:
                outcomes.append(answer)

    assert _run_writers(write) == []
    codes = Counter("ok" if a.get("ok") else a.get("error") for a in outcomes)
    assert set(codes) <= {"ok", "looks_like_existing", "version_conflict"}, codes
    # Per round, "scope", "scope one" and "scope oce" are the three readings: at most one key each.
    readings = Counter(
        fold(key) for key in Belief.objects.filter(status="active").values_list("key", flat=True)
    )
    assert readings and max(readings.values()) == 1, readings
    assert codes["ok"] == len(readings) == WorldModelVersion.objects.count()
