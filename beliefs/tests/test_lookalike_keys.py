"""A belief's key on add that reads as an active belief's other key of its kind is refused
(`looks_like_existing`, beliefs.services; what "reads as" means: operator_site.lookalikes, and
tests/test_lookalikes.py). Through the real dispatcher, on both databases."""

from __future__ import annotations

from typing import Any

import pytest

from beliefs.models import Belief, WorldModelVersion
from beliefs.tests.helpers import run_tool
from operator_site.lookalikes import fold
from operator_site.models import ConfirmationUse, Instruction

CYRILLIC_PAYDAY = "\u0440\u0430\u0443\u0501\u0430\u0443"  # reads as "payday"
CYRILLIC_SCOPE = "\u0455\u0441\u043e\u0440\u0435"  # reads as "scope"
CYRILLIC_APPLE = "\u0430\u0440\u0440\u04cf\u0435"  # reads as "apple"
GREEK_VOTE = "\u03bd\u03bf\u03c4\u03b5"  # tau reads as nothing plain: not "vote"


def _write(principal: Any, *changes: dict[str, Any], **grounds: Any) -> dict[str, Any]:
    return run_tool(principal, "operator_update_world_model", {"changes": list(changes), **grounds})


def _add(kind: str, key: str, value: str = "v") -> dict[str, Any]:
    return {"op": "add", "kind": kind, "key": key, "value": value}


@pytest.mark.django_db(transaction=True)
def test_a_key_that_reads_as_an_active_one_is_refused(agent: Any) -> None:
    assert _write(agent.principal, _add("note", "payday"), _add("note", "scope"))["ok"] is True
    answer = _write(agent.principal, _add("note", CYRILLIC_PAYDAY))
    assert answer["error"] == "looks_like_existing"
    assert answer["existing"] == "note/payday" and answer["entity"] == f"note/{CYRILLIC_PAYDAY}"
    assert "U+0440 CYRILLIC SMALL LETTER ER reads as 'p'" in answer["reason"]
    # With other changes in the call: all refused, nothing written.
    answer = _write(agent.principal, _add("note", "fresh"), _add("note", CYRILLIC_SCOPE))
    assert answer["error"] == "looks_like_existing" and answer["existing"] == "note/scope"
    assert sorted(Belief.objects.values_list("key", flat=True)) == ["payday", "scope"]
    # Two new keys that read the same, in one call.
    answer = _write(agent.principal, _add("risk", "apple"), _add("risk", CYRILLIC_APPLE))
    assert answer["error"] == "looks_like_existing" and answer["existing"] == "risk/apple"
    assert "in this call" in answer["reason"]
    # Another kind is another name space; a key that reads differently is fine.
    assert _write(agent.principal, _add("preference", CYRILLIC_PAYDAY))["ok"] is True
    moscow = "\u043c\u043e\u0441\u043a\u0432\u0430"
    different = (_add("note", moscow), _add("note", GREEK_VOTE), _add("note", "fail"))
    assert _write(agent.principal, *different)["ok"] is True
    # An update of the stored key is no new name.
    updated = _write(agent.principal, {"op": "update", "kind": "note", "key": "payday", "value": "w"})
    assert updated["ok"] is True
    stored = dict(Belief.objects.filter(kind="note").values_list("key", "key_alike"))
    assert stored["payday"] == "payday" and stored[GREEK_VOTE] == fold(GREEK_VOTE)


@pytest.mark.django_db(transaction=True)
def test_a_retired_look_alike_does_not_block_and_cannot_come_back_beside_its_twin(agent: Any) -> None:
    assert _write(agent.principal, _add("note", CYRILLIC_SCOPE))["ok"] is True
    assert _write(agent.principal, {"op": "retire", "kind": "note", "key": CYRILLIC_SCOPE})["ok"] is True
    assert _write(agent.principal, _add("note", "scope"))["ok"] is True
    # Adding the retired key again would make it active beside the plain one.
    answer = _write(agent.principal, _add("note", CYRILLIC_SCOPE))
    assert answer["error"] == "looks_like_existing" and answer["existing"] == "note/scope"


@pytest.mark.django_db(transaction=True)
def test_a_high_stakes_look_alike_is_refused_whatever_its_evidence(agent: Any, say: Any) -> None:
    say("My payday is Friday.")
    quote = {"confirmedInConversation": True, "confirmationQuote": "My payday is Friday."}
    assert _write(agent.principal, _add("identity", "payday", "Friday"), **quote)["ok"] is True
    say(f"My {CYRILLIC_PAYDAY} is Monday.")
    quote = {"confirmedInConversation": True, "confirmationQuote": f"My {CYRILLIC_PAYDAY} is Monday."}
    answer = _write(agent.principal, _add("identity", CYRILLIC_PAYDAY, "Monday"), **quote)
    assert answer["error"] == "looks_like_existing" and answer["existing"] == "identity/payday"
    # Nothing written, and the person's second sentence not spent.
    assert ConfirmationUse.objects.count() == 1 and Instruction.objects.count() == 2
    assert list(Belief.objects.values_list("key", flat=True)) == ["payday"]


@pytest.mark.django_db(transaction=True)
def test_an_update_of_a_key_not_there_lists_a_stored_key_that_reads_the_same_first(agent: Any) -> None:
    assert _write(agent.principal, _add("note", "scrape"), _add("note", CYRILLIC_SCOPE))["ok"] is True
    answer = _write(agent.principal, {"op": "update", "kind": "note", "key": "scope", "value": "w"})
    assert answer["error"] == "belief_not_found"
    assert answer["candidates"][0] == CYRILLIC_SCOPE and "scrape" in answer["candidates"]


# --- a revert that would bring a look-alike back -----------------------------------------------------
def _revert(principal: Any, **arguments: Any) -> dict[str, Any]:
    return run_tool(principal, "operator_revert_world_model", arguments)


def _active() -> list[str]:
    return sorted(Belief.objects.filter(status=Belief.Status.ACTIVE).values_list("key", flat=True))


@pytest.mark.django_db(transaction=True)
def test_an_agents_undo_never_brings_a_key_back_beside_one_that_reads_the_same(
    agent: Any, make_principal: Any, owner: Any
) -> None:
    """Agent A retires "scope"; agent B then adds "scope" in Cyrillic letters (no active twin then). A's
    undo of its retire would make "scope" active beside it: refused, nothing written. The person's
    own undo is never refused for it (an agent must not stand in the way of it)."""
    other = make_principal("other-agent")
    assert _write(agent.principal, _add("note", "scope"), _add("note", "tone"))["ok"] is True
    assert _write(agent.principal, {"op": "retire", "kind": "note", "key": "scope"})["ok"] is True
    assert _write(other.principal, _add("note", CYRILLIC_SCOPE))["ok"] is True
    versions = WorldModelVersion.objects.count()
    answer = _revert(agent.principal)
    assert answer["error"] == "looks_like_existing", answer
    assert answer["entity"] == "note/scope" and answer["existing"] == f"note/{CYRILLIC_SCOPE}"
    assert "U+0455 CYRILLIC SMALL LETTER DZE reads as 's'" in answer["reason"]
    assert "the person may" in answer["reason"]
    assert WorldModelVersion.objects.count() == versions and _active() == sorted([CYRILLIC_SCOPE, "tone"])
    # The same undo by version number (a restore to the version before the retire): refused too.
    assert _revert(agent.principal, to_version=1)["error"] in {"looks_like_existing", "revert_not_own"}
    # The person's undo goes through; naming either key by its exact text still works.
    answer = _revert(owner.principal)
    assert answer["ok"] is True and answer["undid_versions"] == [3]
    assert _revert(owner.principal)["ok"] is True  # undoes the retire of "scope"
    assert _active() == sorted(["scope", "tone"])


@pytest.mark.django_db(transaction=True)
def test_an_agents_restore_brings_back_no_twin_and_may_swap_one_for_the_other(
    agent: Any, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from beliefs import services

    # A version that held two keys reading the same: written before the rule (here, the rule off).
    monkeypatch.setattr(services, "_refuse_lookalikes", lambda adds, stored: None)
    assert _write(agent.principal, _add("note", "scope"), _add("note", CYRILLIC_SCOPE))["ok"] is True
    monkeypatch.undo()
    both = WorldModelVersion.objects.order_by("-number").values_list("number", flat=True)[0]
    assert _write(agent.principal, {"op": "retire", "kind": "note", "key": CYRILLIC_SCOPE})["ok"] is True
    assert _write(agent.principal, {"op": "retire", "kind": "note", "key": "scope"})["ok"] is True
    # Back to the version that held both: both would come back at once. Refused.
    answer = _revert(agent.principal, to_version=both)
    assert answer["error"] == "looks_like_existing", answer
    assert {answer["entity"], answer["existing"]} == {"note/scope", f"note/{CYRILLIC_SCOPE}"}
    # Back to the one after it: only "scope" comes back, nothing active beside it reads the same.
    assert _revert(agent.principal, to_version=both + 1)["ok"] is True
    assert _active() == ["scope"]
    # The Cyrillic key in its place; then a restore that brings "scope" back while it takes the
    # Cyrillic twin away leaves no twin.
    assert _write(agent.principal, {"op": "retire", "kind": "note", "key": "scope"})["ok"] is True
    assert _write(agent.principal, _add("note", CYRILLIC_SCOPE))["ok"] is True
    assert _active() == [CYRILLIC_SCOPE]
    answer = _revert(agent.principal, to_version=both + 1)
    assert answer["ok"] is True and _active() == ["scope"], answer
    # An undo that revives a key nothing reads as is fine.
    assert _write(agent.principal, _add("note", "tone"))["ok"] is True
    assert _write(agent.principal, {"op": "retire", "kind": "note", "key": "tone"})["ok"] is True
    assert _revert(agent.principal)["ok"] is True and _active() == ["scope", "tone"]
