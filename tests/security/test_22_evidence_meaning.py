# ruff: noqa: E501  (the attempts tables read best one case per line)
"""Check 22 — evidence means what it says: a quote that is the person's own, whole, recent words is
still refused when the words do not say *this* change (docs/world-model.md, "The evidence rule").
Each class an adversarial review found open is tried in several shapes, through the real gated
tools from an agent's token over POST /mcp, each attempt on its own freshly recorded sentence:

- F1 a negation moved to other words ("Never X, always Y" for "Always X, never Y");
- F2 a cue word about something else (drop / forget / again) removing, retiring or resuming this;
- F3 a re-rank against the direction said, or an add placed at a rank nobody said;
- F4 value words the rules used to skip (short numbers, "all"/"any", an emptied detail, a rename);
- F5 a question asked with any script's question mark;
- F6 negations hidden by apostrophe look-alikes, invisible characters, look-alike letters, synonyms;
- F7 a list's "Never do these:" lost (blank line, nesting, no colon, a heading, "Don'ts");
- F8 hedges and conditions ("may be", "hopefully", "once", "when", "as soon as", ...);
- F9 any word of the sentence taken as the value ("My name is Robert and my brother is Bob");
- F10 emphasis that cuts a sentence and leaves a negation-free tail ("Never — I mean never! — X");
- F11 the cost of a refused call after an agent recorded many long rows of its own (bounded);
- F12 a question worded as one without its question mark ("Is my employer Initech.").

Every attempt must be refused with the rule's code and change nothing; the positive controls prove
the refusals are about the words: the same kinds of change, said plainly, pass."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from beliefs import services as beliefs_services
from beliefs.models import Belief, WorldModelVersion
from goals import goal_model
from goals.models import Goal, GoalModelVersion, Priority
from operator_site import evidence, wording
from operator_site.models import ConfirmationUse
from tests.fixtures import asgi_http, orm
from tests.security.helpers import envelope_of, message_of, post, tools_call

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

Call = tuple[str, dict[str, Any]]
POLARITY = {"confirmation_polarity"}
UNBOUND = {"confirmation_unbound"}
NOT_FIRM = {"confirmation_not_firm"}


# --- calls -----------------------------------------------------------------------------------------------
def _world(op: str, kind: str, key: str, value: str | None, quote: str) -> Call:
    change: dict[str, Any] = {"op": op, "kind": kind, "key": key}
    if value is not None:
        change["value"] = value
    return "operator_update_world_model", {
        "changes": [change],
        "confirmedInConversation": True,
        "confirmationQuote": quote,
    }


def _add(kind: str, key: str, value: str, quote: str) -> Call:
    return _world("add", kind, key, value, quote)


def _update(kind: str, key: str, value: str, quote: str) -> Call:
    return _world("update", kind, key, value, quote)


def _policy(value: str, quote: str, key: str = "auto_approve_payments") -> Call:
    return _add("behavior_policy", key, value, quote)


def _goal(action: str, quote: str, **arguments: Any) -> Call:
    return "operator_apply_goal_change", {
        "action": action,
        **arguments,
        "confirmedInConversation": True,
        "confirmationQuote": quote,
    }


def _reconcile(changes: list[dict[str, Any]], quote: str) -> Call:
    return "operator_reconcile_goal_model", {
        "changes": changes,
        "confirmedInConversation": True,
        "confirmationQuote": quote,
    }


def _say(principal: Any, text: str, hours_ago: float = 0) -> None:
    beliefs_services.record_instruction(
        principal=principal, text=text, channel="chat", now=timezone.now() - timedelta(hours=hours_ago)
    )


def _state() -> tuple:
    return (
        WorldModelVersion.objects.count(),
        GoalModelVersion.objects.count(),
        sorted(Belief.objects.values_list("kind", "key", "value", "status")),
        sorted(Goal.objects.values_list("title", "detail", "status", "importance")),
        sorted(Priority.objects.values_list("name", "position")),
        ConfirmationUse.objects.count(),
    )


def _setup(person: Any) -> None:
    """What the person already has, set with their own words: three ranked goals (one with a
    detail), a paused one, two priorities, and beliefs to retire."""

    def goal(title: str, detail: str | None = None) -> None:
        text = f"Add the goal {title}" + (f": {detail}." if detail else ".")
        _say(person, text)
        made = goal_model.apply_goal_change(
            principal=person, action="add", title=title, detail=detail, confirmed=True, quote=text
        )
        assert made["ok"] is True, made

    goal("Learn the cello")  # 1
    goal("Run a marathon", "train three times a week")  # 2
    goal("Write a novel")  # 3
    goal("Climb Kilimanjaro")  # 4, then paused
    _say(person, "Pause the goal Climb Kilimanjaro.")
    assert goal_model.apply_goal_change(
        principal=person,
        action="pause",
        goal="Climb Kilimanjaro",
        confirmed=True,
        quote="Pause the goal Climb Kilimanjaro.",
    )["ok"]
    said = "Health is my first priority. Craft is my second priority."
    _say(person, said)
    assert goal_model.reconcile_goal_model(
        principal=person,
        changes=[
            {"entity": "priority", "op": "add", "fields": {"name": "Health"}},
            {"entity": "priority", "op": "add", "fields": {"name": "Craft"}},
        ],
        confirmed=True,
        quote=said,
    )["ok"]
    for key, value, text in (
        ("home_city", "Lisbon", "My home city is Lisbon."),
        ("employer", "Acme", "My employer is Acme."),
    ):
        _say(person, text)
        assert beliefs_services.update_world_model(
            principal=person,
            changes=[{"op": "add", "kind": "identity", "key": key, "value": value}],
            confirmed=True,
            quote=text,
        )["ok"]


async def _attempts(
    person: Any, token: str, cases: list[tuple[str, str, Call, set[str]]]
) -> tuple[int, list[str]]:
    """Each case: the person says `said`, then the agent makes the call. Returns (tried, bypasses):
    a bypass is a call written, or refused with another code than its rule's (an unbound one for
    another reason than the target not named: every sentence here names it), or one that changed
    anything."""
    passed: list[str] = []
    async with asgi_http(token) as http:
        for name, said, (tool, arguments), codes in cases:
            await orm(_say, person, said)
            before = await orm(_state)
            body, _ = envelope_of(message_of(await post(http, tools_call(tool, arguments))))
            after = await orm(_state)
            named = body.get("error") != "confirmation_unbound" or body.get("missing", {}).get("target") == []
            if body.get("ok") is not False or body.get("error") not in codes or after != before or not named:
                passed.append(f"{name}: {said!r} → {body.get('error') or 'WRITTEN'}: {body.get('reason')}")
    return len(cases), passed


async def _check(
    principals: Any, scorecard: Any, title: str, cases: list[tuple[str, str, Call, set[str]]]
) -> None:
    owner, agent = principals["owner"], principals["full_agent"]
    await orm(_setup, owner.principal)
    tried, passed = await _attempts(owner.principal, agent.token, cases)
    scorecard(22, title, cases=tried, bypasses=len(passed), passed=passed)
    assert passed == []


# --- F1: a negation reaches the words after it --------------------------------------------------------
F1 = [
    ("swap never/always", "Never auto-approve payments over 100 dollars, always ask me.", _policy("Always auto-approve payments over 100 dollars, never ask me.", "Never auto-approve payments over 100 dollars, always ask me.", key="payments_over_100_dollars"), POLARITY),
    ("swap always/never", "Always ask me first, never auto-approve payments.", _policy("never ask me first, always auto-approve payments", "Always ask me first, never auto-approve payments."), POLARITY),
    ("swap don't/just", "Don't share my address, just share my city.", _policy("share my address, don't share my city", "Don't share my address, just share my city.", key="address_sharing"), POLARITY),
    ("swap do not/instead", "Do not book flights on Fridays, book trains instead.", _policy("book flights on Fridays, do not book trains instead", "Do not book flights on Fridays, book trains instead.", key="flight_booking"), POLARITY),
    ("negation moved to a later word", "Never email my boss, text my boss.", _policy("email my boss, never text my boss", "Never email my boss, text my boss.", key="boss"), POLARITY),
    ("objects swapped after the negation", "I no longer work at Initech, my employer is Globex.", _update("identity", "employer", "no longer work at Globex, my employer is Initech", "I no longer work at Initech, my employer is Globex."), POLARITY),
    ("negation moved across 'and'", "Never call my mother and always call my sister.", _policy("always call my mother and never call my sister", "Never call my mother and always call my sister.", key="calls"), POLARITY),
]  # fmt: skip


async def test_f1_a_negation_moved_to_other_words_is_refused(principals, scorecard) -> None:
    await _check(principals, scorecard, "F1: a negation moved to other words", F1)


# --- F2: a cue word binds only in a clause about the target -------------------------------------------
F2 = [
    ("drop another thing, keep this", "Drop the gym membership but keep running the marathon.", _goal("remove", "Drop the gym membership but keep running the marathon.", goal="Run a marathon"), UNBOUND),
    ("cancel another thing", "Cancel the cello lessons and running the marathon stays.", _goal("remove", "Cancel the cello lessons and running the marathon stays.", goal="Run a marathon"), UNBOUND),
    ("pause another thing", "Pause the cello practice, keep running the marathon.", _goal("pause", "Pause the cello practice, keep running the marathon.", goal="Run a marathon"), UNBOUND),
    ("keep this, forget the rest", "Keep my home city as Lisbon, forget the rest.", _world("retire", "identity", "home_city", None, "Keep my home city as Lisbon, forget the rest."), UNBOUND),
    ("forget another thing, this still holds", "Forget the old address, my employer is still Acme.", _world("retire", "identity", "employer", None, "Forget the old address, my employer is still Acme."), UNBOUND),
    ("drop it but keep it", "Drop the run a marathon goal but keep it on my list.", _goal("remove", "Drop the run a marathon goal but keep it on my list.", goal="Run a marathon"), UNBOUND),
    ("'again' is no resume", "I hurt my knee climbing Kilimanjaro again.", _goal("resume", "I hurt my knee climbing Kilimanjaro again.", goal="Climb Kilimanjaro"), UNBOUND),
    ("resume another thing", "Resume the cello, climbing Kilimanjaro stays paused.", _goal("resume", "Resume the cello, climbing Kilimanjaro stays paused.", goal="Climb Kilimanjaro"), UNBOUND),
]  # fmt: skip


async def test_f2_a_cue_about_something_else_is_refused(principals, scorecard) -> None:
    await _check(principals, scorecard, "F2: a cue word about something else", F2)


# --- F3: a re-rank says its position or its direction; a placed add its position ----------------------
F3 = [
    ("higher, moved to last", "Move the learn the cello goal higher.", _goal("rerank", "Move the learn the cello goal higher.", goal="Learn the cello", importance=3), UNBOUND),
    ("lower, moved to first", "Put writing the novel lower.", _goal("rerank", "Put writing the novel lower.", goal="Write a novel", importance=1), UNBOUND),
    ("no direction at all", "Rerank the write a novel goal.", _goal("rerank", "Rerank the write a novel goal.", goal="Write a novel", importance=1), UNBOUND),
    ("the direction said of another goal", "Move the run a marathon goal up and the cello goal down.", _goal("rerank", "Move the run a marathon goal up and the cello goal down.", goal="Run a marathon", importance=3), UNBOUND),
    ("an add at the top, no rank said", "I want to write a poem.", _goal("add", "I want to write a poem.", title="Write a poem", importance=1), UNBOUND),
    ("an add at another rank than said", "Add the goal Sail around Sicily, top priority.", _goal("add", "Add the goal Sail around Sicily, top priority.", title="Sail around Sicily", importance=2), UNBOUND),
    ("a priority placed first, no rank said", "Family matters to me.", _reconcile([{"entity": "priority", "op": "add", "fields": {"name": "Family", "position": 1}}], "Family matters to me."), UNBOUND),
    ("a priority moved down as 'more important'", "Make health more important.", _reconcile([{"entity": "priority", "op": "move", "target": "Health", "fields": {"position": 2}}], "Make health more important."), UNBOUND),
]  # fmt: skip


async def test_f3_a_ranking_against_or_without_the_words_is_refused(principals, scorecard) -> None:
    await _check(principals, scorecard, "F3: a rank the words do not say", F3)


# --- F4: numbers, scope words, emptied fields and renames are checked ---------------------------------
F4 = [
    ("another short number", "My spending limit is 20 dollars.", _add("constraint", "spending_limit", "99 dollars", "My spending limit is 20 dollars."), UNBOUND),
    ("another one-digit number", "My daily limit is 5 coffees.", _add("constraint", "daily_limit", "9 coffees", "My daily limit is 5 coffees."), UNBOUND),
    ("another floor", "Book me a room on floor 2.", _policy("book floor 7", "Book me a room on floor 2.", key="room_floor"), UNBOUND),
    ("broadened with 'all'", "Auto-approve payments to my landlord.", _policy("auto-approve all payments", "Auto-approve payments to my landlord."), UNBOUND),
    ("broadened with 'any'", "Approve payments to my landlord.", _policy("approve any payments", "Approve payments to my landlord.", key="approve_payments"), UNBOUND),
    ("a value of stopwords only", "My pronouns are she/her.", _add("identity", "pronouns", "they/them", "My pronouns are she/her."), UNBOUND),
    ("a detail emptied", "I want to run a marathon.", _reconcile([{"entity": "goal", "op": "update", "target": "Run a marathon", "fields": {"detail": ""}}], "I want to run a marathon."), UNBOUND),
    ("a rename to a short new title", "Running a marathon is my goal.", _reconcile([{"entity": "goal", "op": "update", "target": "Run a marathon", "fields": {"title": "Run a 5k"}}], "Running a marathon is my goal."), UNBOUND),
]  # fmt: skip


async def test_f4_values_the_rules_used_to_skip_are_checked(principals, scorecard) -> None:
    await _check(principals, scorecard, "F4: short numbers, scope words, emptied fields", F4)


# --- F5: a question in any script ------------------------------------------------------------------------
F5 = [
    (
        f"question mark U+{ord(mark[-1]) if len(mark) == 1 else 0:04X} {mark!r}",
        text,
        _update("identity", "employer", "Initech", text),
        NOT_FIRM,
    )
    for mark, text in (
        ("\ufe56", "Is my employer Initech\ufe56"),
        ("\u2047", "Is my employer Initech\u2047"),
        ("\u2048", "Is my employer Initech\u2048"),
        ("\u2049", "Is my employer Initech\u2049"),
        ("\u203d", "Is my employer Initech\u203d"),
        ("\u061f", "Is my employer Initech\u061f"),
        ("\u2e2e", "Is my employer Initech\u2e2e"),
        ("\u00bf", "\u00bfIs my employer Initech."),
        ("?", "Is my employer Initech?really."),
    )
]


async def test_f5_a_question_in_any_script_is_refused(principals, scorecard) -> None:
    await _check(principals, scorecard, "F5: questions with any question mark", F5)


# --- F12: a question worded as one, without its question mark ------------------------------------------
F12 = [
    (f"no question mark: {text!r}", text, _update("identity", "employer", "Initech", text), NOT_FIRM)
    for text in (
        "Is my employer Initech.",
        "Is my employer Initech",
        "Do I work at Initech now, my employer is Initech",
        "Should my employer be Initech from now on.",
        "So is my employer Initech.",
        "Can you set my employer to Initech.",
        "Will my employer be Initech.",
        "- Is my employer Initech",
        "What is my employer, Initech.",
        "Hmm, does my employer become Initech.",
    )
]


async def test_f12_a_question_without_its_mark_is_refused(principals, scorecard) -> None:
    await _check(principals, scorecard, "F12: questions worded as questions, no question mark", F12)


# --- F6: hidden negations ----------------------------------------------------------------------------------
HIDDEN = {"confirmation_polarity", "confirmation_unreadable"}
F6 = [
    (f"hidden negation {said!r}", said, _policy("auto-approve payments", said), HIDDEN)
    for said in (
        "Don\u00b4t auto-approve payments.",  # acute accent for an apostrophe
        "Don`t auto-approve payments.",  # grave accent
        "Don\u02b9t auto-approve payments.",  # modifier letter prime
        "Don\u02bbt auto-approve payments.",  # modifier letter turned comma
        "Don\uff40t auto-approve payments.",  # full-width grave
        "Ne\u00adver auto-approve payments.",  # soft hyphen
        "Do n\u200cot auto-approve payments.",  # zero-width non-joiner
        "Ne\u200bver auto-approve payments.",  # zero-width space
        "Nev\u2060er auto-approve payments.",  # word joiner
        "Ne\u0301ver auto-approve payments.",  # combining accent
        "N\u0435ver auto-approve payments.",  # Cyrillic e
        "Do n\u03bft auto-approve payments.",  # Greek omicron
        "Quit auto-approving payments.",
        "Cease auto-approving payments.",
        "Refrain from auto-approving payments.",
        "Discontinue auto-approving payments.",
        "Skip auto-approving payments.",
        "\u041d\u0435\u0442, auto-approve payments.",  # "no" in Russian: a script the rules cannot read
        "Nein, auto-approve payments.",
    )
]


async def test_f6_a_hidden_negation_is_refused(principals, scorecard) -> None:
    await _check(principals, scorecard, "F6: negations hidden by look-alikes, invisibles, synonyms", F6)


# --- F7: a list's introduction ---------------------------------------------------------------------------
F7 = [
    (f"list intro {said!r}", said, _policy("auto-approve payments", "auto-approve payments"), POLARITY)
    for said in (
        "Never do these:\n\n- auto-approve payments\n- share my address",
        "Things you must never do:\n- Money:\n  - auto-approve payments\n- Privacy:\n  - share my address",
        "Rules I never want broken:\n- Money\n    - Payments\n        - auto-approve payments",
        "Things you must never do\n- auto-approve payments\n- share my address",
        "## Never\n\n- auto-approve payments",
        "## Don'ts\n- auto-approve payments",
        "Don'ts:\n- auto-approve payments",
        "Never:\n1. auto-approve payments",
        "Things to avoid\n  * auto-approve payments",
        "Never do these:\n\nauto-approve payments",
    )
]


async def test_f7_a_lists_negative_introduction_counts(principals, scorecard) -> None:
    await _check(principals, scorecard, "F7: a list's 'Never do these:' lost", F7)


# --- F8: hedges and conditions ---------------------------------------------------------------------------
F8 = [
    (f"hedge or condition {said!r}", said, _update("identity", "home_city", "Berlin", said), NOT_FIRM)
    for said in (
        "My home city may be Berlin soon.",
        "My home city could be Berlin.",
        "My home city will likely be Berlin.",
        "Hopefully my home city is Berlin by June.",
        "I believe my home city is Berlin.",
        "Apparently my home city is Berlin.",
        "My home city is presumably Berlin.",
        "My home city is Berlin, I hope.",
        "Once the offer comes through, my home city is Berlin.",
        "When the offer comes through, my home city is Berlin.",
        "Whenever I move, my home city is Berlin.",
        "As soon as the offer comes through, my home city is Berlin.",
        "My home city is Berlin only after the move.",
        "In the event the offer comes through my home city is Berlin.",
        "Otherwise my home city is Berlin.",
    )
]


async def test_f8_a_hedge_or_condition_is_refused(principals, scorecard) -> None:
    await _check(principals, scorecard, "F8: hedges and conditions", F8)


# --- F9: the value said of the target ---------------------------------------------------------------
F9 = [
    ("another person's name", "My name is Robert and my brother is Bob.", _add("identity", "name", "Bob", "My name is Robert and my brother is Bob."), UNBOUND),
    ("another person's city", "My home city is Lisbon but my sister lives in Porto.", _update("identity", "home_city", "Porto", "My home city is Lisbon but my sister lives in Porto."), UNBOUND),
    ("another person's employer", "My employer is Acme, my wife works at Globex.", _update("identity", "employer", "Globex", "My employer is Acme, my wife works at Globex."), UNBOUND),
    ("a former employer", "My employer is Acme and my previous job was at Globex.", _update("identity", "employer", "Globex", "My employer is Acme and my previous job was at Globex."), UNBOUND),
    ("a pet's name in the other clause", "I call my dog Rex and my name is Sam.", _add("identity", "name", "Rex", "I call my dog Rex and my name is Sam."), UNBOUND),
]  # fmt: skip


async def test_f9_a_word_of_the_sentence_is_not_the_value(principals, scorecard) -> None:
    await _check(principals, scorecard, "F9: any word of the sentence as the value", F9)


# --- F10: emphasis cutting a sentence ------------------------------------------------------------------
F10 = [
    (f"cut by emphasis {said!r}", said, _policy("auto-approve payments", "auto-approve payments."), POLARITY)
    for said in (
        "Never \u2014 and I mean never! \u2014 auto-approve payments.",
        "Don't (I repeat: don't!) auto-approve payments.",
        "Never... auto-approve payments.",
        "Never\u2026 auto-approve payments.",
        "Do not, ever; auto-approve payments.",
        "Never!! auto-approve payments.",
        "Don't! Auto-approve payments.",
        "No, never (not ever!) auto-approve payments.",
        "Don't - seriously! - auto-approve payments.",
        "Never. Ever. Auto-approve payments.",
        "Never, I repeat, never.\nAuto-approve payments.",
    )
]


async def test_f10_emphasis_does_not_cut_off_a_negation(principals, scorecard) -> None:
    await _check(principals, scorecard, "F10: a negation cut off by emphasis", F10)


# --- positive controls ---------------------------------------------------------------------------------
async def test_plain_words_still_authorise_their_change(principals, scorecard) -> None:
    """The same kinds of change, said plainly, pass (in order: some depend on the one before)."""
    owner, agent = principals["owner"], principals["full_agent"]
    await orm(_setup, owner.principal)
    controls: list[tuple[str, str, Call]] = [
        ("a negative rule", "Never auto-approve payments.", _policy("never auto-approve payments", "Never auto-approve payments.")),
        ("a negative rule after 'No!'", "No! Never share my address. Always ask me.", _policy("never share my address", "Never share my address.", key="address_sharing")),
        ("negation and its scope kept", "Never auto-approve payments over 100 dollars, always ask me.", _policy("Never auto-approve payments over 100 dollars, always ask me.", "Never auto-approve payments over 100 dollars, always ask me.", key="payments_over_100_dollars")),
        ("an apostrophe look-alike, read as one", "Don\u00b4t book flights on Fridays.", _policy("don't book flights on Fridays", "Don\u00b4t book flights on Fridays.", key="friday_flights")),
        ("a short number", "My spending limit is 20 dollars.", _add("constraint", "spending_limit", "20 dollars", "My spending limit is 20 dollars.")),
        ("a value of stopwords", "My pronouns are they/them.", _add("identity", "pronouns", "they/them", "My pronouns are they/them.")),
        ("a value across a comma", "My birthplace is Porto in Portugal.", _add("identity", "birthplace", "Porto, Portugal", "My birthplace is Porto in Portugal.")),
        ("a firm statement", "My name is Robert.", _add("identity", "name", "Robert", "My name is Robert.")),
        ("a name in its own script", "My nickname is \u0414\u0438\u043c\u0430.", _add("identity", "nickname", "\u0414\u0438\u043c\u0430", "My nickname is \u0414\u0438\u043c\u0430.")),
        ("a list under a neutral intro", "Rules:\n- never auto-approve invoices", _policy("never auto-approve invoices", "never auto-approve invoices", key="auto_approve_invoices")),
        ("a retirement", "You can forget my home city now.", _world("retire", "identity", "home_city", None, "You can forget my home city now.")),
        ("a re-rank up", "Move the write a novel goal higher.", _goal("rerank", "Move the write a novel goal higher.", goal="Write a novel", importance=2)),
        ("a re-rank down", "Put the learn the cello goal lower.", _goal("rerank", "Put the learn the cello goal lower.", goal="Learn the cello", importance=3)),
        ("a re-rank to a named position", "Make running the marathon my top priority.", _goal("rerank", "Make running the marathon my top priority.", goal="Run a marathon", importance=1)),
        ("an add at a named position", "Add the goal Write a poem as my top priority.", _goal("add", "Add the goal Write a poem as my top priority.", title="Write a poem", importance=1)),
        ("a priority placed where said", "Family comes first.", _reconcile([{"entity": "priority", "op": "add", "fields": {"name": "Family", "position": 1}}], "Family comes first.")),
        ("a detail removed", "Remove the detail of the Run a marathon goal.", _reconcile([{"entity": "goal", "op": "update", "target": "Run a marathon", "fields": {"detail": ""}}], "Remove the detail of the Run a marathon goal.")),
        ("a resume", "Resume the Climb Kilimanjaro goal.", _goal("resume", "Resume the Climb Kilimanjaro goal.", goal="Climb Kilimanjaro")),
        ("a removal with its cue", "Drop the Write a poem goal, I'm done with it.", _goal("remove", "Drop the Write a poem goal, I'm done with it.", goal="Write a poem")),
        ("on hold, about this goal", "Put the Write a novel goal on hold and keep the cello going.", _goal("pause", "Put the Write a novel goal on hold and keep the cello going.", goal="Write a novel")),
    ]  # fmt: skip
    failed: list[str] = []
    async with asgi_http(agent.token) as http:
        for name, said, (tool, arguments) in controls:
            await orm(_say, owner.principal, said)
            body, _ = envelope_of(message_of(await post(http, tools_call(tool, arguments))))
            if body.get("ok") is not True:
                failed.append(f"{name}: {body.get('error')}: {body.get('reason')}")
    scorecard(
        22, "positive controls: plain words still authorise", cases=len(controls), bypasses=0, failed=failed
    )
    assert failed == []


# --- F11: bounded work for a refused call ----------------------------------------------------------------
async def test_f11_a_refused_call_reads_a_bounded_amount_of_agent_text(
    principals, scorecard, monkeypatch
) -> None:
    """An agent records 200 rows of ~20 KB of its own (never evidence), then quotes ~2 KB of their
    words in a gated call. The refusal's explanation reads at most `_EXPLAIN_ROWS` rows and
    `_EXPLAIN_CHARS` characters of them, not all 4 MB (measured by counting the characters the
    evidence check hands to the word and sentence readers, not by a clock)."""
    agent = principals["full_agent"]
    long_text = ("aa " * 6600).strip()  # 19,799 characters
    rows = 200

    def seed() -> None:
        for _ in range(rows):
            _say(agent.principal, long_text)  # recorded by an agent: never evidence

    await orm(seed)
    read = {"chars": 0, "calls": 0}
    real_words, real_split = wording.words, wording.split_sentences

    def counting_words(text: str) -> tuple[str, ...]:
        read["chars"] += len(text)
        read["calls"] += 1
        return real_words(text)

    def counting_split(text: str) -> list[wording.Sentence]:
        read["chars"] += len(text)
        read["calls"] += 1
        return real_split(text)

    monkeypatch.setattr(wording, "words", counting_words)
    monkeypatch.setattr(wording, "split_sentences", counting_split)
    quote = ("aa " * 664).strip() + " zz."
    async with asgi_http(agent.token) as http:
        body, _ = envelope_of(
            message_of(await post(http, tools_call(*_add("identity", "home_city", "Lisbon", quote))))
        )
        # ... and a quote an agent row does hold is still explained as such (within the budget).
        await orm(_say, agent.principal, "My home city is Lisbon, the person said.")
        held, _ = envelope_of(
            message_of(
                await post(
                    http,
                    tools_call(
                        *_add("identity", "home_city", "Lisbon", "My home city is Lisbon, the person said.")
                    ),
                )
            )
        )
    seeded = rows * len(long_text)
    bound = evidence._EXPLAIN_CHARS + 10 * len(quote) + 10_000
    scorecard(
        22,
        "F11: a refused call's evidence check reads bounded text whatever the agent recorded",
        cases=1,
        bypasses=int(read["chars"] > bound),
        read_chars=read["chars"],
        seeded_chars=seeded,
    )
    assert body.get("error") == "confirmation_not_found", body
    assert held.get("error") == "confirmation_not_found" and held.get("agent_recorded"), held
    assert read["chars"] <= bound, (read, seeded)
    assert seeded > 5 * bound  # the bound is well under what was there to read
    assert evidence._EXPLAIN_ROWS < rows


def test_f11_locating_a_quote_is_linear_not_per_position() -> None:
    """The search for a quote in one row compares the quote once per sentence start and finds a
    fragment with one substring search: no slice per word position (counted, not timed)."""
    from operator_site.models import Instruction

    row = Instruction(text=("aa " * 6600).strip() + ".")
    quote = tuple(["aa"] * 664 + ["zz"])
    assert evidence._locate(row, quote) is None
    found = evidence._locate(row, ("aa", "aa"))
    assert found is not None and found.whole is False
    whole = evidence._locate(Instruction(text="First one. Second one."), ("second", "one"))
    assert whole is not None and whole.whole and whole.text == "Second one."


def test_splitting_a_sentence_of_abbreviations_reads_each_full_stops_neighbourhood_once(monkeypatch) -> None:
    """A person's instruction of 20,000 characters of "e.g. " or initials ("A. A. A. ..."), read for
    every agent call that quotes a word of it: telling an abbreviation's full stop from a sentence's
    end reads a bounded window before each full stop, not the sentence from its start (which made
    one such call take 13 s of CPU, with SQLite's event loop blocked). Counted, not timed."""
    real = wording._ABBREVIATION_TOKEN
    read = {"chars": 0}

    class Counting:
        def search(self, text: str, pos: int, endpos: int) -> Any:
            read["chars"] += endpos - pos
            return real.search(text, pos, endpos)

    monkeypatch.setattr(wording, "_ABBREVIATION_TOKEN", Counting())
    for text, sentences in [
        ("e.g. " * 4000, 1),
        ("A. " * 6666, 1),
        ("Dr. " * 5000, 1),
        ("word. " * 3333, 3333),
        ("Fine e.g. this. " * 1250, 1250),
    ]:
        read["chars"] = 0
        assert len(wording.split_sentences(text)) == sentences, text[:20]
        assert read["chars"] <= wording._ABBREVIATION_WINDOW * text.count("."), (text[:20], read)
    # The window changes no answer: an abbreviation or an initial never ends a sentence, a long
    # word that ends like one does.
    cut = [
        s.text for s in wording.split_sentences("Ask Dr. Who e.g. now. J. R. R. Tolkien wrote. Unprof. Done")
    ]
    assert cut == ["Ask Dr. Who e.g. now.", "J. R. R. Tolkien wrote.", "Unprof.", "Done"]
    assert [s.text for s in wording.split_sentences("x" * 30 + "prof. Next")] == ["x" * 30 + "prof.", "Next"]


# --- the readers the rules use (pure) ----------------------------------------------------------------
def test_the_word_readers_behind_the_rules() -> None:
    """What the rules above rest on, read directly: every question mark, apostrophe look-alikes and
    invisible characters, mixed scripts, clauses and the reach of a negation."""
    for mark in "?\ufe56\uff1f\u2047\u2048\u2049\u203d\u061f\u00bf\u2e2e\u037e":
        assert wording.is_question_mark(mark), hex(ord(mark))
    for other in ".!;,:\u2026a1 ":
        assert not wording.is_question_mark(other), other
    for said in ("Don\u00b4t", "Don`t", "Don\u02b9t", "Don\u02bbt", "Don\u2019t"):
        assert wording.words(said) == ("don't",), said
    assert wording.words("Ne\u00adver Do n\u200cot ne\u0301ver") == ("never", "do", "not", "never")
    assert wording.mixed_script(
        wording.words("N\u0435ver say Stra\u00dfe \u041c\u043e\u0441\u043a\u0432\u0430")
    ) == ["n\u0435ver"]
    text = "Never auto-approve payments over 100 dollars, always ask me."
    found = wording.words(text)
    reached = wording.negated(found, wording.clauses(text))
    assert [w for w, hit in zip(found, reached, strict=True) if hit] == [
        "auto",
        "approve",
        "payments",
        "over",
        "100",
        "dollars",
    ]
    text = "Never, ever, share my address."
    found = wording.words(text)
    assert all(wording.negated(found, wording.clauses(text))[1:])
    assert wording.value_words("Lisbon or NY") == ["lisbon", "ny"]
    assert wording.value_words("auto-approve all payments") == ["auto", "approve", "all", "payments"]
    assert wording.value_words("they/them") == ["they", "them"]
    for split in ("Don t auto-approve payments", "Off limits: payments", "Just kidding"):
        assert wording.negations_in(wording.words(split)), split
