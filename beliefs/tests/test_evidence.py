"""Confirmation evidence: every refusal is tried from the side that wants to get past it, through
the real tool (one transaction, nothing written on refusal), and the matching rules are pinned."""

from __future__ import annotations

import pytest

from beliefs import evidence
from beliefs.evidence import Binding, check_confirmation, find_span, normalise
from beliefs.models import Belief, ConfirmationUse, WorldModelVersion
from beliefs.tests.helpers import add, update
from operator_site.face.envelope import Refusal
from operator_site.models import AuditEvent, Notification

pytestmark = pytest.mark.django_db

NAME = [update("identity", "name", "Iain")]
QUOTE = "please call me Iain from now on"


@pytest.fixture
def named(owner, tool):
    """The model already holds identity/name = Ian (set by the person, with their own words)."""
    from beliefs import services

    services.record_instruction(principal=owner.principal, text="My name is Ian, by the way.", channel="chat")
    made = tool(
        owner.principal,
        "operator_update_world_model",
        {
            "changes": [add("identity", "name", "Ian")],
            "confirmedInConversation": True,
            "confirmationQuote": "my name is Ian",
        },
    )
    assert made["ok"] is True, made
    return made


def _assert_nothing_written(before_versions: int, before_notices: int) -> None:
    assert WorldModelVersion.objects.count() == before_versions
    assert Notification.objects.count() == before_notices
    assert Belief.objects.get(kind="identity", key="name").value == "Ian"


def _try(tool, who, **arguments) -> dict:
    versions, notices = WorldModelVersion.objects.count(), Notification.objects.count()
    uses = ConfirmationUse.objects.count()
    answer = tool(who.principal, "operator_update_world_model", {"changes": NAME, **arguments})
    assert answer["ok"] is False
    assert answer["reason"]
    assert "retry" not in answer
    _assert_nothing_written(versions, notices)
    assert ConfirmationUse.objects.count() == uses
    audit = AuditEvent.objects.order_by("-id").first()
    assert (audit.tool, audit.outcome, audit.error_code) == (
        "operator_update_world_model",
        "refused",
        answer["error"],
    )
    return answer


# --- confirmation_required -------------------------------------------------------------------------
def test_the_flag_without_a_quote_proves_nothing(named, agent, say, tool) -> None:
    say(QUOTE)
    answer = _try(tool, agent, confirmedInConversation=True)
    assert answer["error"] == "confirmation_required"
    assert answer["missing"] == ["a confirmationQuote"]


@pytest.mark.parametrize("flag", [None, False])
def test_a_real_quote_without_the_flag_is_not_a_confirmation(named, agent, say, tool, flag) -> None:
    say(QUOTE)
    arguments = {"confirmationQuote": QUOTE}
    if flag is not None:
        arguments["confirmedInConversation"] = flag
    answer = _try(tool, agent, **arguments)
    assert answer["error"] == "confirmation_required"
    assert answer["missing"] == ["confirmedInConversation: true"]


def test_a_blank_quote_is_no_quote(named, agent, say, tool) -> None:
    say(QUOTE)
    answer = _try(tool, agent, confirmedInConversation=True, confirmationQuote="   \n ")
    assert answer["error"] == "confirmation_required"


def test_every_high_stakes_kind_is_gated_and_low_stakes_are_free(agent, tool) -> None:
    for kind in ("identity", "goal", "behavior_policy", "constraint"):
        answer = tool(agent.principal, "operator_update_world_model", {"changes": [add(kind, "k", "v")]})
        assert answer["error"] == "confirmation_required", kind
    assert Belief.objects.count() == 0
    for kind in ("preference", "note", "project", "risk"):
        answer = tool(agent.principal, "operator_update_world_model", {"changes": [add(kind, "k", "value")]})
        assert answer["ok"] is True, kind
        assert answer["notification"] is None
    assert Notification.objects.count() == 0


def test_one_high_stakes_change_gates_the_whole_call(agent, tool) -> None:
    answer = tool(
        agent.principal,
        "operator_update_world_model",
        {"changes": [add("preference", "tea", "green"), add("constraint", "budget", "no spend over 50")]},
    )
    assert answer["error"] == "confirmation_required"
    assert Belief.objects.count() == 0  # the low-stakes half was not written either


# --- confirmation_not_found --------------------------------------------------------------------------
@pytest.mark.parametrize("quote", ["yes", "Yes!", "yes please", "ok go on", "sure, Iain"])
def test_short_quotes_match_nothing_even_when_the_person_said_them(named, agent, say, tool, quote) -> None:
    say(quote)
    say(f"{quote} — and more words so the row is long")
    answer = _try(tool, agent, confirmedInConversation=True, confirmationQuote=quote)
    assert answer["error"] == "confirmation_not_found"
    assert answer["minimum"] == {"chars": 12, "words": 3}


def test_a_quote_from_an_agent_recorded_row_is_never_evidence(named, agent, say, tool) -> None:
    planted = say(QUOTE, by=agent)
    assert planted.human_authored is False
    answer = _try(tool, agent, confirmedInConversation=True, confirmationQuote=QUOTE)
    assert answer["error"] == "confirmation_not_found"
    assert answer["agent_recorded"] == [planted.id]
    assert "agent" in answer["reason"]


def test_a_quote_nobody_said_is_not_found(named, agent, say, tool) -> None:
    say("please call me Ian as always")
    answer = _try(tool, agent, confirmedInConversation=True, confirmationQuote=QUOTE)
    assert answer["error"] == "confirmation_not_found"


def test_a_quote_stitched_across_two_instructions_is_not_a_span_of_one(named, agent, say, tool) -> None:
    say("please call me")
    say("Iain from now on")
    answer = _try(tool, agent, confirmedInConversation=True, confirmationQuote=QUOTE)
    assert answer["error"] == "confirmation_not_found"


def test_a_quote_must_be_whole_words(named, agent, say, tool) -> None:
    say("Oh please call me Iainson from now on, it's the family name")
    answer = _try(tool, agent, confirmedInConversation=True, confirmationQuote="please call me Iain")
    assert answer["error"] == "confirmation_not_found"


# --- confirmation_stale ------------------------------------------------------------------------------
def test_a_quote_older_than_the_window_is_stale(named, agent, say, tool) -> None:
    old = say(QUOTE, hours_ago=73)
    answer = _try(tool, agent, confirmedInConversation=True, confirmationQuote=QUOTE)
    assert answer["error"] == "confirmation_stale"
    assert answer["instructions"] == [old.id]
    assert answer["window_hours"] == 72


def test_the_window_is_a_setting(named, agent, say, tool, settings) -> None:
    settings.OPERATOR_CONFIRMATION_WINDOW_HOURS = 2
    say(QUOTE, hours_ago=3)
    assert _try(tool, agent, confirmedInConversation=True, confirmationQuote=QUOTE)["error"] == (
        "confirmation_stale"
    )
    settings.OPERATOR_CONFIRMATION_WINDOW_HOURS = 4
    answer = tool(
        agent.principal,
        "operator_update_world_model",
        {"changes": NAME, "confirmedInConversation": True, "confirmationQuote": QUOTE},
    )
    assert answer["ok"] is True


# --- confirmation_unbound ----------------------------------------------------------------------------
def test_a_real_human_quote_about_something_else_does_not_authorise_this(named, agent, say, tool) -> None:
    say("I really do not want meetings before ten in the morning")
    answer = _try(
        tool,
        agent,
        confirmedInConversation=True,
        confirmationQuote="do not want meetings before ten",
    )
    assert answer["error"] == "confirmation_unbound"
    assert answer["unbound"] == ["identity/name"]


def test_a_quote_must_bind_every_high_stakes_change_it_authorises(named, agent, say, tool) -> None:
    say("please call me Iain from now on, and I live in Leith")
    answer = tool(
        agent.principal,
        "operator_update_world_model",
        {
            "changes": [*NAME, add("identity", "employer", "Acme Ltd")],
            "confirmedInConversation": True,
            "confirmationQuote": QUOTE,
        },
    )
    assert answer["error"] == "confirmation_unbound"
    assert answer["unbound"] == ["identity/employer"]
    assert not Belief.objects.filter(key="employer").exists()


def test_the_key_as_a_phrase_binds(agent, say, tool) -> None:
    say("my home city is Edinburgh now, please remember it")
    answer = tool(
        agent.principal,
        "operator_update_world_model",
        {
            "changes": [add("identity", "home_city", "Edinburgh")],
            "confirmedInConversation": True,
            "confirmationQuote": "my home city is",
        },
    )
    assert answer["ok"] is True, answer


# --- confirmation_reused -----------------------------------------------------------------------------
def test_one_instruction_authorises_a_key_once(named, agent, say, tool) -> None:
    instruction = say(QUOTE)
    arguments = {"changes": NAME, "confirmedInConversation": True, "confirmationQuote": QUOTE}
    first = tool(agent.principal, "operator_update_world_model", arguments)
    assert first["ok"] is True
    assert first["evidence"] == {"instruction": instruction.id, "span": QUOTE}
    # The belief changes back by other means, then the same words are replayed for the same key.
    tool(owner_principal(), "operator_revert_world_model", {"to_version": first["version"] - 1})
    assert Belief.objects.get(kind="identity", key="name").value == "Ian"
    answer = _try(tool, agent, confirmedInConversation=True, confirmationQuote=QUOTE)
    assert answer["error"] == "confirmation_reused"
    assert answer["uses"] == [
        {
            "instruction": instruction.id,
            "used_for": [{"subject": "identity/name", "version": first["version"]}],
        }
    ]


def owner_principal():
    from operator_site.models import Principal

    return Principal.objects.get(name="owner")


def test_the_same_instruction_may_authorise_another_key(named, agent, say, tool) -> None:
    say("please call me Iain from now on; my employer is Acme")
    first = tool(
        agent.principal,
        "operator_update_world_model",
        {"changes": NAME, "confirmedInConversation": True, "confirmationQuote": QUOTE},
    )
    assert first["ok"] is True
    second = tool(
        agent.principal,
        "operator_update_world_model",
        {
            "changes": [add("identity", "employer", "Acme")],
            "confirmedInConversation": True,
            "confirmationQuote": "my employer is Acme",
        },
    )
    assert second["ok"] is True, second


def test_a_newer_statement_of_the_same_words_can_authorise_again(named, agent, say, tool) -> None:
    say(QUOTE, hours_ago=2)
    arguments = {"changes": NAME, "confirmedInConversation": True, "confirmationQuote": QUOTE}
    assert tool(agent.principal, "operator_update_world_model", arguments)["ok"] is True
    tool(owner_principal(), "operator_revert_world_model", {"to_version": 1})
    again = say(f"Yes: {QUOTE}. I mean it.")
    answer = tool(agent.principal, "operator_update_world_model", arguments)
    assert answer["ok"] is True
    assert answer["evidence"]["instruction"] == again.id


# --- what passes, and what is recorded ------------------------------------------------------------------
def test_case_whitespace_and_typographic_quotes_are_normalised(named, agent, say, tool) -> None:
    instruction = say("OK.  Please   CALL me\nIain — that\u2019s my name from now on.")
    answer = tool(
        agent.principal,
        "operator_update_world_model",
        {
            "changes": NAME,
            "confirmedInConversation": True,
            "confirmationQuote": "please call me iain — that's my name",
        },
    )
    assert answer["ok"] is True, answer
    assert answer["evidence"] == {
        "instruction": instruction.id,
        "span": "Please   CALL me\nIain — that\u2019s my name",
    }
    version = WorldModelVersion.objects.get(number=answer["version"])
    assert version.evidence_instruction_id == instruction.id
    assert version.evidence["span"] == "Please   CALL me\nIain — that\u2019s my name"
    assert instruction.text[version.evidence["start"] : version.evidence["end"]] == version.evidence["span"]
    belief = Belief.objects.get(kind="identity", key="name")
    assert (belief.value, belief.evidence_instruction_id) == ("Iain", instruction.id)
    assert belief.evidence_span == version.evidence["span"]
    use = ConfirmationUse.objects.get(version=answer["version"])
    assert (use.instruction_id, use.scope, use.subject, use.version) == (
        instruction.id,
        "world_model",
        "identity/name",
        answer["version"],
    )


def test_comments_count_as_what_the_person_said(named, agent, say, tool) -> None:
    say("fine, call me Iain from now on then", kind="comment")
    answer = tool(
        agent.principal,
        "operator_update_world_model",
        {"changes": NAME, "confirmedInConversation": True, "confirmationQuote": "call me Iain from now on"},
    )
    assert answer["ok"] is True


def test_retiring_a_high_stakes_belief_needs_evidence_naming_it(named, agent, say, tool) -> None:
    say("forget the name Ian, I never use it")
    retire = {"changes": [{"op": "retire", "kind": "identity", "key": "name"}]}
    assert tool(agent.principal, "operator_update_world_model", retire)["error"] == "confirmation_required"
    answer = tool(
        agent.principal,
        "operator_update_world_model",
        {**retire, "confirmedInConversation": True, "confirmationQuote": "forget the name Ian"},
    )
    assert answer["ok"] is True
    assert Belief.objects.get(kind="identity", key="name").status == "retired"


# --- the building blocks, directly -------------------------------------------------------------------
def test_normalise_and_find_span() -> None:
    assert normalise("  A\tB\n\nC  ") == "a b c"
    assert find_span("Say: Hello   World!", "hello world") == (5, 18)
    assert find_span("Say: Hello   Worlds!", "hello world") is None
    assert find_span("Straße und mehr", "strasse und") == (0, 10)


def test_significant_words_skip_stopwords_and_short_words() -> None:
    assert evidence.significant_words("I am a vegetarian, not vegan") == ["vegetarian", "vegan"]
    assert evidence.significant_words("42") == ["42"]
    assert evidence.significant_words("it is ok") == []
    assert Binding("note/x", "x", ("it is ok",)).mentioned_in("it is ok with me") is False


def test_check_confirmation_writes_nothing(owner) -> None:
    from beliefs import services

    services.record_instruction(principal=owner.principal, text=QUOTE)
    confirmation = check_confirmation(
        confirmed=True, quote=QUOTE, scope="goal_model", bindings=[Binding("goal/x", "name", ("Iain",))]
    )
    assert confirmation.span == QUOTE
    assert ConfirmationUse.objects.count() == 0
    evidence.record_confirmation_use(confirmation, version=1)
    with pytest.raises(Refusal) as again:
        evidence.record_confirmation_use(confirmation, version=2)
    assert again.value.code == "confirmation_reused"
    # Another scope is another key space: the goal model's use does not spend the world model's.
    check_confirmation(
        confirmed=True, quote=QUOTE, scope="world_model", bindings=[Binding("goal/x", "name", ("Iain",))]
    )
