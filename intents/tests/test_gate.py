"""The gate: every rule, the strictest verdict winning, every reason kept, failing closed, purity,
and docs/gate.md matching the table in the code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from intents import gate
from intents.gate import Action, Verdict, evaluate
from intents.tests.conftest import SEED_REASON

ROOT = Path(__file__).resolve().parents[2]


def verdict(**action: object) -> gate.GateResult:
    return evaluate(Action(**{"title": "something", **action}))


def test_rule_one_is_the_seed_sentence_verbatim() -> None:
    assert gate.SPEND_REASON == SEED_REASON
    assert gate.RULES[0].id == "spend"
    result = verdict(type="spend", title="Annual plan renewal", amount_cents=4900)
    assert result.decision == Verdict.REQUIRES_APPROVAL
    assert result.reasons == (SEED_REASON,)
    assert result.rule_ids == ("spend",)


@pytest.mark.parametrize(
    ("action", "rules", "decision"),
    [
        # rule 1: spending — by type, or by any positive amount on any type
        ({"type": "spend"}, ["spend"], "requires_approval"),
        ({"type": "Purchase"}, ["spend"], "requires_approval"),
        ({"type": "subscribe"}, ["spend"], "requires_approval"),
        ({"type": "hire"}, ["spend"], "requires_approval"),
        ({"type": "note", "amount_cents": 1}, ["spend"], "requires_approval"),
        ({"type": "note", "amount_cents": 0}, ["self_directed"], "allow"),
        # credentials and secrets: denied
        ({"type": "share_credentials"}, ["credentials"], "deny"),
        ({"type": "Share Password", "recipient": "bob"}, ["credentials", "other_recipient"], "deny"),
        (
            {"type": "email", "recipient": "bob@example.com", "body": "password: hunter22"},
            ["secret_material", "other_recipient", "send"],
            "deny",
        ),
        (
            {"type": "post", "body": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl"},
            ["secret_material", "publish"],
            "deny",
        ),
        ({"type": "send", "title": "key AKIAABCDEFGHIJKLMNOP"}, ["secret_material", "send"], "deny"),
        (
            {"type": "frobnicate", "body": "api_key = abcd1234efgh"},
            ["secret_material", "unknown_type"],
            "deny",
        ),
        # ...but a note to self may hold a password
        ({"type": "note", "body": "wifi password: correct-horse"}, ["self_directed"], "allow"),
        # sending to anyone other than the person
        ({"type": "reminder", "recipient": "alice@example.com"}, ["other_recipient"], "requires_approval"),
        ({"type": "draft", "recipient": "landlord"}, ["other_recipient"], "requires_approval"),
        ({"type": "email"}, ["send"], "requires_approval"),
        ({"type": "invite", "recipient": "team"}, ["other_recipient", "send"], "requires_approval"),
        # publishing
        ({"type": "publish"}, ["publish"], "requires_approval"),
        ({"type": "tweet"}, ["publish"], "requires_approval"),
        # deleting and the irreversible
        ({"type": "delete"}, ["irreversible"], "requires_approval"),
        ({"type": "close-account"}, ["irreversible"], "requires_approval"),
        ({"type": "sign"}, ["irreversible"], "requires_approval"),
        # proposals of a change to the person's model: always the person's
        ({"type": "world_model_change"}, ["proposal"], "requires_approval"),
        ({"type": "Goal-Model-Change"}, ["proposal"], "requires_approval"),
        (
            {"type": "goal_model_change", "recipient": "bob"},
            ["other_recipient", "proposal"],
            "requires_approval",
        ),
        # unknown types fail closed
        ({"type": "launch_rocket"}, ["unknown_type"], "requires_approval"),
        ({"type": "notes"}, ["unknown_type"], "requires_approval"),
        # only self-directed, reversible types are allowed
        ({"type": "note"}, ["self_directed"], "allow"),
        ({"type": "reminder", "recipient": "me"}, ["self_directed"], "allow"),
        ({"type": " Draft ", "recipient": "  Self "}, ["self_directed"], "allow"),
        # several rules: every reason, strictest verdict
        (
            {"type": "subscribe", "recipient": "vendor", "amount_cents": 999},
            ["spend", "other_recipient"],
            "requires_approval",
        ),
        ({"type": "share_secret", "amount_cents": 100}, ["spend", "credentials"], "deny"),
    ],
)
def test_each_rule(action: dict, rules: list[str], decision: str) -> None:
    result = verdict(**action)
    assert list(result.rule_ids) == rules
    assert result.decision == decision
    by_id = {rule.id: rule for rule in gate.RULES}
    assert list(result.reasons) == [by_id[r].reason for r in rules]


def test_every_rule_of_the_table_is_exercised_above() -> None:
    exercised = set()
    for case in test_each_rule.pytestmark[0].args[1]:  # type: ignore[attr-defined]
        exercised.update(case[1])
    assert exercised == {rule.id for rule in gate.RULES}


def test_strictest_verdict_wins_whatever_the_order() -> None:
    assert Verdict.DENY.strictness > Verdict.REQUIRES_APPROVAL.strictness > Verdict.ALLOW.strictness
    # allow is only ever the verdict when nothing stricter matched
    for rule in gate.RULES:
        if rule.verdict == Verdict.ALLOW:
            assert rule.id == "self_directed"


def test_nothing_matching_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate, "RULES", ())
    result = verdict(type="note")
    assert result.decision == Verdict.REQUIRES_APPROVAL
    assert result.reasons == (gate.FALLBACK_REASON,)


def test_the_gate_is_deterministic() -> None:
    action = Action(type="email", title="Hi", recipient="bob", body="hello")
    assert {evaluate(action) for _ in range(50)} == {evaluate(action)}


def test_the_gate_module_is_pure_no_django_no_io() -> None:
    """Importing and running the gate pulls in no Django, database, network or model module."""
    code = (
        "import sys, intents.gate as g\n"
        "g.evaluate(g.Action(type='spend', title='x', amount_cents=1))\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'socket', 'sqlite3', 'psycopg', 'httpx', 'httpx2', 'requests', 'urllib3', 'mcp'}]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_docs_gate_md_shows_the_table_of_the_code() -> None:
    document = (ROOT / "docs" / "gate.md").read_text()
    assert gate.table_in(document) == gate.render_markdown(), (
        "docs/gate.md is out of date: run `python -m intents.gate --write docs/gate.md`"
    )
    assert gate.splice_into(document) == document
    for rule in gate.RULES:
        assert f"`{rule.id}`" in document
    assert "pending_approval" in document and "executing" in document  # the lifecycle diagram


def test_the_rendering_escapes_pipes_in_cells() -> None:
    for line in gate.render_markdown().splitlines()[2 : 2 + len(gate.RULES)]:
        assert line.count(" | ") == 4


def test_the_gates_proposal_types_are_the_registered_kinds() -> None:
    from operator_site import proposals

    assert set(proposals.action_types()) == gate.PROPOSAL_TYPES


# --- the action as the person reads it --------------------------------------------------------------
CYRILLIC_A, CYRILLIC_O, CYRILLIC_E = "\u0430", "\u043e", "\u0435"


@pytest.mark.parametrize(
    ("action", "rules"),
    [
        ({"type": f"share p{CYRILLIC_A}ssword"}, ["credentials"]),
        ({"type": "share_pass\u200bword"}, ["credentials"]),
        ({"type": "\uff53\uff48\uff41\uff52\uff45_credentials"}, ["credentials"]),  # full width
        ({"type": "email", "recipient": "bob", "body": f"p{CYRILLIC_A}ssword: hunter22"}, None),
        ({"type": "email", "recipient": "bob", "body": "pass\u00adword: hunter22"}, None),
        ({"type": "post", "body": "-----BEGIN \u0420RIVATE KEY-----"}, None),  # a Cyrillic capital ER
        ({"type": "send", "title": "key AKIA\u2060ABCDEFGHIJKLMNOP"}, None),
    ],
)
def test_what_reads_as_a_denied_action_is_denied(action: dict, rules: list[str] | None) -> None:
    result = verdict(**action)
    assert result.decision == Verdict.DENY
    assert result.reasons[-1] == gate.AS_SEEN_REASON
    assert "credentials" in result.rule_ids if rules else "secret_material" in result.rule_ids
    # As written, each was only asked about: the reading is what denies it.
    assert gate._judge(Action(**{"title": "something", **action})).decision == Verdict.REQUIRES_APPROVAL


@pytest.mark.parametrize(
    "action",
    [
        {"type": f"n{CYRILLIC_O}t{CYRILLIC_E}"},  # reads as "note", but is no type the gate allows
        {"type": "note", "recipient": f"m{CYRILLIC_E}"},  # reads as "me", but is someone else
        {"type": "reminder", "recipient": "sel\u200bf"},
    ],
)
def test_a_spelling_never_loosens_the_gate(action: dict) -> None:
    result = verdict(**action)
    assert result.decision == Verdict.REQUIRES_APPROVAL
    assert gate.AS_SEEN_REASON not in result.reasons
    assert gate._judge(Action(**{"title": "something", **action}).as_seen()).decision == Verdict.ALLOW


def test_text_of_another_script_is_not_read_as_a_secret() -> None:
    for body in ("\u041f\u0440\u0438\u0432\u0435\u0442", "caf\u00e9 cr\u00e8me", "\u65e5\u672c\u8a9e"):
        result = verdict(type="email", recipient="bob", body=body)
        assert result.decision == Verdict.REQUIRES_APPROVAL and gate.AS_SEEN_REASON not in result.reasons


@pytest.mark.parametrize(
    ("body", "found"),
    [
        ("The password is Hunter22", "password stated in words"),
        ("Das Kennwort ist Geheim123", "password stated in words"),
        ("\u6211\u7684\u5bc6\u7801\u662fhunter22", "password stated in words"),  # Chinese, no spaces
        ("pw: hunter22", "password or key assignment"),
        ("\u043f\u0430\u0440\u043e\u043b\u044c: hunter22", "password or key assignment"),  # Russian
        ("mot de passe : hunter22", "password or key assignment"),
        ("PIN 4821", "PIN or one-time code"),
        ("Your verification code is 482 913", "PIN or one-time code"),
    ],
)
def test_a_secret_given_in_words_is_secret_material(body: str, found: str) -> None:
    action = Action(type="email", title="t", recipient="bob", body=body)
    assert found in action.secrets_found()
    assert verdict(type="email", recipient="bob", body=body).decision == Verdict.DENY


@pytest.mark.parametrize(
    "body",
    [
        "My password is expired, please reset it.",
        "The Wi-Fi password is on the fridge",
        "Password is 8+ characters long",
        "The PIN pad is broken",
        "Your booking confirmation code is 482913",
        "The door access code is 4821",
        "Spin: 1234 rounds",
        "PW: Paul Walker sends his regards",  # a short form that is also initials
    ],
)
def test_words_about_a_secret_that_give_none_are_not_secret_material(body: str) -> None:
    assert Action(type="email", title="t", recipient="bob", body=body).secrets_found() == []


def test_a_word_spelled_out_letter_by_letter_is_read_whole() -> None:
    action = Action(type="email", title="p a s s w o r d: hunter22", recipient="bob", body="h-u-n-t-e-r")
    joined = action.spelled_out_joined()
    assert (joined.title, joined.body) == ("password: hunter22", "hunter")
    assert gate._judge(action).decision == Verdict.REQUIRES_APPROVAL  # as written: no secret found
    result = gate.evaluate(action)
    assert result.decision == Verdict.DENY and result.reasons[-1] == gate.AS_SEEN_REASON
    # Two letters are no spelled-out word, and words of two or more letters are left as they are.
    plain = Action(type="email", title="a b to c-d", recipient="bob", body="pass the salt")
    assert plain.spelled_out_joined() == plain
