"""The reads other apps build on (context packet, state, history): bounded, ordered, no query per row."""

from __future__ import annotations

import pytest

from intents import approval
from intents.answers import decision_dict, intent_dict
from intents.decisions import open_decisions
from intents.lifecycle import pending_approvals

pytestmark = pytest.mark.django_db


def test_pending_approvals_and_open_decisions(agent, owner, record, django_assert_max_num_queries) -> None:
    intents = [record(agent, title=f"plan {i}")[0] for i in range(6)]
    record(agent, type="note", title="not a question", amount_cents=None)
    approval.ignore_intent(intents[0], by=owner.principal.user, via="admin")
    approval.reject_intent(intents[1], by=owner.principal.user, via="admin")
    with django_assert_max_num_queries(2):
        rows = [intent_dict(i) for i in pending_approvals(limit=10)]
    assert [r["id"] for r in rows] == [i.id for i in intents if i.id != intents[1].id]
    assert all(r["affordances"] == ["accept", "edit", "respond", "ignore"] for r in rows)
    assert rows[0]["decision_status"] == "parked"
    assert len(pending_approvals(limit=2)) == 2
    decisions = open_decisions()
    assert [d.status for d in decisions] == ["pending"] * 4 + ["parked"]
    assert decision_dict(decisions[-1])["decided_by"] == "owner"
