"""`operator_record_action_intent`: the seed §4.5 example field for field (SDK client and the seed's raw
curl), status by verdict, the idempotency key and its escaping, same-day / next-day de-duplication,
one notice, bad input refused with nothing written."""

from __future__ import annotations

import hashlib
import itertools
import json
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core import mail
from django.utils import timezone

from intents.answers import intent_dict
from intents.lifecycle import idempotency_key, transition_intent
from intents.models import Decision, Intent, IntentEvent
from intents.tests.conftest import SEED_ACTION, SEED_REASON
from operator_site.models import AuditEvent, Notification
from tests.fixtures import SEED_HEADERS, asgi_http, call, mcp_client, orm, parse_sse, tool_json

SEED_FIELDS = [
    "id",
    "action_type",
    "title",
    "status",
    "policy_decision",
    "policy_reasons",
    "approval_decision_id",
    "idempotency_key",
    "affordances",
    "created",
]
SEED_KEY = hashlib.sha1(b"spend|Annual plan renewal||4900|", usedforsecurity=False).hexdigest()[:32]


def assert_seed_row(row: dict, *, created: bool = True) -> None:
    assert list(row)[: len(SEED_FIELDS)] == SEED_FIELDS
    assert isinstance(row["id"], int)
    assert row["action_type"] == "spend"
    assert row["title"] == "Annual plan renewal"
    assert row["status"] == "pending_approval"
    assert row["policy_decision"] == "requires_approval"
    assert SEED_REASON in row["policy_reasons"]
    assert row["approval_decision_id"] is None
    assert row["idempotency_key"] == SEED_KEY
    assert row["affordances"] == ["accept", "edit", "respond", "ignore"]
    assert row["created"] is created


# --- the seed example, end to end -------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_seed_example_through_the_sdk_client(agent, mode: str) -> None:
    async with mcp_client(agent.token, mode=mode) as client:
        first = tool_json(await client.call_tool("operator_record_action_intent", {"action": SEED_ACTION}))
        again = tool_json(await client.call_tool("operator_record_action_intent", {"action": SEED_ACTION}))
    assert_seed_row(first)
    assert_seed_row(again, created=False)
    assert again["id"] == first["id"]
    assert await orm(Intent.objects.count) == 1
    assert await orm(Decision.objects.count) == 1
    assert await orm(Notification.objects.filter(kind="approval_request").count) == 1
    assert len(mail.outbox) == 1
    assert mail.outbox[0].subject == "[operator] Approve: Annual plan renewal"


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_seed_example_as_the_seeds_raw_curl(agent) -> None:
    """Byte for byte the seed's request: its headers, a bearer token, no protocol header, no initialize."""
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{\n'
        '      "name":"operator_record_action_intent",\n'
        '      "arguments":{"action":{"type":"spend","title":"Annual plan renewal",\n'
        '                              "amount_cents":4900}}}}'
    )
    async with asgi_http() as http:
        response = await http.post(
            "/mcp", content=body, headers={**SEED_HEADERS, "Authorization": f"Bearer {agent.token}"}
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    message = parse_sse(response.text)
    assert message["jsonrpc"] == "2.0" and message["id"] == 1
    content = message["result"]["content"]
    assert len(content) == 1 and content[0]["type"] == "text"
    text = content[0]["text"]
    row = json.loads(text)
    assert text == json.dumps(row, indent=2, ensure_ascii=False)
    assert_seed_row(row)
    intent = await orm(Intent.objects.get)
    assert intent.recorded_by_id == agent.principal.id
    assert intent.actor == "scout"
    assert intent.expires_at is not None


@pytest.mark.django_db
def test_key_is_the_seeds_formula(agent, record) -> None:
    intent, _ = record(
        agent, type="email", title="Hi", recipient="bob@example.com", amount_cents=None, body="Yo"
    )
    expected = hashlib.sha1(b"email|Hi|bob@example.com||Yo", usedforsecurity=False).hexdigest()[:32]
    assert intent.idempotency_key == expected
    assert idempotency_key("spend", "Annual plan renewal", None, 4900, None) == SEED_KEY


def _all_short_strings(alphabet: str, max_len: int) -> list[str]:
    out = [""]
    for length in range(1, max_len + 1):
        out += ["".join(p) for p in itertools.product(alphabet, repeat=length)]
    return out


def test_escaping_prevents_key_collisions_exhaustively() -> None:
    """Every tuple of short fields over the dangerous characters `|` and `\\` gets its own key,
    while the unescaped join (and a join escaping `|` only) collides on the very same tuples."""
    strings = _all_short_strings("a|\\", 2)
    tuples = [
        ("send", title, recipient, amount, body)
        for title, recipient, body in itertools.product(strings, repeat=3)
        for amount in (None, 1, 12)
    ]
    keys = {idempotency_key(*t) for t in tuples}
    assert len(keys) == len(tuples) > 6000

    def text(field: object) -> str:
        return "" if field is None else str(field)

    naive = {"|".join(text(f) for f in t) for t in tuples}
    pipe_only = {"|".join(text(f).replace("|", "\\|") for f in t) for t in tuples}
    assert len(naive) < len(tuples) and len(pipe_only) < len(tuples)  # the danger is real


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("send", "a|b", "c", None, ""), ("send", "a", "b|c", None, "")),
        (("send", "t", "x|", None, ""), ("send", "t", "x", None, "|")),
        (("send|x", "t", "", None, ""), ("send", "x|t", "", None, "")),
        (("spend", "x", "|4900", None, ""), ("spend", "x", "", 4900, "|")),
        (("send", "\\|", "", None, ""), ("send", "\\", "|", None, "")),
    ],
)
def test_escaping_prevents_these_naive_collisions(a: tuple, b: tuple) -> None:
    assert "|".join("" if f is None else str(f) for f in a) == "|".join(
        "" if f is None else str(f) for f in b
    )
    assert idempotency_key(*a) != idempotency_key(*b)


def test_escaping_can_collide_only_by_being_the_same_intent() -> None:
    assert idempotency_key("spend", "x", None, 4900, None) == idempotency_key("spend", "x", "", 4900, "")


# --- status by verdict ---------------------------------------------------------------------------------
@pytest.mark.django_db
def test_allowed_intents_are_queued_with_no_question_and_no_notice(agent, record) -> None:
    intent, created = record(agent, type="note", title="Remember the milk", amount_cents=None)
    assert created and intent.status == "queued" and intent.policy_decision == "allow"
    assert intent.expires_at is None
    assert not Decision.objects.exists()
    assert not Notification.objects.exists()
    row = intent_dict(intent, created=True)
    assert row["affordances"] == [] and row["approval_decision_id"] is None


@pytest.mark.django_db
def test_denied_intents_are_blocked_and_the_person_is_told(agent, record) -> None:
    intent, _ = record(
        agent, type="share_credentials", title="Send the bank login to a helper", amount_cents=None
    )
    assert intent.status == "blocked" and intent.policy_decision == "deny"
    assert intent.terminal
    assert not Decision.objects.exists()
    notice = Notification.objects.get()
    # A safety notice (spec, Notification): never held by a directive the agent itself could set.
    assert notice.kind == "intent_blocked" and notice.safety is True
    assert notice.source_id == agent.principal.id  # the per-agent backstop counts it
    assert intent_dict(intent)["affordances"] == []


@pytest.mark.django_db
def test_approval_needed_opens_one_decision_and_one_notice_with_the_affordances(agent, record) -> None:
    intent, _ = record(agent, topic="Billing", recipient="Acme Ltd")
    decision = Decision.objects.get()
    assert decision.intent == intent and decision.status == "pending"
    assert decision.title == "Approve: Annual plan renewal"
    notice = Notification.objects.get()
    assert (notice.kind, notice.dedupe_key, notice.topic, notice.safety) == (
        "approval_request",
        f"intent:{intent.id}",
        "billing",
        False,
    )
    assert notice.state == "delivered"
    for affordance in ("accept", "edit", "respond", "ignore"):
        assert f"/admin/intents/intent/{intent.id}/decide/{affordance}/" in notice.body
    assert "49.00 (4900 cents)" in notice.body and "To: Acme Ltd" in notice.body
    assert SEED_REASON in notice.body
    assert notice.subject_kind == ""  # nothing to revert: nothing has happened
    assert [e.event for e in IntentEvent.objects.all()] == ["recorded"]


# --- de-duplication by day ------------------------------------------------------------------------------
@pytest.mark.django_db
def test_same_local_day_returns_the_same_row_and_sends_nothing_more(agent, record, t0) -> None:
    # An hour later is the same local day even when the test runs in the day's last hour.
    t0 = min(t0, timezone.localtime(t0).replace(hour=22, minute=0, second=0))
    first, created = record(agent, now=t0)
    again, created_again = record(agent, now=t0 + timedelta(hours=1))
    assert created and not created_again
    assert again.id == first.id
    assert Intent.objects.count() == Decision.objects.count() == Notification.objects.count() == 1
    assert len(mail.outbox) == 1
    # whitespace in the title and case of the type are not a new intent
    third, created_third = record(agent, now=t0, type=" SPEND ", title="Annual  plan renewal ")
    assert third.id == first.id and not created_third


@pytest.mark.django_db
def test_a_new_local_day_makes_a_new_intent(agent, record, settings) -> None:
    settings.OPERATOR_TIME_ZONE = settings.TIME_ZONE = "America/New_York"
    tz = ZoneInfo("America/New_York")
    late = datetime(2026, 3, 2, 23, 30, tzinfo=tz)
    first, _ = record(agent, now=late)
    same_day, created = record(agent, now=datetime(2026, 3, 2, 0, 5, tzinfo=tz) + timedelta(hours=23))
    assert same_day.id == first.id and not created
    next_day, created = record(agent, now=late + timedelta(hours=1))  # 00:30 local, 05:30 UTC
    assert created and next_day.id != first.id
    assert next_day.idempotency_key == first.idempotency_key
    assert (first.local_day.isoformat(), next_day.local_day.isoformat()) == ("2026-03-02", "2026-03-03")
    assert Notification.objects.count() == 2


@pytest.mark.django_db
def test_different_payloads_are_different_intents(agent, record) -> None:
    a, _ = record(agent)
    b, _ = record(agent, amount_cents=4901)
    c, _ = record(agent, recipient="vendor")
    d, _ = record(agent, body="monthly instead")
    assert len({a.id, b.id, c.id, d.id}) == 4


@pytest.mark.django_db
def test_the_duplicate_returns_the_row_as_it_is_now(agent, record) -> None:
    first, _ = record(agent)
    transition_intent(principal=agent.principal, intent_id=first.id, to="cancelled")
    again, created = record(agent)
    assert again.id == first.id and again.status == "cancelled" and not created
    assert intent_dict(again, created=False)["affordances"] == []


# --- bad input: refused, nothing written --------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("action", "error"),
    [
        ({"title": "no type"}, "invalid_arguments"),
        ({"type": "spend"}, "invalid_arguments"),
        ({"type": "spend", "title": "x", "amount_cents": -5}, "invalid_arguments"),
        ({"type": "spend", "title": "x", "amount_cents": 12.5}, "invalid_arguments"),
        ({"type": "spend", "title": "x", "amount_cents": True}, "invalid_arguments"),
        ({"type": "spend", "title": "x", "currency": "EUR"}, "invalid_arguments"),
        ({"type": "spend", "title": "x", "due": 1700000000}, "invalid_arguments"),
        ({"type": "spend", "title": "x", "due": "tomorrow-ish"}, "invalid_arguments"),
        ({"type": "spend", "title": "x" * 301}, "invalid_arguments"),
        ({"type": "   ", "title": "x"}, "type_required"),
        ({"type": "spend", "title": " \n "}, "title_required"),
    ],
)
async def test_bad_actions_are_refused_and_nothing_is_written(agent, action: dict, error: str) -> None:
    async with asgi_http(agent.token) as http:
        answer = await call(http, "operator_record_action_intent", {"action": action})
    assert answer["ok"] is False and answer["error"] == error and answer["reason"]
    assert await orm(Intent.objects.count) == 0
    assert await orm(Notification.objects.count) == 0
    audit = await orm(lambda: list(AuditEvent.objects.values_list("outcome", "error_code")))
    assert audit == [("refused", error)]


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_the_claimed_actor_is_never_the_recorder(agent, owner) -> None:
    async with asgi_http(agent.token) as http:
        row = await call(
            http,
            "operator_record_action_intent",
            {"action": {"type": "reminder", "title": "Stretch", "due": "2026-12-01T09:00"}, "actor": "owner"},
        )
    assert row["status"] == "queued" and row["recorded_by"] == "scout"
    intent = await orm(Intent.objects.get)
    assert intent.recorded_by_id == agent.principal.id
    assert intent.due is not None and intent.due.tzinfo is not None
