"""The deterministic action gate: a pure, table-driven function of an action.

`evaluate(action)` runs every rule of `RULES` in order; the strictest verdict among the matching
rules wins (deny > requires_approval > allow), and an action no rule matches requires approval.
Nothing here reads the clock, the database, the network or a model. `render_markdown()` writes the
table into docs/gate.md (`python -m intents.gate --write docs/gate.md`); a test keeps them identical.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from operator_site.lookalikes import as_seen


class Verdict(StrEnum):
    ALLOW = "allow"
    REQUIRES_APPROVAL = "requires_approval"
    DENY = "deny"

    @property
    def strictness(self) -> int:
        return _STRICTNESS[self]


_STRICTNESS = {Verdict.ALLOW: 0, Verdict.REQUIRES_APPROVAL: 1, Verdict.DENY: 2}

# Rule 1 of the gate: its sentence is kept verbatim (docs/gate.md, "The gate").
SPEND_REASON = (
    "Spending money, paid subscriptions, purchases, and paid vendor commitments require human "
    "approval before execution."
)
FALLBACK_REASON = (
    "No rule of the gate recognised this action, so it fails closed: it requires human approval."
)


# --- vocabularies (action types are compared after `normalise_type`) --------------------------------
SPEND_TYPES = frozenset(
    {
        "spend",
        "purchase",
        "buy",
        "pay",
        "payment",
        "subscribe",
        "renew",
        "order",
        "donate",
        "hire",
        "contract",
    }
)
CREDENTIAL_TYPES = frozenset(
    {
        "share_credentials",
        "share_secret",
        "share_password",
        "share_token",
        "share_api_key",
        "send_credentials",
        "send_password",
        "export_credentials",
    }
)
SEND_TYPES = frozenset(
    {"send", "email", "message", "reply", "forward", "sms", "call", "invite", "rsvp", "introduce"}
)
PUBLISH_TYPES = frozenset({"publish", "post", "tweet", "blog", "announce", "comment", "review"})
IRREVERSIBLE_TYPES = frozenset(
    {
        "delete",
        "remove",
        "purge",
        "wipe",
        "overwrite",
        "revoke",
        "unsubscribe",
        "cancel_subscription",
        "close_account",
        "sign",
        "submit",
        "deploy",
        "transfer",
    }
)
SELF_TYPES = frozenset({"note", "reminder", "draft"})
# A proposed change to the person's model (`operator_site.proposals`): applied only by their approval.
PROPOSAL_TYPES = frozenset({"world_model_change", "goal_model_change"})
KNOWN_TYPES = (
    SPEND_TYPES
    | CREDENTIAL_TYPES
    | SEND_TYPES
    | PUBLISH_TYPES
    | IRREVERSIBLE_TYPES
    | SELF_TYPES
    | PROPOSAL_TYPES
)

# Recipients that mean the person themself (compared lower-cased, whitespace collapsed).
SELF_RECIPIENTS = frozenset({"", "self", "me", "myself", "owner"})

# The words for a password or a key, in English with its short forms, and in other languages the
# person may write to others in (German, French, Spanish, Portuguese, Dutch, Polish, Swedish, Danish
# and Norwegian, Finnish, Turkish, Czech and Slovak, Hungarian, Romanian, Russian, Greek, Hebrew,
# Arabic, Hindi, Vietnamese, Indonesian). Bare "clave" and "parola" are left out: they also mean
# "key" and "word".
_CREDENTIAL_WORDS_EN = (
    r"pass[\s_.-]?word|passwd|passphrase|passcode|"
    r"api[_ -]?key|secret[_ -]?key|access[_ -]?token|client[_ -]?secret"
)
_CREDENTIAL_WORDS = (
    _CREDENTIAL_WORDS_EN + r"|passwort|kennwort|mot de passe|contrase(?:ñ|n)a|senha|palavra[- ]passe|"
    r"wachtwoord|has(?:ł|l)o|l(?:ö|o)senord|adgangskode|passord|salasana|(?:ş|s)ifre|heslo|"
    r"jelsz(?:ó|o)|parolă|пароль|κωδικός(?: πρόσβασης)?|συνθηματικό|ה?סיסמ(?:ה|א)|كلمة (?:ال)?مرور|पासवर्ड|"
    r"m(?:ậ|a)t kh(?:ẩ|a)u|kata sandi"
)
# Short forms that are also initials ("PW: Paul Walker"): what follows must look like a secret.
_SHORT_FORMS = r"pw|pwd|mdp"
# Written without spaces around it: no word boundary to find.
_CREDENTIAL_WORDS_CJK = r"密码|密碼|パスワード|비밀번호"
# "is" in the languages above, and the particles Chinese, Japanese and Korean write it with. (Not
# Polish "to": in English "the password to bob2@example.com" gives none.)
_IS = (
    r"(?:\s+(?:is|was|ist|war|est|était|es|era|é|er|var|är|on|jest|je|este|olduğu|"
    r"είναι|ήταν|היא|הוא|هي|هو|là|adalah)\b|"
    r"\s*(?:是|は|는|은|이))"
)
# What a secret stated in words must look like to be one: quoted, or holding a digit ("My password
# is expired" states no password; "The password is Hunter22" does) within its first 100 characters.
# The bound keeps the search linear: an unbounded look for the digit read to the end of a text with
# no space in it from every place the words matched ("密码是" 6,000 times took 2.3 s; `tests/security/
# test_26_slow_inputs.py`).
_STATED_VALUE = r"\s*:?\s*(?:[\"'\u201c\u2018\u00ab]\S{3,}|(?=\S{0,99}\d)\S{4,})"
# A code that signs the person in or approves a payment, given to someone else: a PIN, a one-time
# or verification code. Not a booking's confirmation code or a door's access code, which people
# share.
_CODE_WORDS = (
    r"pin(?:[\s-]?code)?|otp|one[\s-]time (?:code|password|passcode)|"
    r"(?:verification|security|login|sign[\s-]?in|authentication|auth|2fa|mfa|sms|tan) code"
)

# Secret-looking material: a private key block, well-known token shapes, `password: x` and the like.
# Each pattern says whether it reads the text lower-cased (words, in any case) or as written (a
# token's shape, whose case is part of it). Lower-casing once and matching without IGNORECASE is
# ~6x faster on a long body: Python's `re` folds case character by character at every position.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    ("private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"), False),
    ("AWS access key", re.compile(r"\bA(?:KIA|SIA)[0-9A-Z]{16}\b"), False),
    ("GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), False),
    ("API secret key", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), False),
    ("Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), False),
    ("operator token", re.compile(r"\bopk_[A-Za-z0-9_-]{20,}"), False),
    (
        "password or key assignment",
        re.compile(
            rf"(?:\b(?:{_CREDENTIAL_WORDS})\b|{_CREDENTIAL_WORDS_CJK})\s*[:=\uff1a]\s*\S{{4,}}"
            rf"|\b(?:{_SHORT_FORMS})\s*[:=]{_STATED_VALUE}"
        ),
        True,
    ),
    (
        "password stated in words",
        re.compile(
            rf"(?:\b(?:{_CREDENTIAL_WORDS}|{_SHORT_FORMS})|{_CREDENTIAL_WORDS_CJK}){_IS}{_STATED_VALUE}"
        ),
        True,
    ),
    (
        "PIN or one-time code",
        re.compile(rf"\b(?:{_CODE_WORDS})\b(?:\s*[:=]|{_IS}\s*:?|\s)\s*\d(?:[\s-]?\d){{3,9}}\b"),
        True,
    ),
)


def normalise_type(value: str) -> str:
    """`Share Credentials`, `share-credentials` and ` share_credentials ` are the same type."""
    return re.sub(r"[\s\-]+", "_", value.strip().lower()).strip("_")


def normalise_recipient(value: str | None) -> str:
    return " ".join((value or "").split()).lower()


# A word spelled out: three or more single letters or digits, each set off by one space, dot,
# hyphen, underscore, asterisk or bullet ("p a s s w o r d"; "a b c" becomes "abc", which no rule
# reads).
_SPELLED_OUT = re.compile(r"(?<![^\W_])[^\W_](?:[ .\-_*·•][^\W_](?![^\W_])){2,}")
_SPELLING_GAPS = re.compile(r"[ .\-_*·•]")


def _joined(text: str) -> str:
    return _SPELLED_OUT.sub(lambda found: _SPELLING_GAPS.sub("", found.group()), text)


@dataclass(frozen=True)
class Action:
    """What the gate looks at. `type` is compared normalised; `title`/`body` are scanned for secrets."""

    type: str
    title: str
    recipient: str | None = None
    amount_cents: int | None = None
    body: str | None = None

    @property
    def kind(self) -> str:
        return normalise_type(self.type)

    @property
    def to_someone_else(self) -> bool:
        return normalise_recipient(self.recipient) not in SELF_RECIPIENTS

    @property
    def moves_money(self) -> bool:
        return self.amount_cents is not None and self.amount_cents > 0

    @property
    def self_directed(self) -> bool:
        return self.kind in SELF_TYPES and not self.to_someone_else and not self.moves_money

    def as_seen(self) -> Action:
        """The action as the person reads it (`operator_site.lookalikes.as_seen`): look-alike
        letters as the letters they show, decorated Latin letters bare, invisible characters
        dropped, in its type, title, recipient and body."""
        return Action(
            type=as_seen(self.type),
            title=as_seen(self.title),
            recipient=None if self.recipient is None else as_seen(self.recipient),
            amount_cents=self.amount_cents,
            body=None if self.body is None else as_seen(self.body),
        )

    def spelled_out_joined(self) -> Action:
        """The action with each word spelled out letter by letter in its title and body read as the
        word ("p a s s w o r d", "p-a-s-s-w-o-r-d" and "h.u.n.t.e.r.2.2" read as written whole)."""
        return replace(
            self, title=_joined(self.title), body=None if self.body is None else _joined(self.body)
        )

    def secrets_found(self) -> list[str]:
        text = f"{self.title}\n{self.body or ''}"
        lowered = text.lower()
        return [
            name for name, pattern, lower in SECRET_PATTERNS if pattern.search(lowered if lower else text)
        ]


@dataclass(frozen=True)
class Rule:
    id: str
    verdict: Verdict
    when: str  # the condition in words, for docs/gate.md
    reason: str  # the sentence the person and the agent read
    matches: Callable[[Action], bool]


def _squeezed(kind: str) -> str:
    """A type without the separators between its letters: "share_pass_word" is "sharepassword". Only
    the deny rule compares types so (a type squeezed into `note` is no note)."""
    return kind.replace("_", "")


_SQUEEZED_CREDENTIAL_TYPES = frozenset(_squeezed(kind) for kind in CREDENTIAL_TYPES)


def _types(names: frozenset[str]) -> str:
    return ", ".join(f"`{n}`" for n in sorted(names))


RULES: tuple[Rule, ...] = (
    Rule(
        "spend",
        Verdict.REQUIRES_APPROVAL,
        f"type is one of {_types(SPEND_TYPES)}, or `amount_cents` is positive",
        SPEND_REASON,
        lambda a: a.kind in SPEND_TYPES or a.moves_money,
    ),
    Rule(
        "credentials",
        Verdict.DENY,
        f"type is one of {_types(CREDENTIAL_TYPES)}, with or without the spaces, hyphens and "
        "underscores between its letters (`sharepassword`, `share_pass_word`)",
        "Sharing credentials, passwords, keys or other secrets is never done for an agent: denied.",
        lambda a: _squeezed(a.kind) in _SQUEEZED_CREDENTIAL_TYPES,
    ),
    Rule(
        "secret_material",
        Verdict.DENY,
        "the title or body holds secret-looking material (a private key, an API token, "
        "`password: ...` in English or 25 other languages, a password stated in words, a PIN or "
        "one-time code) and the action is not self-directed",
        "The action would carry secret-looking material (a key, a token or a password) away from the "
        "person: denied.",
        lambda a: not a.self_directed and bool(a.secrets_found()),
    ),
    Rule(
        "other_recipient",
        Verdict.REQUIRES_APPROVAL,
        f"a recipient is given and it is not the person ({_types(SELF_RECIPIENTS - {''})})",
        "Sending to anyone other than the person requires human approval before execution.",
        lambda a: a.to_someone_else,
    ),
    Rule(
        "send",
        Verdict.REQUIRES_APPROVAL,
        f"type is one of {_types(SEND_TYPES)}",
        "Messages, invitations and calls reach other people and cannot be unsent; they require human "
        "approval before execution.",
        lambda a: a.kind in SEND_TYPES,
    ),
    Rule(
        "publish",
        Verdict.REQUIRES_APPROVAL,
        f"type is one of {_types(PUBLISH_TYPES)}",
        "Publishing puts words in public under the person's name; it requires human approval before "
        "execution.",
        lambda a: a.kind in PUBLISH_TYPES,
    ),
    Rule(
        "irreversible",
        Verdict.REQUIRES_APPROVAL,
        f"type is one of {_types(IRREVERSIBLE_TYPES)}",
        "Deleting, revoking, signing, submitting and other irreversible actions require human approval "
        "before execution.",
        lambda a: a.kind in IRREVERSIBLE_TYPES,
    ),
    Rule(
        "proposal",
        Verdict.REQUIRES_APPROVAL,
        f"type is one of {_types(PROPOSAL_TYPES)}",
        "A proposed change to the person's world model or goal model changes nothing until the person "
        "accepts it; their approval is its evidence.",
        lambda a: a.kind in PROPOSAL_TYPES,
    ),
    Rule(
        "unknown_type",
        Verdict.REQUIRES_APPROVAL,
        "type is none of the types above or below",
        "The gate does not know this type of action, so it fails closed: it requires human approval "
        "before execution.",
        lambda a: a.kind not in KNOWN_TYPES,
    ),
    Rule(
        "self_directed",
        Verdict.ALLOW,
        f"type is one of {_types(SELF_TYPES)}, no one but the person is the recipient, and no money moves",
        "A note, a reminder to the person or a draft stays with the person and can be undone; it needs "
        "no approval.",
        lambda a: a.self_directed,
    ),
)


@dataclass(frozen=True)
class GateResult:
    decision: Verdict
    reasons: tuple[str, ...]
    rule_ids: tuple[str, ...]


# Added to the reasons when the action as the person reads it is judged stricter than as written.
AS_SEEN_REASON = (
    "It is judged as it reads: its look-alike and decorated letters read as the letters they show, "
    "a word spelled out letter by letter read whole, and its invisible characters dropped."
)


def evaluate(action: Action) -> GateResult:
    """The action is judged as written and as the person reads it (`Action.as_seen`: "share
    password" written with two Cyrillic letters is "share password", and "password: x" with a
    zero-width space inside, or struck through, is a password; then, `Action.spelled_out_joined`,
    "p a s s w o r d: x" is one too); the strictest judgement stands, so a spelling can make the
    gate stricter, never looser."""
    verdict = _judge(action)
    seen = action.as_seen()
    for reading in (seen, seen.spelled_out_joined()):
        if reading == action:
            continue
        read = _judge(reading)
        if read.decision.strictness > verdict.decision.strictness:
            verdict = GateResult(read.decision, (*read.reasons, AS_SEEN_REASON), read.rule_ids)
    return verdict


def _judge(action: Action) -> GateResult:
    """Every matching rule adds its reason; the strictest verdict wins; nothing matching fails closed."""
    matched = [rule for rule in RULES if rule.matches(action)]
    if not matched:
        return GateResult(Verdict.REQUIRES_APPROVAL, (FALLBACK_REASON,), ())
    decision = max((rule.verdict for rule in matched), key=lambda v: v.strictness)
    reasons: list[str] = []
    for rule in matched:
        if rule.reason not in reasons:
            reasons.append(rule.reason)
    return GateResult(decision, tuple(reasons), tuple(rule.id for rule in matched))


# --- the rendering in docs/gate.md ----------------------------------------------------------------
DOC_START = "<!-- gate-table:start (generated by `python -m intents.gate --write docs/gate.md`) -->"
DOC_END = "<!-- gate-table:end -->"


def render_markdown() -> str:
    """The rule table as Markdown, exactly as it appears between the markers in docs/gate.md."""
    lines = [
        "| # | rule | matches when | verdict | reason given |",
        "|---|---|---|---|---|",
    ]
    for number, rule in enumerate(RULES, start=1):
        cells = [str(number), f"`{rule.id}`", rule.when, f"**{rule.verdict}**", rule.reason]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    lines += [
        "",
        "Secret-looking material: " + "; ".join(name for name, _, _ in SECRET_PATTERNS) + ".",
        f"If no rule matches, the verdict is **{Verdict.REQUIRES_APPROVAL}**: {FALLBACK_REASON}",
        "",
        "Every action is judged as written and as the person reads it (each look-alike letter "
        "read as the letter it shows, a Latin letter's accents, strokes and hooks taken off, a small "
        "capital read as its letter, invisible characters dropped: a type `share password` written "
        "with two Cyrillic letters is `share password`, and `password: x` with a zero-width space "
        "inside, with accents on its letters or in small capitals is a password), and with a word "
        "spelled out letter by letter read whole (`p a s s w o r d: x` is a password too). The "
        "strictest verdict stands, "
        f"with the reason: {AS_SEEN_REASON}",
    ]
    return "\n".join(lines)


def splice_into(document: str) -> str:
    """The document with the text between the markers replaced by the current table."""
    head, start, rest = document.partition(DOC_START)
    _old, end, tail = rest.partition(DOC_END)
    if not start or not end:
        raise ValueError("the document has no gate-table markers")
    return f"{head}{DOC_START}\n{render_markdown()}\n{DOC_END}{tail}"


def table_in(document: str) -> str:
    """The text between the markers of a document (what `render_markdown()` must equal)."""
    _head, _start, rest = document.partition(DOC_START)
    table, _end, _tail = rest.partition(DOC_END)
    return table.strip("\n")


if __name__ == "__main__":  # pragma: no cover - a developer's tool
    if len(sys.argv) == 3 and sys.argv[1] == "--write":
        path = Path(sys.argv[2])
        path.write_text(splice_into(path.read_text()))
    else:
        print(render_markdown())
