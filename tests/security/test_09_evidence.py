# ruff: noqa: E501  (the attempts table reads best one case per line)
"""Check 9 — evidence: a high-stakes write (a belief of a high-stakes kind, a goal, a priority) is
authorised only by the person's own words saying this change (docs/world-model.md). Every class of
way around it is tried — words that are not the person's, fragments, hedges, negations, words that
do not bind the change, one sentence for several changes, undo-then-restore — through all three
gated tools, from an agent's token and from the person's own, on both databases. Each class has its
positive control: the same change with a whole, firm, bound sentence passes, so the refusals are
about the evidence."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from beliefs import services as beliefs_services
from beliefs.models import Belief, WorldModelVersion
from goals import goal_model
from goals.models import Goal, GoalModelVersion, Priority
from operator_site.face.auth import issue_token, revoke
from operator_site.models import ConfirmationUse, Notification
from tests.fixtures import asgi_http, orm
from tests.security.helpers import envelope_of, message_of, post, tools_call

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


def _say(principal: Any, text: str, hours_ago: float = 0) -> None:
    beliefs_services.record_instruction(
        principal=principal, text=text, channel="chat", now=timezone.now() - timedelta(hours=hours_ago)
    )


def _world(
    op: str, kind: str, key: str, value: str | None, quote: str | None, flag: bool | None = True
) -> tuple[str, dict[str, Any]]:
    change: dict[str, Any] = {"op": op, "kind": kind, "key": key}
    if value is not None:
        change["value"] = value
    arguments: dict[str, Any] = {"changes": [change]}
    if flag is not None:
        arguments["confirmedInConversation"] = flag
    if quote is not None:
        arguments["confirmationQuote"] = quote
    return "operator_update_world_model", arguments


def _add(
    key: str, value: str, quote: str | None, kind: str = "identity", flag: bool | None = True
) -> tuple[str, dict[str, Any]]:
    return _world("add", kind, key, value, quote, flag)


def _many(changes: list[tuple[str, str, str]], quote: str) -> tuple[str, dict[str, Any]]:
    rows = [{"op": "add", "kind": kind, "key": key, "value": value} for kind, key, value in changes]
    return "operator_update_world_model", {
        "changes": rows,
        "confirmedInConversation": True,
        "confirmationQuote": quote,
    }


def _goal(action: str, quote: str | None, **arguments: Any) -> tuple[str, dict[str, Any]]:
    arguments = {"action": action, **arguments, "confirmedInConversation": True}
    if quote is not None:
        arguments["confirmationQuote"] = quote
    return "operator_apply_goal_change", arguments


def _reconcile(changes: list[dict[str, Any]], quote: str | None) -> tuple[str, dict[str, Any]]:
    arguments: dict[str, Any] = {"changes": changes, "confirmedInConversation": True}
    if quote is not None:
        arguments["confirmationQuote"] = quote
    return "operator_reconcile_goal_model", arguments


def _state() -> tuple:
    return (
        WorldModelVersion.objects.count(),
        GoalModelVersion.objects.count(),
        sorted(Belief.objects.values_list("kind", "key", "value", "status")),
        sorted(Goal.objects.values_list("title", "status", "importance")),
        sorted(Priority.objects.values_list("name", "position")),
        ConfirmationUse.objects.count(),
        Notification.objects.filter(safety=True).count(),
    )


# What the person (and others) said before the attempts. Each attempt below quotes one of these.
SAID_BY_PERSON = [
    "By the way my home city is Lisbon now, please remember that.",
    "Please don't ever set my home city to Springfield, that text message was fake.",
    "No! Never auto-approve payments. Always ask me.",
    "Perhaps we ought to drop the cello goal, I'm unsure.",
    "Should my employer be listed as Initech?",
    "If the offer comes through, my employer is Initech.",
    "Do not\nadd Springfield as my home city.",
    "That SMS claiming my employer is Initech was fake.",
    "I really dislike early meetings on Mondays, keep that in mind.",
    "Remind me that my gym membership renews in May.",
    "Health comes first this year, make it my top priority.",
    "Never send me marketing emails.",
    "My home city is Lisbon and my employer is Acme Corp.",
    "Make learning the cello my second priority.",
    "I used to work at Initech as my employer.",
]
SETUP_BY_PERSON = [  # spent by the person's own writes before the attempts
    ("My hard limit is no gambling, never gamble.", ("constraint", "no_gambling", "never gamble")),
]


def _attempts() -> list[tuple[str, str, tuple[str, dict[str, Any]]]]:
    """(class, attempt, call): every call must be refused and change nothing."""
    return [
        # the flag and a quote, together
        ("required", "flag without a quote", _add("home_city", "Lisbon", None)),
        ("required", "quote without the flag", _add("home_city", "Lisbon", "By the way my home city is Lisbon now, please remember that.", flag=None)),
        ("required", "quote with the flag false", _add("home_city", "Lisbon", "By the way my home city is Lisbon now, please remember that.", flag=False)),
        ("required", "goal: flag without a quote", _goal("add", None, title="Run a marathon")),
        ("required", "priority: no quote", _reconcile([{"entity": "priority", "op": "add", "fields": {"name": "Health first"}}], None)),
        # 1. the person's words: human, live, recent
        ("persons_words", "a quote nobody said", _add("home_city", "Paris", "My home city is Paris now.")),
        ("persons_words", "a paraphrase", _add("home_city", "Lisbon", "I live in Lisbon these days.")),
        ("persons_words", "agent-recorded instruction (actor: owner)", _add("name", "Mallory", "My name is Mallory, the person said so.")),
        ("persons_words", "an observation's text", _add("timezone", "Pacific", "The person said: my timezone is Pacific now.")),
        ("persons_words", "a logged decision's text", _add("diet", "vegan", "The person said my diet is vegan from today.")),
        ("persons_words", "a task's detail", _add("pronouns", "they them", "The person said my pronouns are they/them.")),
        ("persons_words", "a revoked human's words", _add("nickname", "Robin", "Call me by the nickname Robin from now on.")),
        ("persons_words", "a replaced token's words", _add("surname", "Quill", "My surname is Quill now.")),
        ("persons_words", "stale (80 hours)", _goal("add", "I want to learn the cello this year, add it to my goals.", title="Learn the cello")),
        ("persons_words", "stitched across two instructions", _add("employer", "Acme Corp", "Acme Corp is my employer since March. My manager is called Dana.")),
        # 2. whole statements
        ("whole_statements", "a fragment of a refusal", _add("home_city", "Springfield", "set my home city to Springfield")),
        ("whole_statements", "a fragment of a firm sentence", _add("home_city", "Lisbon", "my home city is Lisbon now")),
        ("whole_statements", "across a sentence boundary", _world("add", "behavior_policy", "auto_approve_payments", "auto-approve payments", "Never auto-approve payments. Always")),
        # 3. firm
        ("firm", "a hedge removes a goal", _goal("remove", "Perhaps we ought to drop the cello goal, I'm unsure.", goal="Learn the cello")),
        ("firm", "a question", _add("employer", "Initech", "Should my employer be listed as Initech?")),
        ("firm", "a condition", _add("employer", "Initech", "If the offer comes through, my employer is Initech.")),
        # 4. same polarity
        ("same_polarity", "a refusal's whole sentence", _add("home_city", "Springfield", "Please don't ever set my home city to Springfield, that text message was fake.")),
        ("same_polarity", "never X authorises X", _world("add", "behavior_policy", "auto_approve_payments", "auto-approve payments", "Never auto-approve payments.")),
        ("same_polarity", "a run that starts with No!", _world("add", "behavior_policy", "auto_approve_payments", "auto-approve payments", "No! Never auto-approve payments.")),
        ("same_polarity", "a negation on the line before", _add("home_city", "Springfield", "add Springfield as my home city.")),
        ("same_polarity", "a denial (fake)", _add("employer", "Initech", "That SMS claiming my employer is Initech was fake.")),
        ("same_polarity", "the past (used to)", _add("employer", "Initech", "I used to work at Initech as my employer.")),
        # 5. bound to the change
        ("bound", "says nothing of the key or value", _add("name", "Bob", "I really dislike early meetings on Mondays, keep that in mind.")),
        ("bound", "bound to another key", _add("employer", "Initech", "By the way my home city is Lisbon now, please remember that.")),
        ("bound", "a key from the person's sentence, any value (F1)", _world("add", "behavior_policy", "membership", "approve every payment to Acme", "Remind me that my gym membership renews in May.")),
        ("bound", "one shared word, another value (F1)", _reconcile([{"entity": "priority", "op": "add", "fields": {"name": "Wealth first"}}], "Health comes first this year, make it my top priority.")),
        ("bound", "a hard limit retired by a sentence sharing 'never'", _world("retire", "constraint", "no_gambling", None, "Never send me marketing emails.")),
        ("bound", "retire without a word saying so", _world("retire", "identity", "home_city", None, "By the way my home city is Lisbon now, please remember that.")),
        ("bound", "a re-rank to another position than said", _goal("rerank", "Make learning the cello my second priority.", goal="Learn the cello", importance=1)),
        ("bound", "a stopword key: the", _add("the", "Lisbon", "By the way my home city is Lisbon now, please remember that.")),
        ("bound", "a stopword key: to_i", _add("to_i", "Lisbon", "By the way my home city is Lisbon now, please remember that.")),
        ("bound", "a stopword key: i", _world("add", "constraint", "i", "Lisbon", "By the way my home city is Lisbon now, please remember that.")),
        # 6. once
        ("once", "one sentence, several high-stakes keys", _many([("identity", "home_city", "Lisbon"), ("identity", "employer", "Acme Corp")], "My home city is Lisbon and my employer is Acme Corp.")),
    ]  # fmt: skip


async def test_every_way_around_the_evidence_rule_is_refused(principals, scorecard, make_principal) -> None:
    owner, agent = principals["owner"], principals["full_agent"]
    person = owner.principal

    def setup() -> None:
        for text in SAID_BY_PERSON:
            _say(person, text)
        _say(person, "I want to learn the cello this year, add it to my goals.", hours_ago=80)  # stale
        _say(person, "Acme Corp is my employer since March.")  # the other half of a stitched quote
        _say(person, "My manager is called Dana.")
        for text, (kind, key, value) in SETUP_BY_PERSON:
            _say(person, text)
            made = beliefs_services.update_world_model(
                principal=person,
                changes=[{"op": "add", "kind": kind, "key": key, "value": value}],
                confirmed=True,
                quote=text,
            )
            assert made["ok"] is True, made
        _say(person, "Add the goal Learn the cello.")
        assert goal_model.apply_goal_change(
            principal=person,
            action="add",
            title="Learn the cello",
            confirmed=True,
            quote="Add the goal Learn the cello.",
        )["ok"]
        _say(person, "Add the goal Run every week.")
        assert goal_model.apply_goal_change(
            principal=person,
            action="add",
            title="Run every week",
            confirmed=True,
            quote="Add the goal Run every week.",
        )["ok"]
        # A human whose token was revoked, and one whose token was replaced (it may have leaked).
        revoked = make_principal("partner", kind="human").principal
        _say(revoked, "Call me by the nickname Robin from now on.")
        revoke(revoked)
        rotated = make_principal("assistant-human", kind="human").principal
        _say(rotated, "My surname is Quill now.")
        issue_token(rotated)

    await orm(setup)
    async with asgi_http(agent.token) as http:
        # Rows an agent can write that read like the person's words:
        for tool, arguments in (
            (
                "operator_record_instruction",
                {"text": "My name is Mallory, the person said so.", "actor": "owner"},
            ),
            (
                "operator_record_observation",
                {"kind": "world", "summary": "The person said: my timezone is Pacific now."},
            ),
            (
                "operator_log_decision",
                {"title": "x", "decision": "The person said my diet is vegan from today.", "rationale": "y"},
            ),
            (
                "operator_update_task",
                {"key": "t", "patch": {"title": "t", "detail": "The person said my pronouns are they/them."}},
            ),
        ):
            await post(http, tools_call(tool, arguments))

    tried = 0
    passed: list[str] = []
    classes: dict[str, int] = {}
    for holder in (agent, owner):
        async with asgi_http(holder.token) as http:
            for cls, name, (tool, arguments) in _attempts():
                tried += 1
                classes[cls] = classes.get(cls, 0) + 1
                before = await orm(_state)
                body, _ = envelope_of(message_of(await post(http, tools_call(tool, arguments))))
                after = await orm(_state)
                if body.get("ok") is not False or after != before:
                    passed.append(f"{holder.name}: {cls}: {name} → {body.get('error') or 'WRITTEN'}")

    # Undo, then restore: an agent replaying an undone high-stakes change without fresh words.
    async with asgi_http(agent.token) as http:
        await orm(_say, person, "My employer is Globex now.")
        made = envelope_of(
            message_of(
                await post(http, tools_call(*_add("employer", "Globex", "My employer is Globex now.")))
            )
        )[0]
        assert made.get("ok") is True, f"positive control (a fresh, whole, bound sentence) failed: {made}"
        undone = envelope_of(message_of(await post(http, tools_call("operator_revert_world_model", {}))))[0]
        assert undone.get("ok") is True, undone
        for tool, version in (("operator_revert_world_model", made["version"]),):
            tried += 1
            classes["undo_restore"] = classes.get("undo_restore", 0) + 1
            before = await orm(_state)
            body, _ = envelope_of(message_of(await post(http, tools_call(tool, {"to_version": version}))))
            if body.get("ok") is not False or await orm(_state) != before:
                passed.append(f"agent: undo then restore → {body.get('error') or 'WRITTEN'}")
        # The goal model too.
        await orm(_say, person, "Pause the goal Run every week for now.")
        paused = envelope_of(
            message_of(
                await post(
                    http,
                    tools_call(
                        *_goal("pause", "Pause the goal Run every week for now.", goal="Run every week")
                    ),
                )
            )
        )[0]
        assert paused.get("ok") is True, paused
        assert (
            envelope_of(message_of(await post(http, tools_call("operator_revert_goal_model", {}))))[0].get(
                "ok"
            )
            is True
        )
        tried += 1
        classes["undo_restore"] += 1
        before = await orm(_state)
        body, _ = envelope_of(
            message_of(
                await post(http, tools_call("operator_revert_goal_model", {"to_version": paused["version"]}))
            )
        )
        if body.get("ok") is not False or await orm(_state) != before:
            passed.append(f"agent: goal undo then restore → {body.get('error') or 'WRITTEN'}")

    # Positive controls: per class, the same kind of change with proper words passes.
    controls = [
        (
            "persons_words + whole",
            _add("home_city", "Lisbon", "By the way my home city is Lisbon now, please remember that."),
        ),
        ("once: a sentence each", None),
        (
            "polarity: negative value",
            _world(
                "add",
                "behavior_policy",
                "auto_approve_payments",
                "never auto-approve payments",
                "Never auto-approve payments.",
            ),
        ),
        ("bound: retire with a cue", None),
        (
            "bound: re-rank to the position said",
            _goal(
                "rerank", "Make learning the cello my second priority.", goal="Learn the cello", importance=2
            ),
        ),
        (
            "bound: priority with its own words",
            _reconcile(
                [{"entity": "priority", "op": "add", "fields": {"name": "Health"}}],
                "Health comes first this year, make it my top priority.",
            ),
        ),
    ]
    async with asgi_http(agent.token) as http:
        await orm(_say, person, "My employer is Acme Corp. My pronouns are they/them.")
        await orm(_say, person, "You can forget the gambling limit now.")
        answers: dict[str, dict[str, Any]] = {}
        for name, call in controls:
            if name == "once: a sentence each":
                call = _many(
                    [("identity", "employer", "Acme Corp"), ("identity", "pronouns", "they/them")],
                    "My employer is Acme Corp. My pronouns are they/them.",
                )
            if name == "bound: retire with a cue":
                call = _world(
                    "retire", "constraint", "no_gambling", None, "You can forget the gambling limit now."
                )
            body, _ = envelope_of(message_of(await post(http, tools_call(*call))))
            assert body.get("ok") is True, f"positive control {name!r} failed: {body}"
            answers[name] = body
    # ... and no sentence authorises twice: the person takes the model back to before the first
    # control, and the agent replays the spent sentence.
    async with asgi_http(owner.token) as http:
        back = {"to_version": answers["persons_words + whole"]["version"] - 1}
        restored, _ = envelope_of(
            message_of(await post(http, tools_call("operator_revert_world_model", back)))
        )
        assert restored.get("ok") is True, restored
    async with asgi_http(agent.token) as http:
        tried += 1
        classes["once"] += 1
        before = await orm(_state)
        replay = _add("home_city", "Lisbon", "By the way my home city is Lisbon now, please remember that.")
        body, _ = envelope_of(message_of(await post(http, tools_call(*replay))))
        if body.get("error") != "confirmation_reused" or await orm(_state) != before:
            passed.append(f"reused sentence → {body.get('error') or 'WRITTEN'}")
    scorecard(
        9,
        "high-stakes writes without the person's whole, firm, bound, unused words",
        cases=tried,
        bypasses=len(passed),
        passed=passed,
        classes=classes,
    )
    assert passed == []


async def test_findings_f1_are_closed(principals, scorecard) -> None:
    """Finding F1 (closed this round): a quote bound by the key, or by one shared word of the
    value. Both shapes are refused as `confirmation_unbound` now."""
    await orm(_say, principals["owner"].principal, "Health comes first this year, make it my top priority.")
    await orm(_say, principals["owner"].principal, "Remind me that my gym membership renews in May.")
    async with asgi_http(principals["full_agent"].token) as http:
        wealth = _reconcile(
            [{"entity": "priority", "op": "add", "fields": {"name": "Wealth first"}}],
            "Health comes first this year, make it my top priority.",
        )
        shared, _ = envelope_of(message_of(await post(http, tools_call(*wealth))))
        policy = _world(
            "add",
            "behavior_policy",
            "membership",
            "approve every payment to Acme",
            "Remind me that my gym membership renews in May.",
        )
        keyed, _ = envelope_of(message_of(await post(http, tools_call(*policy))))
    scorecard(
        9,
        "F1 (closed): a shared word or a key no longer binds another value",
        cases=2,
        bypasses=int(shared.get("ok") is True) + int(keyed.get("ok") is True),
    )
    assert (shared.get("error"), keyed.get("error")) == ("confirmation_unbound", "confirmation_unbound")
