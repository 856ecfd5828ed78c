"""Confirmation evidence: each rule is tried from the side that wants to get past it, through the
real tool (one transaction, nothing written on refusal), each with its positive control — the same
change with a proper whole, firm, bound sentence passes."""

from __future__ import annotations

import pytest

from beliefs.models import Belief, WorldModelVersion
from beliefs.tests.helpers import add, retire, update
from operator_site import evidence
from operator_site.evidence import Claim, check_confirmation
from operator_site.face.auth import issue_token, revoke
from operator_site.models import AuditEvent, ConfirmationUse, Notification
from operator_site.refusals import Refusal

pytestmark = pytest.mark.django_db

NAME = [update("identity", "name", "Iain")]
SAID = "Please use the name Iain from now on."


@pytest.fixture
def named(owner, say, tool):
    """The model already holds identity/name = Ian (set by the person, with their own words)."""
    say("My name is Ian, by the way.")
    made = tool(
        owner.principal,
        "operator_update_world_model",
        {
            "changes": [add("identity", "name", "Ian")],
            "confirmedInConversation": True,
            "confirmationQuote": "My name is Ian, by the way.",
        },
    )
    assert made["ok"] is True, made
    return made


def _write(tool, who, changes, quote, flag=True):
    arguments = {"changes": changes, "confirmedInConversation": flag}
    if quote is not None:
        arguments["confirmationQuote"] = quote
    return tool(who.principal, "operator_update_world_model", arguments)


def _state() -> tuple:
    return (
        WorldModelVersion.objects.count(),
        Notification.objects.count(),
        ConfirmationUse.objects.count(),
        sorted(Belief.objects.values_list("kind", "key", "value", "status")),
    )


def _refused(tool, who, changes, quote, code, flag=True) -> dict:
    """The call is refused with `code`, writes nothing anywhere, and is audited as refused."""
    before = _state()
    answer = _write(tool, who, changes, quote, flag)
    assert answer["ok"] is False, answer
    assert answer["error"] == code, answer
    assert answer["reason"]
    assert "retry" not in answer
    assert _state() == before
    audit = AuditEvent.objects.order_by("-id").first()
    assert (audit.tool, audit.outcome, audit.error_code) == ("operator_update_world_model", "refused", code)
    return answer


def _passes(tool, who, changes, quote) -> dict:
    answer = _write(tool, who, changes, quote)
    assert answer["ok"] is True, answer
    return answer


# --- required: the flag and a quote, together ------------------------------------------------------------
def test_the_flag_without_a_quote_proves_nothing(named, agent, say, tool) -> None:
    say(SAID)
    answer = _refused(tool, agent, NAME, None, "confirmation_required")
    assert answer["missing"] == ["a confirmationQuote"]


@pytest.mark.parametrize("flag", [None, False])
def test_a_real_quote_without_the_flag_is_not_a_confirmation(named, agent, say, tool, flag) -> None:
    say(SAID)
    answer = _refused(tool, agent, NAME, SAID, "confirmation_required", flag=flag)
    assert answer["missing"] == ["confirmedInConversation: true"]


def test_a_blank_quote_is_no_quote(named, agent, say, tool) -> None:
    say(SAID)
    _refused(tool, agent, NAME, "   \n ", "confirmation_required")
    _refused(tool, agent, NAME, "... !!", "confirmation_not_found")  # marks, no words


def test_every_high_stakes_kind_is_gated_and_low_stakes_are_free(agent, tool) -> None:
    for kind in ("identity", "goal", "behavior_policy", "constraint"):
        answer = _write(tool, agent, [add(kind, "home_city", "Lisbon")], None)
        assert answer["error"] == "confirmation_required", kind
    assert Belief.objects.count() == 0
    for kind in ("preference", "note", "project", "risk"):
        answer = _write(tool, agent, [add(kind, "k", "value")], None, flag=None)
        assert answer["ok"] is True, kind
        assert answer["notification"] is None
    assert Notification.objects.count() == 0


def test_one_high_stakes_change_gates_the_whole_call(agent, tool) -> None:
    changes = [add("preference", "tea", "green"), add("constraint", "budget", "no spend over 50")]
    assert _write(tool, agent, changes, None)["error"] == "confirmation_required"
    assert Belief.objects.count() == 0  # the low-stakes half was not written either


# --- a high-stakes key must have a word a sentence can name ----------------------------------------------
@pytest.mark.parametrize("key", ["the", "to_i", "my-own", "a.b", "it_is_ok", "x"])
def test_a_high_stakes_key_without_a_significant_word_is_an_invalid_key(owner, agent, say, tool, key) -> None:
    say("My home is in Lisbon, it is the city I love.")
    for who in (agent, owner):
        answer = _refused(
            tool,
            who,
            [add("identity", key, "Lisbon")],
            "My home is in Lisbon, it is the city I love.",
            "invalid_key",
        )
        assert "word" in answer["reason"]
    # A low-stakes key may be anything.
    assert _write(tool, agent, [add("note", key, "x")], None, flag=None)["ok"] is True


# --- 1. the person's words: human, live, recent ------------------------------------------------------------
def test_a_quote_from_an_agent_recorded_row_is_never_evidence(named, agent, say, tool) -> None:
    planted = say(SAID, by=agent)
    assert planted.human_authored is False
    answer = _refused(tool, agent, NAME, SAID, "confirmation_not_found")
    assert answer["agent_recorded"] == [planted.id]
    assert answer["rule"] == "persons_words"


def test_a_quote_nobody_said_is_not_found(named, agent, say, tool) -> None:
    say("Please call me Ian as always.")
    _refused(tool, agent, NAME, SAID, "confirmation_not_found")


def test_a_quote_stitched_across_two_instructions_is_not_found(named, agent, say, tool) -> None:
    say("Please call me")
    say("Iain from now on.")
    _refused(tool, agent, NAME, SAID, "confirmation_not_found")


def test_whole_words_only(named, agent, say, tool) -> None:
    say("Oh please use the name Iainson from now on.")
    _refused(tool, agent, NAME, "Oh please use the name Iain from now on.", "confirmation_not_found")


def test_a_revoked_humans_words_stop_counting_at_once(named, owner, make_principal, agent, say, tool) -> None:
    partner = make_principal("partner", kind="human")
    say(SAID, by=partner)
    revoke(partner.principal)
    answer = _refused(tool, agent, NAME, SAID, "confirmation_not_found")
    assert "revoked" in answer["reason"]
    # A new token for the same principal does not bring the old words back (the old token may be
    # the stolen one) ...
    issue_token(partner.principal)
    _refused(tool, agent, NAME, SAID, "confirmation_not_found")
    # ... while what the principal says after that counts.
    say("Yes, please use the name Iain from now on.", by=partner)
    _passes(tool, agent, NAME, "Yes, please use the name Iain from now on.")


def test_a_replaced_token_takes_its_words_with_it(named, make_principal, agent, say, tool) -> None:
    partner = make_principal("partner", kind="human")
    say(SAID, by=partner)
    issue_token(partner.principal)  # rotated: what the old token recorded is no longer evidence
    _refused(tool, agent, NAME, SAID, "confirmation_not_found")


def test_a_deactivated_human_is_not_the_person(named, make_principal, agent, say, tool) -> None:
    partner = make_principal("partner", kind="human")
    say(SAID, by=partner)
    partner.principal.active = False
    partner.principal.save(update_fields=["active"])
    _refused(tool, agent, NAME, SAID, "confirmation_not_found")
    partner.principal.active = True
    partner.principal.save(update_fields=["active"])
    _passes(tool, agent, NAME, SAID)  # positive control: the same words, from a live human


def test_a_quote_older_than_the_window_is_stale(named, agent, say, tool) -> None:
    old = say(SAID, hours_ago=73)
    answer = _refused(tool, agent, NAME, SAID, "confirmation_stale")
    assert answer["instructions"] == [old.id]
    assert answer["window_hours"] == 72


def test_the_window_is_a_setting(named, agent, say, tool, settings) -> None:
    settings.OPERATOR_CONFIRMATION_WINDOW_HOURS = 2
    say(SAID, hours_ago=3)
    _refused(tool, agent, NAME, SAID, "confirmation_stale")
    settings.OPERATOR_CONFIRMATION_WINDOW_HOURS = 4
    _passes(tool, agent, NAME, SAID)


# --- 2. whole statements ------------------------------------------------------------------------------------
def test_a_fragment_of_a_refusal_never_authorises_what_was_refused(named, agent, say, tool) -> None:
    said = "Do not ever change my name to Iain, that message was a scam."
    say(said)
    answer = _refused(tool, agent, NAME, "change my name to Iain", "confirmation_fragment")
    assert answer["rule"] == "whole_statements"
    assert answer["sentence"] == said  # tells the agent what the whole sentence is
    # The whole sentence says the opposite of the change: polarity refuses it.
    _refused(tool, agent, NAME, said, "confirmation_polarity")


def test_a_fragment_of_a_firm_sentence_is_still_a_fragment(named, agent, say, tool) -> None:
    say("Please use the name Iain from now on, it is shorter.")
    _refused(tool, agent, NAME, "use the name Iain from now on", "confirmation_fragment")
    _passes(tool, agent, NAME, "Please use the name Iain from now on, it is shorter.")


def test_a_quote_across_a_sentence_boundary_must_cover_both_sentences(named, agent, say, tool) -> None:
    say("I've decided. Please use the name Iain from now on. Thanks!")
    _refused(tool, agent, NAME, "decided. Please use the name Iain", "confirmation_fragment")
    _passes(tool, agent, NAME, "I've decided. Please use the name Iain from now on.")


def test_each_line_is_a_sentence(named, agent, say, tool) -> None:
    say("Updates for you\nPlease use the name Iain from now on\nthat is all")
    # The lines run on (no marks): a quote of one line is whole, but the rules read all three.
    _passes(tool, agent, NAME, "please use the name iain from now on")


# --- 3. firm ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "said",
    [
        "Should you use the name Iain from now on?",
        "Call me Iain from now on?",
        "Maybe use the name Iain from now on.",
        "Perhaps you could use the name Iain from now on.",
        "I'm not sure, but use the name Iain from now on.",
        "What if you use the name Iain from now on.",
        "I think you should use the name Iain from now on.",
        "If my passport arrives, use the name Iain from now on.",
        "Call me Iain from now on, unless my mother objects.",
        "In case the bank agrees\nuse the name Iain from now on.",
    ],
)
def test_a_question_a_hedge_or_a_condition_authorises_nothing(named, agent, say, tool, said) -> None:
    say(said)
    quote = said.split("\n")[-1] if "\n" in said else said
    answer = _refused(tool, agent, NAME, quote, "confirmation_not_firm")
    assert answer["rule"] == "firm"


GYM = [add("behavior_policy", "gym", "once a week")]


@pytest.mark.parametrize(
    "said",
    [
        "Once the offer comes through, my gym is once a week.",
        "Once a week passes, my gym is once a week.",
        "Once a month the gym is full, my gym is once a week.",
        "My gym is once a week once every debt is paid.",
        "My gym is once a week once a month is over.",
        "My gym is once a week once a month from now.",
        "My gym is once a week once more people join.",
    ],
)
def test_once_that_hangs_a_condition_on_the_change_authorises_nothing(owner, agent, say, tool, said) -> None:
    say(said)
    answer = _refused(tool, agent, GYM, said, "confirmation_not_firm")
    assert answer["rule"] == "firm" and "once" in answer["reason"]


@pytest.mark.parametrize(
    "said",
    [
        "My gym is once a week.",
        "My gym is once a week on Sundays.",
        "My gym is once a week, in effect at once.",
        "Once again: my gym is once a week.",
        "Once a week, my gym is once a week.",
        "My gym is once a week and I swim once every two weeks.",
    ],
)
def test_once_that_says_how_often_is_no_condition(owner, agent, say, tool, said) -> None:
    """A fail-closed cost mended: "once" saying how often is not a condition (wording.condition_in)."""
    say(said)
    _passes(tool, agent, GYM, said)


# --- 4. same polarity ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "said",
    [
        "Never use the name Iain.",
        "Don't use the name Iain from now on.",
        "Please stop using the name Iain.",
        "The message saying my name is Iain is fake.",
        "I used to go by the name Iain.",
        "Do not\nuse the name Iain from now on.",  # a negation on the line before, running on
    ],
)
def test_a_negated_or_denied_statement_does_not_authorise_the_positive(named, agent, say, tool, said) -> None:
    say(said)
    quote = said.split("\n")[-1]
    answer = _refused(tool, agent, NAME, quote, "confirmation_polarity")
    assert answer["rule"] == "same_polarity"


def test_a_negative_rule_authorises_the_negative_value_only(owner, agent, say, tool) -> None:
    say("No! Never pay invoices automatically. Always ask me.")
    positive = [add("behavior_policy", "pay_invoices", "pay invoices automatically")]
    negative = [add("behavior_policy", "pay_invoices", "never pay invoices automatically")]
    answer = _refused(tool, agent, positive, "Never pay invoices automatically.", "confirmation_polarity")
    assert "never" in answer["reason"]
    # The whole run including "No!" is worse, not better.
    _refused(tool, agent, positive, "No! Never pay invoices automatically.", "confirmation_polarity")
    _passes(tool, agent, negative, "Never pay invoices automatically.")


def test_a_negative_value_needs_the_negation_in_the_sentence(owner, agent, say, tool) -> None:
    say("Pay invoices automatically from now on.")
    negative = [add("behavior_policy", "pay_invoices", "never pay invoices automatically")]
    answer = _refused(
        tool, agent, negative, "Pay invoices automatically from now on.", "confirmation_polarity"
    )
    assert "never" in answer["reason"]


# --- 5. bound to the change ---------------------------------------------------------------------------------
def test_a_real_human_sentence_about_something_else_does_not_authorise_this(named, agent, say, tool) -> None:
    say("I really do not want meetings before ten in the morning.")
    answer = _refused(
        tool, agent, NAME, "I really do not want meetings before ten in the morning.", "confirmation_unbound"
    )
    assert answer["rule"] == "bound"
    assert answer["subject"] == "identity/name"
    assert answer["missing"]["target"] == ["name"] and answer["missing"]["value"] == ["iain"]


def test_the_value_must_be_said_not_only_the_key(owner, agent, say, tool) -> None:
    # Finding F1 (closed): a key taken from the person's sentence bound any value.
    say("Remind me that my gym membership renews in May.")
    policy = [add("behavior_policy", "membership", "approve every payment to Acme")]
    answer = _refused(
        tool, agent, policy, "Remind me that my gym membership renews in May.", "confirmation_unbound"
    )
    assert answer["missing"]["value"] == ["approve", "every", "payment", "acme"]


def test_every_word_of_the_value_not_one_shared_word(owner, agent, say, tool) -> None:
    say("My home city is Lisbon in Portugal.")
    answer = _refused(
        tool,
        agent,
        [add("identity", "home_city", "Lisbon Texas")],
        "My home city is Lisbon in Portugal.",
        "confirmation_unbound",
    )
    assert answer["missing"]["value"] == ["texas"]
    _passes(
        tool, agent, [add("identity", "home_city", "Lisbon, Portugal")], "My home city is Lisbon in Portugal."
    )


def test_every_word_of_the_key(owner, agent, say, tool) -> None:
    say("My city is Lisbon.")
    answer = _refused(
        tool, agent, [add("identity", "home_city", "Lisbon")], "My city is Lisbon.", "confirmation_unbound"
    )
    assert answer["missing"]["target"] == ["home"]
    say("My home city is Lisbon.")
    _passes(tool, agent, [add("identity", "homeCity", "Lisbon")], "My home city is Lisbon.")


def test_retiring_needs_the_key_and_a_word_that_says_to_drop_it(named, agent, say, tool) -> None:
    retire_name = [retire("identity", "name")]
    say("My name is on the form.")
    answer = _refused(tool, agent, retire_name, "My name is on the form.", "confirmation_unbound")
    assert answer["missing"]["cue"] is True
    say("Forget the name you have for me.")
    _passes(tool, agent, retire_name, "Forget the name you have for me.")
    assert Belief.objects.get(kind="identity", key="name").status == "retired"


def test_a_hard_limit_is_not_retired_by_a_sentence_that_shares_never(owner, agent, say, tool) -> None:
    say("No gambling, never gamble on anything.")
    _passes(
        tool,
        owner,
        [add("constraint", "no_gambling", "never gamble")],
        "No gambling, never gamble on anything.",
    )
    say("Never send me marketing emails, drop them.")
    _refused(
        tool,
        agent,
        [retire("constraint", "no_gambling")],
        "Never send me marketing emails, drop them.",
        "confirmation_unbound",
    )
    # Saying to drop it, with a stray negation, is still refused: "never drop" is not "drop".
    say("Never drop the gambling limit.")
    _refused(
        tool,
        agent,
        [retire("constraint", "no_gambling")],
        "Never drop the gambling limit.",
        "confirmation_polarity",
    )
    say("You can forget the gambling limit now.")
    _passes(tool, agent, [retire("constraint", "no_gambling")], "You can forget the gambling limit now.")


def test_no_longer_is_the_cue_itself(owner, agent, say, tool) -> None:
    say("Acme is my employer.")
    _passes(tool, owner, [add("identity", "employer", "Acme")], "Acme is my employer.")
    say("Acme is no longer my employer.")
    _passes(tool, agent, [retire("identity", "employer")], "Acme is no longer my employer.")


# --- 6. once ----------------------------------------------------------------------------------------------
def test_one_sentence_does_not_authorise_several_keys(owner, agent, say, tool) -> None:
    say("My home city is Lisbon and my employer is Lisbon Labs.")
    both = [add("identity", "home_city", "Lisbon"), add("identity", "employer", "Lisbon Labs")]
    answer = _refused(
        tool, agent, both, "My home city is Lisbon and my employer is Lisbon Labs.", "confirmation_reused"
    )
    assert answer["rule"] == "once"
    say("My home city is Lisbon. My employer is Lisbon Labs.")
    made = _passes(tool, agent, both, "My home city is Lisbon. My employer is Lisbon Labs.")
    uses = ConfirmationUse.objects.filter(version=made["version"]).order_by("sentence")
    assert [(u.sentence, u.subject) for u in uses] == [(0, "identity/home_city"), (1, "identity/employer")]


def test_a_sentence_authorises_once(named, owner, agent, say, tool) -> None:
    instruction = say(SAID)
    first = _passes(tool, agent, NAME, SAID)
    assert first["evidence"] == {"instruction": instruction.id, "span": SAID}
    # The belief changes back by other means, then the same words are replayed.
    tool(owner.principal, "operator_revert_world_model", {"to_version": first["version"] - 1})
    assert Belief.objects.get(kind="identity", key="name").value == "Ian"
    answer = _refused(tool, agent, NAME, SAID, "confirmation_reused")
    assert answer["instruction"] == instruction.id


def test_another_sentence_of_the_same_instruction_may_authorise_another_key(named, agent, say, tool) -> None:
    say("Please use the name Iain from now on; my employer is Acme.")
    _passes(tool, agent, NAME, "Please use the name Iain from now on;")
    _passes(tool, agent, [add("identity", "employer", "Acme")], "my employer is Acme.")


def test_a_newer_statement_of_the_same_words_can_authorise_again(named, owner, agent, say, tool) -> None:
    say(SAID, hours_ago=2)
    _passes(tool, agent, NAME, SAID)
    tool(owner.principal, "operator_revert_world_model", {"to_version": 1})
    again = say(f"Yes. {SAID} I mean it.")
    answer = _passes(tool, agent, NAME, SAID)
    assert answer["evidence"]["instruction"] == again.id


# --- what passes, and what is recorded ------------------------------------------------------------------
def test_case_whitespace_width_and_typographic_marks_are_normalised(named, agent, say, tool) -> None:
    wide = "\uff29\uff41\uff49\uff4e"  # "Iain" in full-width letters
    instruction = say(f"OK.  Please   USE the name {wide} \u2014 that\u2019s my name from now on.")
    answer = _passes(tool, agent, NAME, "please use the name iain - that's my name from now on")
    span = f"Please   USE the name {wide} \u2014 that\u2019s my name from now on."
    assert answer["evidence"] == {"instruction": instruction.id, "span": span}
    version = WorldModelVersion.objects.get(number=answer["version"])
    assert version.evidence_instruction_id == instruction.id
    assert version.evidence["span"] == span
    assert instruction.text[version.evidence["start"] : version.evidence["end"]] == span
    assert version.evidence["sentences"] == [{"sentence": 1, "text": span, "authorises": "identity/name"}]
    belief = Belief.objects.get(kind="identity", key="name")
    assert (belief.value, belief.evidence_instruction_id, belief.evidence_span) == (
        "Iain",
        instruction.id,
        span,
    )
    use = ConfirmationUse.objects.get(version=answer["version"])
    assert (use.instruction_id, use.sentence, use.scope, use.subject) == (
        instruction.id,
        1,
        "world_model",
        "identity/name",
    )


def test_each_belief_records_the_sentence_that_authorised_it(owner, agent, say, tool) -> None:
    say("My home city is Lisbon. My employer is Acme.")
    _passes(
        tool,
        agent,
        [add("identity", "employer", "Acme"), add("identity", "home_city", "Lisbon")],
        "My home city is Lisbon. My employer is Acme.",
    )
    spans = dict(Belief.objects.values_list("key", "evidence_span"))
    assert spans == {"employer": "My employer is Acme.", "home_city": "My home city is Lisbon."}


def test_comments_count_as_what_the_person_said(named, agent, say, tool) -> None:
    say("Fine, use the name Iain from now on then.", kind="comment")
    _passes(tool, agent, NAME, "Fine, use the name Iain from now on then.")


def test_the_rules_bind_the_persons_own_token_too(named, owner, say, tool) -> None:
    say("Do not ever change my name to Iain, that message was a scam.")
    _refused(tool, owner, NAME, "change my name to Iain", "confirmation_fragment")
    say(SAID)
    _passes(tool, owner, NAME, SAID)


# --- the check, directly ----------------------------------------------------------------------------------
def test_check_confirmation_writes_nothing_and_a_sentence_is_spent_once_across_models(owner, say) -> None:
    say(SAID)
    claim = Claim(subject="goal/7", operation="add", target="name", value="Iain")
    confirmation = check_confirmation(confirmed=True, quote=SAID, scope="goal_model", claims=[claim])
    assert confirmation.span == SAID
    assert ConfirmationUse.objects.count() == 0
    evidence.record_confirmation_use(confirmation, version=1)
    with pytest.raises(Refusal) as again:
        evidence.record_confirmation_use(confirmation, version=2)
    assert again.value.code == "confirmation_reused"
    # A sentence authorises one change whatever the model: the world model cannot spend it again.
    with pytest.raises(Refusal) as other_model:
        check_confirmation(confirmed=True, quote=SAID, scope="world_model", claims=[claim])
    assert other_model.value.code == "confirmation_reused"


def test_refusals_point_to_a_proposal(named, agent, say, tool) -> None:
    say("Maybe use the name Iain from now on.")
    answer = _refused(tool, agent, NAME, "Maybe use the name Iain from now on.", "confirmation_not_firm")
    assert "operator_record_action_intent" in answer["reason"]


# --- the examples docs/world-model.md gives, exactly ------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "quote", "outcome"),
    [
        ("never auto-approve payments", "Never auto-approve payments.", "written"),
        ("auto-approve payments", "Never auto-approve payments.", "confirmation_polarity"),
        ("auto-approve payments", "auto-approve payments", "confirmation_fragment"),
        ("auto-approve payments", "No! Never auto-approve payments.", "confirmation_polarity"),
    ],
)
def test_the_documented_payment_examples(owner, agent, say, tool, value, quote, outcome) -> None:
    say("No! Never auto-approve payments. Always ask me.")
    answer = _write(tool, agent, [add("behavior_policy", "auto_approve_payments", value)], quote)
    assert answer.get("error", "written") == outcome, answer


@pytest.mark.parametrize(
    ("change", "outcome"),
    [
        (add("identity", "home_city", "Lisbon, Portugal"), "written"),
        (add("identity", "home_city", "Lisbon Texas"), "confirmation_unbound"),
        (add("identity", "city", "Lisbon"), "written"),
        (add("behavior_policy", "home_city", "always book Lisbon hotels"), "confirmation_unbound"),
        (add("identity", "the", "Lisbon"), "invalid_key"),
    ],
)
def test_the_documented_home_city_examples(owner, agent, say, tool, change, outcome) -> None:
    say("My home city is Lisbon in Portugal.")
    answer = _write(tool, agent, [change], "My home city is Lisbon in Portugal.")
    assert answer.get("error", "written") == outcome, answer


def test_the_documented_retire_and_goal_examples(owner, agent, say, tool) -> None:
    say("My home city is Lisbon in Portugal.")
    _passes(
        tool, owner, [add("identity", "home_city", "Lisbon, Portugal")], "My home city is Lisbon in Portugal."
    )
    say("My home city is Lisbon in Portugal.")
    assert (
        _write(tool, agent, [retire("identity", "home_city")], "My home city is Lisbon in Portugal.")["error"]
        == "confirmation_unbound"
    )
    say("Add the goal Marathon.")
    made = tool(
        owner.principal,
        "operator_apply_goal_change",
        {
            "action": "add",
            "title": "Marathon",
            "confirmedInConversation": True,
            "confirmationQuote": "Add the goal Marathon.",
        },
    )
    assert made["ok"] is True, made
    for said, outcome in (
        ("Maybe we should drop the marathon goal, I'm not sure.", "confirmation_not_firm"),
        ("Never drop the marathon goal.", "confirmation_polarity"),
        ("Drop the marathon goal, I'm done with it.", "written"),
    ):
        say(said)
        answer = tool(
            agent.principal,
            "operator_apply_goal_change",
            {
                "action": "remove",
                "goal": "Marathon",
                "confirmedInConversation": True,
                "confirmationQuote": said,
            },
        )
        assert answer.get("error", "written") == outcome, answer
    say("Remind me that my gym membership renews in May.")
    policy = [add("behavior_policy", "membership", "approve every payment to Acme")]
    assert _write(tool, agent, policy, "Remind me that my gym membership renews in May.")["error"] == (
        "confirmation_unbound"
    )


def test_the_documented_rerank_example(owner, agent, say, tool) -> None:
    for title in ("Learn the cello", "Run every week", "Read more"):
        say(f"Add the goal {title}.")
        made = tool(
            owner.principal,
            "operator_apply_goal_change",
            {
                "action": "add",
                "title": title,
                "confirmedInConversation": True,
                "confirmationQuote": f"Add the goal {title}.",
            },
        )
        assert made["ok"] is True, made
    say("Make learning the cello my second priority.")
    rerank = {"action": "rerank", "goal": "Learn the cello", "confirmedInConversation": True}
    rerank["confirmationQuote"] = "Make learning the cello my second priority."
    wrong = tool(agent.principal, "operator_apply_goal_change", {**rerank, "importance": 3})
    assert wrong.get("missing"), wrong
    assert (wrong["error"], wrong["missing"]["position"]) == (
        "confirmation_unbound",
        "it says position 2, not 3",
    )
    assert tool(agent.principal, "operator_apply_goal_change", {**rerank, "importance": 2})["ok"] is True
