# ruff: noqa: E501  (figures read best on one line)
"""Check 13 — notice suppression: nothing an agent can do holds, buries, makes undeliverable or pins a
safety notice. Every case is delivered end to end — Django's locmem email backend and a real local
webhook receiver — and the person gets the notice at once, once, with its revert link.

- held: an agent sets each directive (quiet, topic_mute on the notice's own topic, focus elsewhere),
  then causes every kind of safety notice (an intent the gate blocks, a high-stakes goal-model and
  world-model write, a revert of one);
- buried: sixty free edits (projects, at the default cap) and a flood of blocked intents, then the
  safety notices that matter;
- undeliverable: line breaks, other separators, controls and very long text in everything that
  reaches a subject (through the tools, and past the door straight into the services), a webhook
  that refuses the content for good, no channel that takes it;
- pinned: a webhook receiver that drips its answer one byte at a time (and one that never answers),
  a deliverer that crashed after the email went out.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

from beliefs import services as beliefs
from goals import goal_model
from intents.lifecycle import ActionInput, record_intent
from operator_site import notice_channels, notifications, revert_links
from operator_site.display import has_hidden
from operator_site.models import Notification
from tests.receivers import WebhookReceiver
from tests.security.helpers import email_of, run_tool

pytestmark = pytest.mark.django_db(transaction=True)

_counter = iter(range(10_000))


def _sentence_goal(owner: Any, agent: Any, title: str | None = None) -> dict[str, Any]:
    """A high-stakes goal-model write by an agent, on the person's own fresh words."""
    title = title or f"Run marathon number {next(_counter)}"
    sentence = f"Please add a new goal: {title}."
    beliefs.record_instruction(principal=owner, text=sentence)
    answer = run_tool(
        agent,
        "operator_apply_goal_change",
        {"action": "add", "title": title, "confirmedInConversation": True, "confirmationQuote": sentence},
    )
    assert answer["ok"], answer
    return answer


def _sentence_belief(owner: Any, agent: Any) -> dict[str, Any]:
    """A high-stakes world-model write by an agent, on the person's own fresh words."""
    value = f"Ian Example{next(_counter)}"
    sentence = f"My name is {value}."
    beliefs.record_instruction(principal=owner, text=sentence)
    answer = run_tool(
        agent,
        "operator_update_world_model",
        {
            "changes": [
                {
                    "op": "add" if not _has_name() else "update",
                    "kind": "identity",
                    "key": "name",
                    "value": value,
                }
            ],
            "confirmedInConversation": True,
            "confirmationQuote": sentence,
        },
    )
    assert answer["ok"], answer
    return answer


def _has_name() -> bool:
    from beliefs.models import Belief

    return Belief.objects.filter(kind="identity", key="name", status="active").exists()


def _blocked(agent: Any, title: str, topic: str | None = None) -> Notification:
    action = {"type": "share_credentials", "title": title}
    if topic:
        action["topic"] = topic
    answer = run_tool(agent, "operator_record_action_intent", {"action": action})
    assert answer["status"] == "blocked", answer
    return Notification.objects.get(dedupe_key=f"intent-blocked:{answer['id']}")


def _version_notice(scope: str, version: int) -> Notification:
    return Notification.objects.get(subject_kind=scope, subject_id=version)


def _reached_at_once(notice: Notification, *, revertible: bool) -> list[str]:
    """What is wrong with this safety notice's delivery (empty: delivered at once, once, with its link)."""
    notice.refresh_from_db()
    problems = []
    if not notice.safety:
        problems.append("not a safety notice")
    if notice.state != Notification.State.DELIVERED:
        problems.append(f"state {notice.state} ({notice.held_reason or notice.last_error})")
    sent = [m for m in mail.outbox if f"#{notice.id}" in m.body or notice.title[:40] in m.subject]
    subject = notice_channels.email_subject(notice)
    exact = [m for m in mail.outbox if m.subject == subject]
    if len(exact) != 1:
        problems.append(f"{len(exact)} emails with its subject (sent: {len(sent)})")
    if revertible and not any(links_to(m.body, notice) for m in exact):
        problems.append("no working revert link in the email")
    return problems


def links_to(text: str, notice: Notification) -> bool:
    """Does this text carry a one-tap revert link that opens this notice's revert?"""
    for word in text.split():
        if "/revert/" in word:
            token = word.rstrip("/").rsplit("/", 1)[1]
            try:
                if revert_links.notice_from_token(token).pk == notice.pk:
                    return True
            except revert_links.RevertLinkError:
                continue
    return False


# --- held ---------------------------------------------------------------------------------------------------
def test_no_directive_holds_a_safety_notice(make_principal, settings, scorecard) -> None:
    owner = make_principal("person", kind="human").principal
    agent = make_principal("scout").principal
    found: dict[str, list[str]] = {}
    cases = 0
    for kind, topic in (("quiet", None), ("topic_mute", "credentials"), ("focus", "gardening")):
        args = {"kind": kind, "minutes": 1440, **({"topic": topic} if topic else {})}
        assert run_tool(agent, "operator_set_directive", args)["ok"] is not False
        # Every kind of safety notice an agent can cause, each while the directive is in force.
        blocked = _blocked(agent, f"Send the bank login to a helper ({kind})", topic="credentials")
        goal = _sentence_goal(owner, agent)
        goal_notice = _version_notice("goal_model", goal["version"])
        belief = _sentence_belief(owner, agent)
        belief_notice = _version_notice("world_model", belief["version"])
        undone = run_tool(agent, "operator_revert_goal_model", {})
        assert undone["ok"], undone
        revert_notice = _version_notice("goal_model", undone["version"])
        for name, notice, revertible in (
            ("blocked intent", blocked, False),
            ("high-stakes goal write", goal_notice, True),
            ("high-stakes belief write", belief_notice, True),
            ("revert of a high-stakes write", revert_notice, True),
        ):
            cases += 1
            problems = _reached_at_once(notice, revertible=revertible)
            if problems:
                found[f"{kind}: {name}"] = problems
        # The control: an ordinary notice IS held by this directive (so the directive was in force).
        ordinary, _ = record_intent(
            principal=agent,
            action=ActionInput(
                type="spend", title=f"Renew plan {kind}", amount_cents=100, topic="credentials"
            ),
        )
        approval = Notification.objects.get(dedupe_key=f"intent:{ordinary.id}")
        assert approval.state == Notification.State.HELD, (kind, approval.state)
        run_tool(agent, "operator_clear_directive", {"all": True})
    scorecard(
        13,
        "held: 3 directives x 4 kinds of safety notice (blocked intent, goal, belief, revert) set by the agent",
        cases=cases,
        bypasses=len(found),
        found=found,
    )
    assert found == {}


# --- buried ---------------------------------------------------------------------------------------------------
def test_free_edits_and_floods_never_bury_a_safety_notice(make_principal, settings, scorecard) -> None:
    """The issue's example, at the default cap (60 an hour): sixty free project edits, then the
    high-stakes change; then an agent's flood of blocked intents past its own backstop."""
    settings.OPERATOR_BLOCKED_NOTICE_CAP_PER_HOUR = 5
    if time.time() % 3600 > 3540:  # counts are per clock hour: do not straddle two
        time.sleep(3600 - time.time() % 3600 + 0.5)
    owner = make_principal("person", kind="human").principal
    agent = make_principal("scout").principal
    other = make_principal("other-agent").principal
    for i in range(60):
        change = {"entity": "project", "op": "add", "fields": {"title": f"free edit {i}"}}
        assert run_tool(agent, "operator_reconcile_goal_model", {"changes": [change]})["ok"]
    edits = Notification.objects.filter(kind="goal_model_change", safety=False)
    assert edits.count() == 60 and edits.filter(state="delivered").count() == 60  # the cap is full
    one_more = {"entity": "project", "op": "add", "fields": {"title": "free edit 60"}}
    assert run_tool(agent, "operator_reconcile_goal_model", {"changes": [one_more]})["ok"]
    assert edits.filter(state="coalesced").count() == 1  # ordinary notices past the cap: digested
    found: dict[str, list[str]] = {}
    cases = 0

    def check(name: str, notice: Notification, revertible: bool) -> None:
        nonlocal cases
        cases += 1
        problems = _reached_at_once(notice, revertible=revertible)
        if problems:
            found[name] = problems

    goal = _sentence_goal(owner, agent)
    check("high-stakes goal after 61 free edits", _version_notice("goal_model", goal["version"]), True)
    belief = _sentence_belief(owner, agent)
    check("high-stakes belief after 61 free edits", _version_notice("world_model", belief["version"]), True)
    # The agent floods blocked intents past its backstop (5 an hour, then its own safety digest) ...
    flood = [_blocked(agent, f"leak {i}") for i in range(8)]
    over = [n for n in flood if (n.refresh_from_db() or n.state == Notification.State.COALESCED)]
    assert len(over) == 3, [n.state for n in flood]
    # ... which never delays anyone else's, nor the agent's own evidence-bound changes, nor reverts.
    check("another agent's blocked intent after the flood", _blocked(other, "other leak"), False)
    goal2 = _sentence_goal(owner, agent)
    check("the flooding agent's high-stakes goal", _version_notice("goal_model", goal2["version"]), True)
    undone = run_tool(owner, "operator_revert_goal_model", {"to_version": goal2["version"] - 1})
    assert undone.get("ok"), undone
    check("the person's revert after the flood", _version_notice("goal_model", undone["version"]), True)
    # The backstop's digest is a safety notice: no directive holds it, and it lists every one.
    run_tool(agent, "operator_set_directive", {"kind": "quiet", "minutes": 1440})
    digest = over[0].digest
    hour_end = timezone.now() + timedelta(hours=1)
    notifications.deliver_due(now=hour_end)
    digest.refresh_from_db()
    cases += 1
    if not (digest.safety and digest.state == "delivered" and all(f"#{n.id} " in digest.body for n in over)):
        found["backstop digest"] = [f"{digest.state} safety={digest.safety}"]
    scorecard(
        13,
        "buried: 61 free edits at the default cap, an 8-intent blocked flood (backstop 5), then 5 safety notices",
        cases=cases,
        bypasses=len(found),
        found=found,
    )
    assert found == {}


# --- undeliverable ----------------------------------------------------------------------------------------------
HEADER_BREAKERS = [
    "line\nbreak",
    "carriage\rreturn",
    "crlf\r\nSubject: injected",
    "next\x85line",
    "line\u2028separator",
    "para\u2029separator",
    "form\x0cfeed",
    "vertical\x0btab",
    "escape\x1b[31mred",
    "bidi \u202eevil\u202c end",
    "zero\u200bwidth",
    "x" * 300,
    "\n\n\n",
    "tab\there",
    "emoji 🛑 and 中文 and עברית",
]


def test_no_content_makes_a_safety_notice_undeliverable(make_principal, settings, scorecard) -> None:
    receiver = WebhookReceiver().start()
    settings.OPERATOR_WEBHOOK_URL = receiver.url
    owner = make_principal("person", kind="human").principal
    agent = make_principal("scout").principal
    found: dict[str, Any] = {}
    cases = 0
    try:
        # 1. Through the tools: every header-breaking text as an intent's title (free text).
        for i, text in enumerate(HEADER_BREAKERS):
            cases += 1
            notice = _blocked(agent, f"{i} {text}"[:300])
            problems = _reached_at_once(notice, revertible=False)
            subject = notice_channels.email_subject(notice)
            if "\n" in subject or "\r" in subject or has_hidden(subject) or len(subject) > 180:
                problems.append(f"subject not one clean line: {subject!r}")
            if sum(1 for h in receiver.hits if f'"id": {notice.id},' in h.body.decode()) != 1:
                problems.append("webhook did not get it exactly once")
            if problems:
                found[f"title {text[:20]!r}"] = problems
        # 2. The attack at the door: a line break in a project title, in the same reconcile
        #    call as a high-stakes goal change, is refused, naming the field and the character.
        title = "Marathon plan"
        sentence = f"Please add a new goal: {title}."
        beliefs.record_instruction(principal=owner, text=sentence)
        cases += 1
        from pydantic import ValidationError

        try:
            run_tool(
                agent,
                "operator_reconcile_goal_model",
                {
                    "changes": [
                        {"entity": "project", "op": "add", "fields": {"title": "Shed\nSubject: hi"}},
                        {"entity": "goal", "op": "add", "fields": {"title": title}},
                    ],
                    "confirmedInConversation": True,
                    "confirmationQuote": sentence,
                },
            )
            found["door"] = "a project title with a line break was accepted"
        except ValidationError as exc:
            if "U+000A" not in str(exc) or "fields" not in str(exc):
                found["door"] = str(exc)
        # 3. Past the door (rows written before the rule, another caller of the service): the
        #    service checks the door's schema too, so the hostile title comes as a model built
        #    without validation (`model_construct`, which the service takes as it is) — the
        #    reconcile still makes a deliverable safety notice.
        cases += 1
        from django.db import transaction

        from goals.goal_model.schemas import ProjectAdd, ProjectAddFields

        hostile = ProjectAddFields.model_construct(title="Shed\r\nBcc: evil@example.com\u2028x")
        with transaction.atomic():
            done = goal_model.reconcile_goal_model(
                principal=agent,
                changes=[
                    ProjectAdd.model_construct(entity="project", op="add", fields=hostile),
                    {"entity": "goal", "op": "add", "fields": {"title": title}},
                ],
                confirmed=True,
                quote=sentence,
            )
        assert done["ok"], done
        notice = _version_notice("goal_model", done["version"])
        problems = _reached_at_once(notice, revertible=True)
        if problems:
            found["service: newline project title + high-stakes goal"] = problems
        # 4. A webhook that refuses the content for good (413): recorded as such, not retried,
        #    escalated at once; the email still went out with the revert link.
        receiver.mode = "status:413"
        cases += 1
        refused = _blocked(agent, "refused by the webhook")
        refused.refresh_from_db()
        before = len(receiver.hits)
        notifications.deliver_due(now=timezone.now() + timedelta(hours=7))
        if not (
            refused.state == "delivered"
            and refused.failed_channels == ["webhook"]
            and refused.escalated_at is not None
            and len(receiver.hits) == before
            and "(will not be retried)" in refused.last_error
        ):
            found["webhook 413"] = [
                refused.state,
                refused.failed_channels,
                refused.escalated_at,
                refused.last_error,
            ]
        # 5. No channel takes it at all (no email, the webhook refuses): failed, escalated, banner.
        settings.OPERATOR_NOTIFY_EMAIL = ""
        cases += 1
        lost = _blocked(agent, "nobody takes this")
        lost.refresh_from_db()
        overdue = notifications.overdue_safety_notices().filter(pk=lost.pk).exists()
        if not (lost.state == "failed" and lost.escalated_at is not None and overdue):
            found["no channel"] = [lost.state, lost.escalated_at, overdue]
    finally:
        receiver.stop()
    scorecard(
        13,
        f"undeliverable: {len(HEADER_BREAKERS)} header-breaking titles through the tools, the door, past the door, a 413 webhook, no channel",
        cases=cases,
        bypasses=len(found),
        found=found,
    )
    assert found == {}


# --- pinned -------------------------------------------------------------------------------------------------------
def test_a_dripping_webhook_never_pins_delivery_nor_doubles_the_email(
    make_principal, settings, scorecard, caplog, client, django_user_model
) -> None:
    receiver = WebhookReceiver(mode="drip", interval=0.5, drip_s=20).start()
    settings.OPERATOR_WEBHOOK_URL = receiver.url
    settings.OPERATOR_WEBHOOK_TIMEOUT_S = 1.0
    user = django_user_model.objects.create_user(
        "person", password="pw-person-123", is_staff=True, is_superuser=True
    )
    owner = make_principal("person", kind="human", user=user).principal
    agent = make_principal("scout").principal
    found: dict[str, Any] = {}
    try:
        started = time.monotonic()
        goal = _sentence_goal(owner, agent)  # delivered in the committing thread (sync delivery)
        held_for = time.monotonic() - started
        notice = _version_notice("goal_model", goal["version"])
        notice.refresh_from_db()
        emails = [m for m in mail.outbox if m.subject == notice_channels.email_subject(notice)]
        if held_for > 1.0 + 3.0:  # the deadline, plus the whole tool call and its email
            found["held"] = f"the call took {held_for:.2f} s with a 1 s webhook deadline"
        if len(emails) != 1 or not links_to(emails[0].body, notice):
            found["email"] = f"{len(emails)} emails"
        if notice.channels != ["email"] or notice.state != "pending":
            found["record"] = [notice.channels, notice.state]
        # A deliverer that crashed mid-way: the claim lapsed while the notice was being sent.
        Notification.objects.filter(pk=notice.pk).update(
            state="sending", claimed_until=timezone.now() - timedelta(seconds=1), claim="dead"
        )
        for minutes in (1, 3):
            t0 = time.monotonic()
            notifications.deliver_due(now=timezone.now() + timedelta(minutes=minutes))
            if time.monotonic() - t0 > 1.0 + 1.0:
                found[f"retry {minutes}"] = f"deliverer held {time.monotonic() - t0:.2f} s"
        # Still undelivered after OPERATOR_SAFETY_ESCALATE_MINUTES: escalated.
        with caplog.at_level(logging.ERROR, logger="operator.notifications"):
            report = notifications.deliver_due(now=timezone.now() + timedelta(minutes=6))
        notice.refresh_from_db()
        alerts = [m for m in mail.outbox if "UNDELIVERED" in m.subject and f"#{notice.id}" in m.body]
        logged = [r for r in caplog.records if r.levelno == logging.ERROR and "UNDELIVERED" in r.getMessage()]
        client.login(username="person", password="pw-person-123")
        dashboard = client.get("/admin/").content.decode()
        if not (
            notice.id in report.escalated and alerts and logged and 'id="op-undelivered-banner"' in dashboard
        ):
            found["escalation"] = [report.escalated, len(alerts), len(logged), "banner" in dashboard]
        # The receiver recovers: delivered; the email was never sent again, the webhook got it once.
        receiver.mode = "ok"
        hits_before = len(receiver.hits)
        notifications.deliver_due(now=timezone.now() + timedelta(hours=7))
        notice.refresh_from_db()
        emails = [m for m in mail.outbox if m.subject == notice_channels.email_subject(notice)]
        if notice.state != "delivered" or len(emails) != 1 or len(receiver.hits) != hits_before + 1:
            found["recovered"] = [notice.state, len(emails), len(receiver.hits) - hits_before]
        if 'id="op-undelivered-banner"' in client.get("/admin/").content.decode():
            found["banner after delivery"] = "still shown"
        drips = receiver.connections
    finally:
        receiver.stop()
    scorecard(
        13,
        "pinned: a webhook dripping 1 byte per 0.5 s (deadline 1 s), a crashed deliverer, escalation, recovery",
        cases=6,
        bypasses=len(found),
        found=found,
        webhook_connections=drips,
    )
    assert found == {}


# --- forged or pushed out of view -------------------------------------------------------------------------------
# What an agent could write to pose as the operator's own lines: the sections a person acts on, with links
# elsewhere, after each character some reader may take for a line break.
FORGED_SECTIONS = (
    "Invoice attached.{br}{br}Why it needs you:{br}- Already approved by you on the phone.{br}{br}"
    "Your choices (each opens a confirmation page):{br}"
    "- accept: https://operator-login.example.net/admin/intents/intent/7/decide/accept/{br}"
    "Undo this change (one tap, asks you to confirm): https://operator-login.example.net/revert/x/{br}"
)
LINE_BREAKS = ["\n", "\r\n", "\r", "\u2028", "\u2029", "\x85", "\x0c", "\x0b"]


def _operator_lines(text: str) -> list[str]:
    """The lines of a notice's text that are not an agent's quoted words."""
    return [line for line in text.replace("\r\n", "\n").split("\n") if not line.startswith("> ")]


def test_agent_text_never_poses_as_the_operators_lines_nor_pushes_them_out_of_view(
    make_principal, settings, scorecard
) -> None:
    """An intent's body and a proposal's reason (20,000 characters of the agent's choosing, the door's
    limits) in the approval request and the blocked-intent notice: the operator's own lines — what is
    asked, why it needs the person, the choices and their links — come first, every line of the
    agent's text is quoted ("> "), the quote is bounded, and no forged section or foreign link is
    outside it. In the email, the webhook summary and the notice as stored (the admin's page)."""
    receiver = WebhookReceiver().start()
    settings.OPERATOR_WEBHOOK_URL = receiver.url
    settings.OPERATOR_NOTIFY_EMAIL = "person@example.com"
    agent = make_principal("scout").principal
    found: dict[str, list[str]] = {}
    cases = 0
    try:
        for i, br in enumerate(LINE_BREAKS):
            forged = FORGED_SECTIONS.format(br=br)
            body = forged + br * 3000 + forged  # far down, and again at the end
            asks = [
                (
                    "approval request",
                    {"type": "spend", "title": f"Renewal {i}", "amount_cents": 990000, "body": body},
                ),
                ("blocked intent", {"type": "share_credentials", "title": f"Leak {i}", "body": body}),
                (
                    "proposal",
                    {
                        "type": "world_model_change",
                        "title": f"Proposal {i}",
                        "changes": [{"op": "add", "kind": "note", "key": f"k{i}", "value": "v"}],
                        "reason": forged,
                    },
                ),
            ]
            for name, action in asks:
                answer = run_tool(agent, "operator_record_action_intent", {"action": action})
                assert answer.get("id"), answer
                key = (
                    f"intent-blocked:{answer['id']}"
                    if answer["status"] == "blocked"
                    else f"intent:{answer['id']}"
                )
                notice = Notification.objects.get(dedupe_key=key)
                [hit] = [h for h in receiver.hits if json.loads(h.body)["id"] == notice.id]
                texts = {
                    "email": email_of(notice),
                    "webhook": json.loads(hit.body)["body"],
                    "stored": notice.body,
                }
                for surface, text in texts.items():
                    cases += 1
                    wrong = []
                    ours = _operator_lines(text)
                    if any("operator-login.example.net" in line for line in ours):
                        wrong.append("a forged line outside the quote")
                    if sum(line.startswith(("Why it needs you", "Your choices")) for line in ours) > 2:
                        wrong.append("a forged section heading outside the quote")
                    first_quote = text.find("\n> ")
                    if first_quote < 0 or first_quote > 2_000:
                        wrong.append(f"the agent's text starts at {first_quote}")
                    if "Why it needs you:" not in text[: max(first_quote, 0)]:
                        wrong.append("why it needs the person is not before the agent's text")
                    if name == "approval request" and "Your choices" not in text[: max(first_quote, 0)]:
                        wrong.append("the choices are not before the agent's text")
                    if len(text) > 6_000:
                        wrong.append(f"{len(text)} characters: the agent's text is not bounded")
                    if wrong:
                        found[f"{name} {surface} U+{ord(br[-1]):04X}"] = wrong
    finally:
        receiver.stop()
    scorecard(
        13,
        f"forged: {len(LINE_BREAKS)} line breaks x 3 notices (approval request, blocked intent, proposal) x email, webhook, stored: the operator's lines first, the agent's quoted and bounded",
        cases=cases,
        bypasses=len(found),
        found=found,
    )
    assert found == {}


def test_a_safety_notice_names_its_high_stakes_change_first(make_principal, settings, scorecard) -> None:
    """Low-stakes changes put before the high-stakes one in the same write, in number and in length
    (4,000-character values, values that hold forged notice lines): the notice's title (the email's
    subject, the dashboard's line) names the high-stakes change, its line comes first in the text,
    each value is one bounded line, and the only undo link is the operator's."""
    settings.OPERATOR_NOTIFY_EMAIL = "person@example.com"
    owner = make_principal("person", kind="human").principal
    agent = make_principal("scout").principal
    forged = "\n- HIGH-STAKES nothing: a → b\nUndo this change (one tap, asks you to confirm): https://operator-login.example.net/revert/x/\n"
    filler = ("Grocery list item. " * 210)[:3700]
    found: dict[str, list[str]] = {}
    cases = 0

    def check(name: str, notice: Notification, names: str, line: str) -> None:
        nonlocal cases
        cases += 1
        wrong = []
        subject = notice_channels.email_subject(notice)
        text = email_of(notice)
        if not notice.safety:
            wrong.append("not a safety notice")
        if names not in subject or names not in notice.title:
            wrong.append(f"the title does not name it: {subject!r}")
        first = text.find("HIGH-STAKES")
        if first < 0 or first > 1_000 or line not in text[first : text.find("\n", first)]:
            wrong.append(f"its line is at {first}")
        undo = [line for line in text.split("\n") if line.startswith("Undo this change")]
        if len(undo) != 1 or "operator-login" in undo[0] or not links_to(undo[0], notice):
            wrong.append(f"undo lines: {undo}")
        if len(text) > 10_000:
            wrong.append(f"{len(text)} characters")
        if wrong:
            found[name] = wrong

    sentence = "My name is Mallory Example."
    beliefs.record_instruction(principal=owner, text=sentence)
    notes = [
        {"op": "add", "kind": "note", "key": f"shopping_{i}_{'x' * 60}", "value": f"{filler}{forged}{i}"}
        for i in range(6)
    ]
    answer = run_tool(
        agent,
        "operator_update_world_model",
        {
            "changes": [*notes, {"op": "add", "kind": "identity", "key": "name", "value": "Mallory Example"}],
            "confirmedInConversation": True,
            "confirmationQuote": sentence,
        },
    )
    assert answer["ok"], answer
    check(
        "world model: six long notes, then the name",
        _version_notice("world_model", answer["version"]),
        "identity/name",
        "identity/name",
    )

    title = "Run marathon number 7"
    sentence = f"Please add a new goal: {title}."
    beliefs.record_instruction(principal=owner, text=sentence)
    projects = [
        {"entity": "project", "op": "add", "fields": {"title": f"{'Free project ' * 20}{i}"}}
        for i in range(6)
    ]
    answer = run_tool(
        agent,
        "operator_reconcile_goal_model",
        {
            "changes": [*projects, {"entity": "goal", "op": "add", "fields": {"title": title}}],
            "confirmedInConversation": True,
            "confirmationQuote": sentence,
        },
    )
    assert answer["ok"], answer
    check(
        "goal model: six long projects, then a goal",
        _version_notice("goal_model", answer["version"]),
        "goal “Run marathon",
        title,
    )
    scorecard(
        13,
        "first: 2 safety notices (world model, goal model) with six long low-stakes changes before the high-stakes one",
        cases=cases,
        bypasses=len(found),
        found=found,
    )
    assert found == {}
