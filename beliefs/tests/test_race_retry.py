"""The dispatcher's retry of a lost, unpinned version race (VersionConflict.retry_here), made
deterministic: the first attempt reads a stale current version (as a writer does that read just
before another one committed), so its claim collides with the existing version row."""

from __future__ import annotations

from typing import Any

import pytest

from beliefs.models import Belief, WorldModelVersion
from beliefs.services import WORLD_MODEL
from beliefs.tests.helpers import add, run_tool
from operator_site.face import dispatch
from operator_site.lineage import Lineage
from operator_site.models import AuditEvent

pytestmark = pytest.mark.django_db(transaction=True)


class StaleReads:
    """Makes the next `n` reads of the current version answer one version too low."""

    def __init__(self) -> None:
        self.left = 0

    def next(self, n: int) -> None:
        self.left = n


@pytest.fixture
def stale_reads(monkeypatch: Any) -> StaleReads:
    real = Lineage.current_version
    reads = StaleReads()

    def current_version(self: Lineage) -> int:
        value = real(self)
        if reads.left and value > 0:
            reads.left -= 1
            return value - 1
        return value

    monkeypatch.setattr(Lineage, "current_version", current_version)
    return reads


def test_a_lost_unpinned_claim_is_run_again_and_succeeds(agent: Any, stale_reads: StaleReads) -> None:
    assert run_tool(agent.principal, "operator_update_world_model", {"changes": [add("note", "a", "1")]})[
        "ok"
    ]
    stale_reads.next(1)
    answer = run_tool(agent.principal, "operator_update_world_model", {"changes": [add("note", "b", "2")]})
    assert answer["ok"] is True, answer
    assert answer["version"] == 2 and answer["supersedes"] == 1
    assert list(WorldModelVersion.objects.values_list("number", "supersedes").order_by("number")) == [
        (1, 0),
        (2, 1),
    ]
    assert set(Belief.objects.values_list("key", flat=True)) == {"a", "b"}
    # One call, one audit row, whatever happened inside it.
    assert AuditEvent.objects.filter(tool="operator_update_world_model").count() == 2


def test_a_pinned_conflict_goes_back_to_the_caller(agent: Any, stale_reads: StaleReads) -> None:
    run_tool(agent.principal, "operator_update_world_model", {"changes": [add("note", "a", "1")]})
    answer = run_tool(
        agent.principal,
        "operator_update_world_model",
        {"changes": [add("note", "b", "2")], "expected_version": 0},
    )
    assert answer["ok"] is False and answer["error"] == "version_conflict" and answer["retry"] is True
    assert not Belief.objects.filter(key="b").exists()


def test_the_retries_are_bounded(agent: Any, stale_reads: StaleReads, monkeypatch: Any) -> None:
    run_tool(agent.principal, "operator_update_world_model", {"changes": [add("note", "a", "1")]})
    attempts = []
    real_attempt = dispatch._attempt_in_transaction

    def counted(*args: Any) -> Any:
        attempts.append(1)
        return real_attempt(*args)

    monkeypatch.setattr(dispatch, "_attempt_in_transaction", counted)
    stale_reads.next(10**6)  # every attempt reads a stale version: the race is lost every time
    answer = run_tool(agent.principal, "operator_update_world_model", {"changes": [add("note", "b", "2")]})
    assert answer["ok"] is False and answer["error"] == "version_conflict" and answer["retry"] is True
    assert not Belief.objects.filter(key="b").exists()
    assert WorldModelVersion.objects.count() == 1
    assert len(attempts) == dispatch.VERSION_RACE_ATTEMPTS
    stale_reads.next(0)
    assert WORLD_MODEL.current_version() == 1
    # Each attempt is rolled back whole; the call leaves one audit row (refused).
    assert list(
        AuditEvent.objects.filter(tool="operator_update_world_model").values_list("outcome", flat=True)
    ) == [
        "refused",
        "ok",
    ]
