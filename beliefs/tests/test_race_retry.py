"""A lost version race, made deterministic on either database: the call reads a stale current
version (as a writer does that read just before another one committed), so its claim collides with
the existing version row, and the documented {ok: false, retry: true} (docs/lineage.md) comes back
with nothing written."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from beliefs.models import Belief, WorldModelVersion
from beliefs.services import WORLD_MODEL
from beliefs.tests.helpers import add, run_tool, update
from operator_site.lineage import Draft, Lineage
from operator_site.models import AuditEvent

pytestmark = pytest.mark.django_db(transaction=True)


class StaleReads:
    """Makes the next `n` reads of a write's base version answer one version too low."""

    def __init__(self) -> None:
        self.left = 0

    def next(self, n: int) -> None:
        self.left = n


@pytest.fixture
def stale_reads(monkeypatch: Any) -> StaleReads:
    real = Lineage.read_base
    reads = StaleReads()

    def read_base(self: Lineage, entities: Any = (), alike: Any = ()) -> Draft:
        draft = real(self, entities, alike)
        if reads.left and draft.base > 0:
            reads.left -= 1
            return dataclasses.replace(draft, base=draft.base - 1)
        return draft

    monkeypatch.setattr(Lineage, "read_base", read_base)
    return reads


def test_a_lost_claim_surfaces_as_retry_with_nothing_written(agent: Any, stale_reads: StaleReads) -> None:
    first = run_tool(agent.principal, "operator_update_world_model", {"changes": [add("note", "a", "1")]})
    assert first["ok"] is True
    stale_reads.next(10**6)  # this call reads version 0 although version 1 exists: its claim collides
    answer = run_tool(agent.principal, "operator_update_world_model", {"changes": [add("note", "b", "2")]})
    assert answer["ok"] is False and answer["error"] == "version_conflict" and answer["retry"] is True
    assert answer["based_on"] == 0
    stale_reads.next(0)
    assert not Belief.objects.filter(key="b").exists()
    assert list(WorldModelVersion.objects.values_list("number", "supersedes")) == [(1, 0)]
    assert WORLD_MODEL.current_version() == 1
    # The loser's whole transaction was rolled back; its call left one audit row (refused).
    outcomes = AuditEvent.objects.filter(tool="operator_update_world_model").order_by("id")
    assert list(outcomes.values_list("outcome", "error_code")) == [
        ("ok", ""),
        ("refused", "version_conflict"),
    ]
    # And the same call, re-read and retried, goes through.
    again = run_tool(agent.principal, "operator_update_world_model", {"changes": [add("note", "b", "2")]})
    assert again["ok"] is True and again["version"] == 2 and again["supersedes"] == 1


def test_a_pinned_conflict_goes_back_to_the_caller(agent: Any) -> None:
    run_tool(agent.principal, "operator_update_world_model", {"changes": [add("note", "a", "1")]})
    answer = run_tool(
        agent.principal,
        "operator_update_world_model",
        {"changes": [add("note", "b", "2")], "expected_version": 0},
    )
    assert answer["ok"] is False and answer["error"] == "version_conflict" and answer["retry"] is True
    assert not Belief.objects.filter(key="b").exists()


def test_a_lost_claim_of_an_update_leaves_the_belief_as_it_was(agent: Any, stale_reads: StaleReads) -> None:
    """The claim carries the version's writes (one statement on PostgreSQL): when it loses, the
    belief's update and the change row are not written either."""
    assert run_tool(agent.principal, "operator_update_world_model", {"changes": [add("note", "a", "1")]})[
        "ok"
    ]
    stale_reads.next(1)
    answer = run_tool(agent.principal, "operator_update_world_model", {"changes": [update("note", "a", "2")]})
    assert answer["ok"] is False and answer["retry"] is True and answer["error"] == "version_conflict"
    assert Belief.objects.get(key="a").value == "1"
    assert WORLD_MODEL.change_model.objects.count() == 1
    assert list(WorldModelVersion.objects.values_list("number", flat=True)) == [1]
