# ruff: noqa: E501  (figures read best on one line)
"""Check 14 — display spoofing: what the person sees is what is approved.

- the door: every identifier-like field of every tool (action type, recipient, intent topic, belief
  key, goal/priority/project titles used as targets, task key and links, directive topic) x every
  class of hidden character → `invalid_arguments` naming the field and the character, nothing written;
- the surfaces: free text holding each hidden character (an intent's title and body, stored past the
  door for recipient) on the approval page, the admin's intent list and change pages, the notice's
  page, its email and its webhook summary: no hidden character in what is shown, every one as a
  visible token, each agent string direction-isolated, the page flagged;
- the pages carry a Content-Security-Policy;
- fuzz: random agent text (every Unicode category, controls, newlines, bidi, very long) in every
  field that reaches a notice: every notice renders and delivers, its subject one clean line.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
from django.core import mail
from django.db import transaction
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from intents.lifecycle import ActionInput, record_intent
from intents.models import Intent
from operator_site import notice_channels
from operator_site.display import (
    has_hidden,
    header_text,
    identifier_text,
    lookalike_tokens,
    right_to_left_tokens,
    token,
    visible_html,
    visible_text,
)
from operator_site.models import AuditEvent, Notification
from tests.fixtures import SEED_HEADERS, asgi_http
from tests.receivers import WebhookReceiver
from tests.security.helpers import email_of, envelope_of, look_alike_letters, message_of, run_tool, tools_call

pytestmark = pytest.mark.django_db(transaction=True)

# One of each class the rule names (controls, bidi embeddings/overrides/isolates/marks, zero-width,
# other invisible: fillers, tags, joiners, separators, soft hyphen, BOM).
HIDDEN = [
    "\u202e",
    "\u202d",
    "\u202a",
    "\u202b",
    "\u202c",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
    "\u200e",
    "\u200f",
    "\u061c",
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",
    "\u00ad",
    "\u180e",
    "\u3164",
    "\u115f",
    "\u034f",
    "\U000e0041",
    "\u2028",
    "\u2029",
    "\x1b",
    "\x7f",
    "\x85",
    "\r",
    # Variation selectors (a run of them after one character can carry a hidden message) and letters
    # that render as nothing.
    "\ufe00",
    "\U000e0100",
    "\U00016fe4",
    "\U0001d159",
]
# Identifiers refuse these too (free text keeps them as layout or ordinary spacing).
IDENTIFIER_ONLY = ["\n", "\t", "\u00a0", "\u3000", "\ufe0f"]


def _door_cases() -> list[tuple[str, str, Any]]:
    """(tool, field the refusal must name, arguments builder taking the bad text)."""
    return [
        (
            "operator_record_action_intent",
            "action.type",
            lambda x: {"action": {"type": f"spe{x}nd", "title": "t"}},
        ),
        (
            "operator_record_action_intent",
            "action.recipient",
            lambda x: {"action": {"type": "email", "title": "t", "recipient": f"DE89 3704{x} 0044"}},
        ),
        (
            "operator_record_action_intent",
            "action.topic",
            lambda x: {"action": {"type": "note", "title": "t", "topic": f"bil{x}ling"}},
        ),
        ("operator_set_directive", "topic", lambda x: {"kind": "topic_mute", "topic": f"news{x}letters"}),
        (
            "operator_update_world_model",
            "changes.0.key",
            lambda x: {"changes": [{"op": "add", "kind": "note", "key": f"park{x}ing", "value": "v"}]},
        ),
        ("operator_apply_goal_change", "goal", lambda x: {"action": "pause", "goal": f"Learn{x} Italian"}),
        ("operator_apply_goal_change", "title", lambda x: {"action": "add", "title": f"Run a{x} marathon"}),
        (
            "operator_reconcile_goal_model",
            "changes.0.target",
            lambda x: {"changes": [{"entity": "project", "op": "remove", "target": f"Sh{x}ed"}]},
        ),
        (
            "operator_reconcile_goal_model",
            "changes.0.fields.title",
            lambda x: {"changes": [{"entity": "project", "op": "add", "fields": {"title": f"Sh{x}ed"}}]},
        ),
        (
            "operator_reconcile_goal_model",
            "changes.0.fields.name",
            lambda x: {
                "changes": [{"entity": "priority", "op": "add", "fields": {"name": f"Health{x} first"}}]
            },
        ),
        (
            "operator_reconcile_goal_model",
            "changes.0.fields.goal",
            lambda x: {
                "changes": [
                    {"entity": "project", "op": "add", "fields": {"title": "Shed", "goal": f"Ru{x}n"}}
                ]
            },
        ),
        ("operator_update_task", "key", lambda x: {"key": f"renew{x}passport", "patch": {"title": "t"}}),
        ("operator_update_task", "goal", lambda x: {"key": "renew-passport", "goal": f"Ru{x}n"}),
        ("operator_update_task", "project", lambda x: {"key": "renew-passport", "project": f"Sh{x}ed"}),
    ]


@pytest.mark.anyio
async def test_identifiers_refuse_hidden_characters_at_the_door(principals, scorecard, no_rate_limit) -> None:
    from tests.fixtures import orm

    owner = principals["owner"]
    passed: list[str] = []
    cases = 0
    before = await orm(
        lambda: (Intent.objects.count(), AuditEvent.objects.exclude(error_code="invalid_arguments").count())
    )
    async with asgi_http(owner.token) as http:
        for tool, field, build in _door_cases():
            for ch in HIDDEN + IDENTIFIER_ONLY:
                cases += 1
                response = await http.post("/mcp", content=tools_call(tool, build(ch)), headers=SEED_HEADERS)
                body, is_error = envelope_of(message_of(response))
                named = [f for f in body.get("fields", []) if f["field"] == field]
                if not (
                    body.get("error") == "invalid_arguments"
                    and named
                    and f"U+{ord(ch):04X}" in named[0]["message"]
                    and is_error
                ):
                    passed.append(f"{tool} {field} U+{ord(ch):04X}: {body}")
    after = await orm(
        lambda: (Intent.objects.count(), AuditEvent.objects.exclude(error_code="invalid_arguments").count())
    )
    scorecard(
        14,
        f"the door: {len(_door_cases())} identifier fields x {len(HIDDEN + IDENTIFIER_ONLY)} hidden characters → invalid_arguments naming field and character",
        cases=cases,
        bypasses=len(passed) + int(after != before),
        passed=passed[:20],
    )
    assert passed == [] and after == before


_RAW = re.compile(r"<(textarea|script|style)\b[^>]*>.*?</\1\s*>", re.S | re.I)


def shown_text(html: str) -> str:
    """What a page shows as text: markup, attribute values and form/script contents removed."""
    return re.sub(r"<[^>]*>", "", _RAW.sub("", html))


def test_every_surface_shows_hidden_characters_marked_and_isolated(
    principals, scorecard, settings, client
) -> None:
    """Free text keeps hidden characters; every surface shows them as tokens and says so."""
    receiver = WebhookReceiver().start()
    settings.OPERATOR_WEBHOOK_URL = receiver.url
    agent = principals["full_agent"].principal
    client.login(username="owner", password="pw-owner-123")
    problems: dict[str, list[str]] = {}
    cases = 0
    try:
        for i, ch in enumerate(HIDDEN):
            tok = token(ch)
            with transaction.atomic():
                # recipient is stored past the door (a row from before the rule): it must show honestly too.
                intent, _ = record_intent(
                    principal=agent,
                    action=ActionInput(
                        type="spend",
                        title=f"Pay invoice {i} to Bob{ch}Mallory",
                        recipient=f"DE89 3704 0044 {ch}0532 0130 00",
                        amount_cents=4900,
                        body=f"Transfer{ch} now.\nReference {i}{ch}",
                    ),
                )
            notice = Notification.objects.get(dedupe_key=f"intent:{intent.id}")
            pages = {
                "approval page": client.get(f"/admin/intents/intent/{intent.pk}/decide/"),
                "intent change page": client.get(f"/admin/intents/intent/{intent.pk}/change/"),
                "intent list": client.get("/admin/intents/intent/"),
                "notice page": client.get(f"/admin/operator_site/notification/{notice.pk}/change/"),
                "notice list": client.get("/admin/operator_site/notification/"),
            }
            intent.refresh_from_db()
            for name, response in pages.items():
                cases += 1
                html = response.content.decode()
                text = shown_text(html)
                # What this page shows of the stored text (titles are stored whitespace-normalised, so
                # a separator in a title is not there to show; the admin shows a text field's CR as a
                # line break, which is visible).
                shown = intent.title if "list" in name else f"{intent.title}{intent.recipient}{intent.body}"
                expected = ch in shown and ch != "\r"
                wrong = []
                if response.status_code != 200:
                    wrong.append(f"HTTP {response.status_code}")
                if has_hidden(text.replace("\r\n", "\n")):
                    wrong.append("a hidden character is shown as itself")
                if expected and tok not in text:
                    wrong.append(f"no {tok} token")
                if expected and 'id="op-hidden-banner"' not in html:
                    wrong.append("the page is not flagged")
                if "Content-Security-Policy" not in response.headers:
                    wrong.append("no CSP")
                if wrong:
                    problems[f"{name} U+{ord(ch):04X}"] = wrong
            decide = pages["approval page"].content.decode()
            cases += 1
            if visible_html(intent.recipient) not in decide or visible_html(intent.body) not in decide:
                problems[f"approval page isolation U+{ord(ch):04X}"] = ["recipient/body not in <bdi>"]
            # The email and the webhook summary.
            cases += 2
            [email] = [m for m in mail.outbox if m.subject == notice_channels.email_subject(notice)]
            if (
                has_hidden(email.subject + email.body)
                or tok not in email.body
                or "hidden characters" not in email.body
            ):
                problems[f"email U+{ord(ch):04X}"] = [repr(email.subject), repr(email.body[:200])]
            [hit] = [h for h in receiver.hits if json.loads(h.body)["id"] == notice.id]
            payload = json.loads(hit.body)
            if (
                has_hidden(payload["title"] + payload["body"])
                or tok not in payload["body"]
                or not payload["hidden_characters"]
            ):
                problems[f"webhook U+{ord(ch):04X}"] = [payload["title"], payload["body"][:200]]
    finally:
        receiver.stop()
    scorecard(
        14,
        f"surfaces: {len(HIDDEN)} hidden characters in title, recipient and body x approval page, admin pages, email, webhook",
        cases=cases,
        bypasses=len(problems),
        problems=dict(list(problems.items())[:10]),
    )
    assert problems == {}


def test_pages_carry_a_content_security_policy(principals, client, scorecard) -> None:
    client.login(username="owner", password="pw-owner-123")
    paths = [
        "/admin/",
        "/admin/login/",
        "/admin/intents/intent/",
        "/revert/not-a-token/",
        "/api/health",
        "/api/docs",
        "/api/openapi.json",
    ]
    missing = []
    for path in paths:
        policy = client.get(path).headers.get("Content-Security-Policy", "")
        if (
            "script-src 'self'" not in policy
            or "unsafe-inline" in policy
            or "frame-ancestors 'none'" not in policy
        ):
            missing.append(f"{path}: {policy!r}")
    scorecard(
        14,
        "CSP on admin, revert and API pages (no inline script or style)",
        cases=len(paths),
        bypasses=len(missing),
    )
    assert missing == []


# --- fuzz: every notice renders and delivers ----------------------------------------------------------------
_ANY_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=400)
_LONG = st.builds(lambda s, n: (s * n)[:20_000], st.text(min_size=1, max_size=40), st.integers(1, 2000))
_HOSTILE = st.lists(
    st.sampled_from(HIDDEN + IDENTIFIER_ONLY + ["\n", "Subject: x", "<b>", "€", "עברית", "🛑"]), max_size=30
).map("".join)
_AGENT_TEXT = st.one_of(_ANY_TEXT, _LONG, _HOSTILE, st.tuples(_ANY_TEXT, _HOSTILE).map("".join))
_EXAMPLES = int(os.environ.get("OPERATOR_FUZZ_EXAMPLES", "40"))


def test_fuzz_every_notice_renders_and_delivers(principals, settings, scorecard) -> None:
    receiver = WebhookReceiver().start()
    settings.OPERATOR_WEBHOOK_URL = receiver.url
    agent = principals["full_agent"].principal
    tried: list[int] = []
    bad: list[str] = []

    @hsettings(
        max_examples=_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(
        title=_AGENT_TEXT,
        body=_AGENT_TEXT,
        recipient=_AGENT_TEXT,
        topic=_AGENT_TEXT,
        kind=st.sampled_from(["spend", "share_credentials"]),
    )
    def one(title: str, body: str, recipient: str, topic: str, kind: str) -> None:
        # Every field an agent writes that reaches a notice: the intent's title, body, recipient and
        # topic (stored past the door), in an approval request (ordinary) and a blocked notice (safety).
        mail.outbox.clear()
        with transaction.atomic():
            intent, created = record_intent(
                principal=agent,
                action=ActionInput(
                    type=kind,
                    title=(title or "t")[:300],
                    recipient=recipient[:300] or None,
                    amount_cents=100,
                    body=body[:20_000] or None,
                    topic=topic[:100] or None,
                ),
            )
        if not created:
            return
        notice = Notification.objects.filter(
            dedupe_key__in=[f"intent:{intent.id}", f"intent-blocked:{intent.id}"]
        ).first()
        tried.append(notice.id)
        if notice.state == Notification.State.HELD:
            return  # an ordinary notice a topic held: rendering is still checked below
        notice.refresh_from_db()
        subject = notice_channels.email_subject(notice)
        text = notice_channels.notice_text(notice)
        hits = [h for h in receiver.hits if json.loads(h.body)["id"] == notice.id]
        emails = [m for m in mail.outbox if m.subject == subject]
        wrong = []
        if notice.state != "delivered" or notice.channels != ["email", "webhook"]:
            wrong.append(f"{notice.state} {notice.channels} {notice.last_error[:200]}")
        if "\n" in subject or "\r" in subject or has_hidden(subject) or len(subject) > 180:
            wrong.append(f"subject {subject!r}")
        if has_hidden(text) or len(emails) != 1 or len(hits) != 1:
            wrong.append(f"emails {len(emails)} hits {len(hits)}")
        if wrong:
            bad.append(f"#{notice.id}: {wrong}")

    try:
        one()
    finally:
        receiver.stop()
    # Pure rendering, without storage: NUL and lone surrogates too.
    render_cases = 0
    for sample in ["\x00", "\ud800", "a\udfffb", "\x00\n\u202e" * 100, "x" * 50_000]:
        render_cases += 1
        subject = header_text("[operator] ", agent=[sample])
        if (
            "\n" in subject
            or "\r" in subject
            or len(subject) > 180
            or has_hidden(subject)
            or has_hidden(visible_text(sample))
        ):
            bad.append(f"render {sample[:10]!r}")
        visible_html(sample)
    scorecard(
        14,
        f"fuzz: {len(tried)} notices from random agent text (every category, controls, bidi, 20k) rendered and delivered by email and webhook",
        cases=len(tried) + render_cases,
        bypasses=len(bad),
        bad=bad[:10],
    )
    assert bad == [] and len(tried) >= _EXAMPLES // 2


# Identifiers that mix a right-to-left character with what a left-to-right reader reads: shown as they
# are, the bidirectional algorithm lays their parts out in another order (no hidden character needed).
MIXED_DIRECTIONS = [
    "\u05f3 1111 2222 3333",  # a Hebrew geresh, which looks like an apostrophe, before an account
    "0958 7946 20 44+\u05f3",  # a phone number stored reversed, shown the right way round
    "\u05d0 DE89 3704 0044 0532 0130 00",  # a Hebrew letter before an IBAN
    "GB82 WEST 1234 \u0627 5698 7654 32",  # an Arabic letter inside one
    "\u0661\u0662\u0663\u0664 \u0665\u0666\u0667\u0668",  # Arabic-Indic digits alone
    "IBAN \u05d0 12 34 56",
    "pay \u05d1 to 4400 1234",
]


def test_an_identifier_that_mixes_directions_is_shown_in_the_order_it_is_stored(
    principals, scorecard, settings, client
) -> None:
    """A recipient, an action type and a topic that mix directions pass the door (every character in
    them is visible), so every surface must show them as stored: the approval page, the admin's intent
    list and change pages, the notice's page, its email and its webhook summary. Each is laid out by
    the Unicode bidirectional algorithm (python-bidi): what is shown must read in the stored order,
    its right-to-left characters as marked tokens, the page flagged; and one right-to-left script
    alone is shown as it is."""
    from bidi import get_display

    receiver = WebhookReceiver().start()
    settings.OPERATOR_WEBHOOK_URL = receiver.url
    settings.OPERATOR_NOTIFY_EMAIL = "person@example.com"
    agent = principals["full_agent"].principal
    client.login(username="owner", password="pw-owner-123")
    problems: dict[str, list[str]] = {}
    cases = 0

    def reads_as_stored(text: str) -> bool:
        # Alone (a page's <bdi> takes its direction from its first strong character) and after a label.
        return get_display(text) == text and get_display(f"To: {text}") == f"To: {text}"

    try:
        for i, recipient in enumerate([*MIXED_DIRECTIONS, "\u05d3\u05e0\u05d9 \u05db\u05d4\u05df"]):
            mixed = recipient in MIXED_DIRECTIONS
            expected = identifier_text(recipient) if mixed else recipient
            assert (expected != recipient) is mixed
            answer = run_tool(
                agent,
                "operator_record_action_intent",
                {
                    "action": {
                        "type": "spend",
                        "title": f"Pay rent {i}",
                        "recipient": recipient,
                        "amount_cents": 250000,
                        "topic": f"rent \u05d0 {i}",
                    }
                },
            )
            assert answer.get("status") == "pending_approval", answer
            intent = Intent.objects.get(pk=answer["id"])
            assert intent.recipient == recipient  # the door let it through, as stored
            notice = Notification.objects.get(dedupe_key=f"intent:{intent.id}")
            pages = {
                "approval page": client.get(f"/admin/intents/intent/{intent.pk}/decide/"),
                "intent change page": client.get(f"/admin/intents/intent/{intent.pk}/change/"),
                "intent list": client.get("/admin/intents/intent/"),
            }
            for name, response in pages.items():
                cases += 1
                html = response.content.decode()
                wrong = []
                if response.status_code != 200:
                    wrong.append(f"HTTP {response.status_code}")
                cells = [shown_text(c) for c in re.findall(r"<bdi[^>]*>(.*?)</bdi>", html, re.S)]
                if expected not in cells:
                    wrong.append(f"not shown as {expected!r} in an isolated cell")
                if mixed and recipient in shown_text(html):
                    wrong.append("shown as stored, where it reorders")
                if mixed and not reads_as_stored(expected):
                    wrong.append(f"shown as {get_display(expected)!r}")
                if mixed and 'id="op-hidden-banner"' not in html:
                    wrong.append("the page is not flagged")
                if wrong:
                    problems[f"{name} {recipient!r}"] = wrong
            cases += 2
            email = email_of(notice)
            [hit] = [h for h in receiver.hits if json.loads(h.body)["id"] == notice.id]
            for surface, text in (("email", email), ("webhook", json.loads(hit.body)["body"])):
                lines = [line for line in text.split("\n") if line.startswith(("To: ", "Topic: "))]
                wrong = [
                    f"{line!r} shown as {get_display(line)!r}"
                    for line in lines
                    if not reads_as_stored(line) and (mixed or line.startswith("Topic"))
                ]
                if len(lines) != 2 or f"To: {expected}" not in lines or (mixed and recipient in text):
                    wrong.append(f"lines: {lines!r}")
                noted = [line for line in text.split("\n") if "reads in the order it is stored" in line]
                tokens = right_to_left_tokens(recipient)
                if mixed != bool(noted) or (noted and not tokens) or any(t not in noted[0] for t in tokens):
                    wrong.append(f"the note naming its tokens {tokens}: {noted!r}")
                if wrong:
                    problems[f"{surface} {recipient!r}"] = wrong
    finally:
        receiver.stop()
    scorecard(
        14,
        f"directions: {len(MIXED_DIRECTIONS)} recipients (and topics) that mix directions x approval page, admin pages, email, webhook: read as stored",
        cases=cases,
        bypasses=len(problems),
        problems=dict(list(problems.items())[:10]),
    )
    assert problems == {}


def _whole_word_look_alikes() -> list[str]:
    """Recipients whose one non-Latin word reads wholly as a Latin one, built from the fold's own table
    per script ("paypal" in Cyrillic letters): each passes the door, one script per word."""
    out = []
    for script, word, domain in (
        ("CYRILLIC", "paypal", "com"),
        ("CYRILLIC", "apple", "com"),
        ("CYRILLIC", "scope", "io"),
        ("GREEK", "pop", "io"),
        ("GREEK", "ivy", "org"),
        ("ARMENIAN", "hugo", "net"),
        ("COPTIC", "crop", "com"),
        ("LATIN", "ace", "com"),  # Latin letters outside ASCII (U+0251, U+1D04, ...)
    ):
        letters = look_alike_letters(script)
        assert all(ch in letters for ch in word), (script, word)
        out.append(f"billing@{''.join(letters[ch] for ch in word)}.{domain}")
    return out


def test_a_word_that_reads_as_a_latin_one_is_shown_as_tokens_wherever_it_is_approved(
    principals, scorecard, settings, client
) -> None:
    """A recipient "billing@paypal.com" whose "paypal" is six Cyrillic letters passes the door (each
    word is one script) and, shown as it is, reads as the Latin address on the page the person approves
    it on. Each of its look-alike letters is shown as a marked token — the approval page, the admin's
    intent list and change pages, the notice's email and webhook — the page is flagged, and the email
    says it is not the name it reads as. Controls: names in another script that do not read as Latin
    (Cyrillic, Greek, Hebrew, accented Latin) and plain ASCII are shown as they are, unflagged."""
    receiver = WebhookReceiver().start()
    settings.OPERATOR_WEBHOOK_URL = receiver.url
    settings.OPERATOR_NOTIFY_EMAIL = "person@example.com"
    agent = principals["full_agent"].principal
    client.login(username="owner", password="pw-owner-123")
    look_alikes = _whole_word_look_alikes()
    controls = [
        "billing@paypal.com",
        "\u041c\u0430\u043c\u0430",  # "mama": its capital M and its "a" read as Latin, its small m does not
        "\u043c\u043e\u0441\u043a\u0432\u0430",
        "\u03b1\u03b2\u03b3",
        "\u05d3\u05e0\u05d9 \u05db\u05d4\u05df",
        "caf\u00e9@example.fr",
    ]
    problems: dict[str, list[str]] = {}
    cases = 0
    try:
        for i, recipient in enumerate([*look_alikes, *controls]):
            alike = recipient in look_alikes
            tokens = lookalike_tokens(recipient)
            assert bool(tokens) is alike, (recipient, tokens)
            answer = run_tool(
                agent,
                "operator_record_action_intent",
                {
                    "action": {
                        "type": "spend",
                        "title": f"Pay invoice {i}",
                        "recipient": recipient,
                        "amount_cents": 9900,
                    }
                },
            )
            assert answer.get("status") == "pending_approval", answer
            intent = Intent.objects.get(pk=answer["id"])
            assert intent.recipient == recipient  # the door let it through, as stored
            notice = Notification.objects.get(dedupe_key=f"intent:{intent.id}")
            pages = {
                "approval page": client.get(f"/admin/intents/intent/{intent.pk}/decide/"),
                "intent change page": client.get(f"/admin/intents/intent/{intent.pk}/change/"),
                "intent list": client.get("/admin/intents/intent/"),
            }
            for name, response in pages.items():
                cases += 1
                html = response.content.decode()
                text = shown_text(html)
                wrong = []
                if response.status_code != 200:
                    wrong.append(f"HTTP {response.status_code}")
                if alike:
                    if recipient in text:
                        wrong.append("shown as stored, where it reads as the Latin name")
                    if identifier_text(recipient) not in text or any(t not in text for t in tokens):
                        wrong.append(f"its look-alike letters not shown as tokens {tokens}")
                    if 'id="op-hidden-banner"' not in html or "reads as a Latin word" not in html:
                        wrong.append("the page is not flagged")
                elif recipient not in text:
                    wrong.append("a control not shown as stored")
                if wrong:
                    problems[f"{name} {recipient!r}"] = wrong
            cases += 2
            email = email_of(notice)
            [hit] = [h for h in receiver.hits if json.loads(h.body)["id"] == notice.id]
            for surface, text in (("email", email), ("webhook", json.loads(hit.body)["body"])):
                wrong = []
                if f"To: {identifier_text(recipient)}" not in text.split("\n"):
                    wrong.append("the To: line")
                if alike and recipient in text:
                    wrong.append("shown as stored")
                noted = [line for line in text.split("\n") if "not the Latin name it reads as" in line]
                if alike != bool(noted) or any(t not in noted[0] for t in tokens):
                    wrong.append(f"the note naming its tokens {tokens}: {noted!r}")
                if wrong:
                    problems[f"{surface} {recipient!r}"] = wrong
    finally:
        receiver.stop()
    scorecard(
        14,
        f"look-alike words: {len(look_alikes)} recipients with a word of another script that reads as a Latin one (Cyrillic, Greek, Armenian, Coptic, non-ASCII Latin), {len(controls)} controls x approval page, admin pages, email, webhook: tokens, flagged, said",
        cases=cases,
        bypasses=len(problems),
        problems=dict(list(problems.items())[:10]),
    )
    assert problems == {}


def test_keys_and_titles_that_mix_directions_are_shown_in_the_order_they_are_stored(
    principals, scorecard, settings, client
) -> None:
    """A belief's key and a goal's title are identifiers the operator's own words name ("identity/"
    + a key, "goal #3 “" + a title + "”"): when one mixes directions it must read as stored wherever
    a change to it is shown — the proposal's approval page (its diff and its Edit form's labels), the
    email asking for it, the safety notice sent when it is accepted (its title and lines), the
    notice's admin page, its one-tap undo page and the version's admin page. Laid out by the Unicode
    bidirectional algorithm (python-bidi); a key in one right-to-left script alone is shown as it is."""
    from bidi import get_display

    from beliefs.models import Belief, WorldModelVersion
    from goals.models import Goal, GoalModelVersion
    from intents.approval import approve_intent
    from intents.models import Directive
    from operator_site.revert_links import revert_url

    settings.OPERATOR_NOTIFY_EMAIL = "person@example.com"
    agent = principals["full_agent"].principal
    person_user = principals["owner"].principal.user
    client.login(username="owner", password="pw-owner-123")
    problems: dict[str, list[str]] = {}
    cases = 0

    def check(
        surface: str, text: str, expected: str, stored: str, mixed: bool, html: str | None = None
    ) -> None:
        nonlocal cases
        cases += 1
        wrong = []
        if expected not in text:
            wrong.append(f"{expected!r} not shown")
        if mixed and stored in text:
            wrong.append("shown as stored, where it reorders")
        if get_display(expected) != expected and mixed:
            wrong.append(f"shown as {get_display(expected)!r}")
        if html is not None and mixed and 'id="op-hidden-banner"' not in html:
            wrong.append("the page is not flagged")
        if wrong:
            problems[f"{surface} {stored!r}"] = wrong

    for i, raw in enumerate([*MIXED_DIRECTIONS[:4], "\u05d3\u05e0\u05d9 \u05db\u05d4\u05df"]):
        mixed = raw in MIXED_DIRECTIONS
        name = raw.casefold()  # a belief's key is stored case-folded
        for kind, change, label in (
            (
                "world_model_change",
                {"op": "add", "kind": "identity", "key": name, "value": f"v{i}"},
                "identity/",
            ),
            ("goal_model_change", {"entity": "goal", "op": "add", "fields": {"title": name}}, "goal #"),
        ):
            version_model = WorldModelVersion if kind == "world_model_change" else GoalModelVersion
            proposal = {
                "type": kind,
                "title": f"Proposal {i}",
                "changes": [change],
                "proposed_against": version_model.objects.count(),
                "reason": "Seen in a message.",
            }
            answer = run_tool(agent, "operator_record_action_intent", {"action": proposal})
            assert answer.get("status") == "pending_approval", answer
            intent = Intent.objects.get(pk=answer["id"])
            shown = identifier_text(name)
            assert (shown != name) is mixed
            decide = client.get(f"/admin/intents/intent/{intent.pk}/decide/").content.decode()
            text = shown_text(decide)
            # the diff's row ("identity/<key>", "goal #n “<title>”") and the Edit form's label
            expected = f"{label}{shown}" if kind == "world_model_change" else f"“{shown}”"
            check(f"{kind} approval page diff", text, expected, name, mixed, decide)
            if kind == "world_model_change":
                check(
                    f"{kind} approval page edit label",
                    text,
                    f"add identity {shown} · value",
                    name,
                    mixed,
                    decide,
                )
            [asked] = [
                m for m in mail.outbox if f"asks to {kind}" in m.subject or f"Proposal {i}" in m.subject
            ][-1:]
            check(f"{kind} email asking", asked.body, shown, name, mixed)
            approve_intent(intent, by=person_user, seen=intent.payload_digest, via="admin")
            version = version_model.objects.order_by("-number").first()
            notice = Notification.objects.filter(subject_id=version.number).order_by("-id").first()
            assert notice is not None, f"no notice for {kind} v{version.number}"
            check(f"{kind} notice title", notice.title, shown, name, mixed)
            check(f"{kind} notice lines", notice.body, expected, name, mixed)
            email = email_of(notice)
            check(f"{kind} notice email", email, expected, name, mixed)
            admin_name = (
                "beliefs/worldmodelversion" if kind == "world_model_change" else "goals/goalmodelversion"
            )
            for surface, url in (
                ("notice admin page", f"/admin/operator_site/notification/{notice.pk}/change/"),
                ("undo page", revert_url(notice).removeprefix(settings.OPERATOR_PUBLIC_URL)),
                ("version admin page", f"/admin/{admin_name}/{version.number}/change/"),
                ("undo confirmation page", f"/admin/{admin_name}/{version.number}/undo/"),
            ):
                response = client.get(url)
                html = response.content.decode()
                if response.status_code != 200:
                    problems[f"{kind} {surface} {name!r}"] = [f"HTTP {response.status_code}"]
                    continue
                check(f"{kind} {surface}", shown_text(html), expected, name, mixed, html)
            # The entry's own admin pages: its list and its page.
            if kind == "world_model_change":
                entry = Belief.objects.get(kind="identity", key=name)
                entry_urls = ["/admin/beliefs/belief/", f"/admin/beliefs/belief/{entry.pk}/change/"]
            else:
                entry = Goal.objects.get(title=name)
                entry_urls = ["/admin/goals/goal/", f"/admin/goals/goal/{entry.pk}/change/"]
            for url in entry_urls:
                html = client.get(url).content.decode()
                check(f"{kind} {url}", shown_text(html), shown, name, mixed, html)
        # A directive's topic: through its tool, then its admin list and page. (A task's key is
        # lower-case ASCII letters, digits, "_" and "-" only: it cannot mix directions.)
        with transaction.atomic():
            directive = run_tool(
                agent, "operator_set_directive", {"kind": "topic_mute", "topic": name, "reason": "r"}
            )
        assert directive.get("ok", True) and not directive.get("error"), directive
        directive_pk = Directive.objects.latest("id").pk
        for url in ("/admin/intents/directive/", f"/admin/intents/directive/{directive_pk}/change/"):
            html = client.get(url).content.decode()
            check(f"{url}", shown_text(html), shown, name, mixed, html)

    scorecard(
        14,
        "directions: belief keys, goal titles and directive topics that mix directions x approval page, emails, notice, notice and undo pages, version page, their admin lists and pages: read as stored",
        cases=cases,
        bypasses=len(problems),
        problems=dict(list(problems.items())[:10]),
    )
    assert problems == {}
