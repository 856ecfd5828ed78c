"""Check 24: the gate's words, spelled around.

The gate denies an action whose type shares credentials or whose title or body carries
secret-looking material (`intents.gate`: `credentials`, `secret_material`). Both look for words,
and the person reads words, not code points: "password: hunter22" with a Cyrillic letter a, with a
zero-width space or a soft hyphen inside, or in full-width letters, reads as a password, and was
only asked about (`requires_approval`) instead of denied. A type "share password" written with
whole words of Cyrillic letters passes the door (each word is one script) and was an unknown type.

Each action now is judged as written and as the person reads it (`Action.as_seen`: hidden
characters dropped, look-alike letters read as the letters they show); the stricter verdict stands.
Through the real tool (`operator_record_action_intent`), every spelling below must end `blocked`
(or, for a type, be refused at the door); the controls show that the reading never loosens the gate
and does not deny what reads as no secret.
"""

from __future__ import annotations

import functools
import unicodedata

import pytest

from intents import gate
from intents.gate import CREDENTIAL_TYPES
from tests.fixtures import asgi_http
from tests.security.helpers import (
    IntentRecorder,
    Tally,
    look_alike_letters,
    whole_word_twin,
)

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

SCRIPTS = ("CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC", "LATIN")
HIDDEN = {
    "zero-width space": "\u200b",
    "soft hyphen": "\u00ad",
    "word joiner": "\u2060",
    "zero-width joiner": "\u200d",
    "invisible separator": "\u2063",
}
# (the word a pattern of the gate looks for, what follows it); each must be denied as written.
SECRETS = (
    ("password", ": hunter22"),
    ("passwd", "=hunter22"),
    ("passphrase", ": correct horse"),
    ("api_key", " = abcd1234efgh"),
    ("secret key", ": abcd1234"),
    ("access token", ": abcd1234"),
    ("client_secret", "=abcd1234"),
    ("AKIA", "IOSFODNN7EXAMPLE"),
    ("-----BEGIN RSA PRIVATE KEY-----", "\nMIIEowIBAAKCAQEA"),
    ("ghp_", "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6"),
    ("sk-", "proj1234567890abcdefghij"),
    ("xoxb-", "1234567890-abcdef"),
    ("opk_", "a1b2c3d4e5f6a1b2c3d4e5f6"),
)


# Greetings in Russian, Greek and Armenian: text of other scripts that reads as no secret.
GREETINGS = (
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043a\u0430\u043a \u0434\u0435\u043b\u0430?",
    "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5",
    "\u0532\u0561\u0580\u0565\u0582",
)


def respelled(word: str, script: str) -> str | None:
    """Each letter of `word` that `script` has a look-alike for, written with it (None: none)."""
    lower, upper = look_alike_letters(script), look_alike_letters(script, upper=True)
    out = "".join(lower.get(ch, upper.get(ch, ch)) for ch in word)
    return out if out != word else None


def spellings(word: str) -> list[tuple[str, str, str]]:
    """(how, the word so spelled, what it reads as): another script's letters, a hidden character
    inside, full width, and its Latin letters decorated (`decorated`: small capitals read in lower
    case, negative circled letters in upper case; the rest as `word`)."""
    found = [(f"{script.lower()} letters", s) for script in SCRIPTS if (s := respelled(word, script))]
    letters = [i for i, ch in enumerate(word) if ch.isalpha()]
    middle = letters[len(letters) // 2]
    found += [(name, word[:middle] + ch + word[middle:]) for name, ch in HIDDEN.items()]
    found.append(("full-width", "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in word)))
    return [(how, spelled, word) for how, spelled in found] + decorated(word)


# Combining marks put on each letter: they decorate the letter the person still reads.
MARKS = {"acute accents": "\u0301", "struck through": "\u0336", "a dot below and a tilde": "\u0323\u0303"}


@functools.cache
def _named_letters() -> dict[str, dict[str, str]]:
    """Letters found by their Unicode names (not by the operator's tables): for each ASCII letter,
    a decorated one Unicode does not take apart ("ᵽ", LATIN SMALL LETTER P WITH STROKE), a small
    capital ("ᴘ") and a negative circled capital ("🅟")."""
    out: dict[str, dict[str, str]] = {"decorated": {}, "small capital": {}, "negative circled": {}}
    blocks = ((0x00C0, 0x02B0), (0x1D00, 0x1DC0), (0xA720, 0xA800), (0x1F150, 0x1F16A))
    for code in (code for first, end in blocks for code in range(first, end)):
        ch = chr(code)
        name = unicodedata.name(ch, "")
        if unicodedata.normalize("NFKD", ch) != ch:
            continue  # taken apart by Unicode: the marks' case above
        for kind, prefix, case in (
            ("decorated", "LATIN SMALL LETTER ", str.lower),
            ("decorated", "LATIN CAPITAL LETTER ", str.upper),
            ("small capital", "LATIN LETTER SMALL CAPITAL ", str.lower),
            ("negative circled", "NEGATIVE CIRCLED LATIN CAPITAL LETTER ", str.upper),
        ):
            rest = name[len(prefix) :] if name.startswith(prefix) else ""
            if len(rest) == 1 or (kind == "decorated" and rest[1:].startswith(" WITH ")):
                out[kind].setdefault(case(rest[0]), ch)
    return out


def decorated(word: str) -> list[tuple[str, str, str]]:
    """(how, the word so spelled, the ASCII it reads as): combining marks on each letter, decorated
    letters, small capitals (lower case, as Unicode has them) and negative circled capitals."""
    found = [
        (how, "".join(ch + mark if ch.isalnum() else ch for ch in word), word) for how, mark in MARKS.items()
    ]
    named = _named_letters()
    cases = (("decorated", word), ("small capital", word.lower()), ("negative circled", word.upper()))
    for how, reads in cases:
        spelled = "".join(named[how].get(ch, ch) for ch in reads)
        if spelled != reads:
            found.append((f"{how} letters", spelled, reads))
    return found


def denied_as_written(body: str) -> bool:
    """Whether the gate denies an email to someone else with this body, as written."""
    action = gate.Action(type="email", title="t", recipient="bob@example.com", body=body)
    return gate._judge(action).decision == gate.Verdict.DENY


async def test_the_gate_denies_what_reads_as_a_secret_however_it_is_spelled(
    principals, scorecard, no_rate_limit
) -> None:
    agent = principals["full_agent"]
    tally = Tally()
    spelled_secrets = spelled_types = refused_at_door = 0
    async with asgi_http(agent.token) as http:
        record = IntentRecorder(http)

        # Controls: each secret as written is denied, in the body and in the title.
        for word, rest in SECRETS:
            body = await record(type="email", recipient="bob@example.com", body=f"Here: {word}{rest}")
            tally.expect(f"{word!r} as written, body (control)", body.get("status") == "blocked", body)
        # Secret material spelled around, in the body and in the title of an email to someone else.
        for word, rest in SECRETS:
            for how, spelled, reads in spellings(word):
                if reads != word and not denied_as_written(f"Here: {reads}{rest}"):
                    continue  # read in another case, it is no secret to the gate's patterns ("akia")
                for where in ("body", "title"):
                    text = f"Here: {spelled}{rest}"
                    text = text.replace("\n", " ") if where == "title" else text
                    body = await record(type="email", recipient="bob@example.com", **{where: text})
                    spelled_secrets += 1
                    tally.expect(f"{word!r} in {how}, {where}", body.get("status") == "blocked", body)
        # A credentials type written with whole words of another script's letters.
        for kind in sorted(CREDENTIAL_TYPES):
            words = kind.split("_")
            for script in SCRIPTS:
                twins = [whole_word_twin(w, script) or w for w in words]
                if twins == words:
                    continue
                body = await record(type=" ".join(twins), recipient="bob@example.com")
                at_door = body.get("error") == "invalid_arguments"
                spelled_types += 1
                refused_at_door += at_door
                ok = body.get("status") == "blocked" or at_door
                tally.expect(f"type {kind!r} in {script.lower()} words", ok, body)
            # The same type with its separators moved, dropped or doubled, and its letters spaced out.
            squeezed = kind.replace("_", "")
            middle = len(squeezed) // 2
            for spelled in (
                squeezed,
                f"{squeezed[:middle]}_{squeezed[middle:]}",
                kind.replace("_", " - "),
                " ".join(squeezed),
            ):
                body = await record(type=spelled, recipient="bob@example.com")
                spelled_types += 1
                tally.expect(f"type {kind!r} as {spelled!r}", body.get("status") == "blocked", body)
            # The same type with its Latin letters decorated (a type is read in lower case).
            for how, spelled, _ in decorated(kind.replace("_", " ")):
                body = await record(type=spelled, recipient="bob@example.com")
                at_door = body.get("error") == "invalid_arguments"
                spelled_types += 1
                refused_at_door += at_door
                ok = body.get("status") == "blocked" or at_door
                tally.expect(f"type {kind!r} in {how}", ok, body)
        # Controls: the reading never loosens the gate, and denies nothing that reads as no secret.
        for text in ("Buy milk, eggs and bread", "Call the dentist about Tuesday"):
            for how, spelled, _ in spellings(text.split()[1].rstrip(",")):
                body = await record(type="note", body=text.replace(text.split()[1].rstrip(","), spelled))
                tally.expect(f"a note with a word in {how} (control)", body.get("status") == "queued", body)
        for text in GREETINGS:
            body = await record(type="email", recipient="bob@example.com", body=text)
            tally.expect(
                f"{text!r} to someone else (control)", body.get("status") == "pending_approval", body
            )
        body = await record(type="reminder", recipient="m\u0435")  # "me" with a Cyrillic letter e
        never_self = body.get("status") == "pending_approval" or body.get("error") == "invalid_arguments"
        tally.expect("a recipient reading as 'me' is never the person (control)", never_self, body)

    scorecard(
        24,
        f"the gate's words spelled around: {spelled_secrets} spellings of {len(SECRETS)} secret shapes "
        "(another script's letters, 5 hidden characters inside, full width, combining marks on each "
        "letter, decorated letters, small capitals, negative circled capitals; in the body and in the "
        f"title) and {spelled_types} credential types in whole words of another script, in decorated "
        "letters or with their separators moved -> blocked "
        f"({refused_at_door} refused at the door instead); the shapes as written blocked, notes spelled so "
        "queued, other scripts' greetings asked about, a look-alike 'me' never the person (controls)",
        cases=tally.cases,
        bypasses=len(tally.problems),
        problems=tally.problems[:20],
    )
    assert tally.problems == []
