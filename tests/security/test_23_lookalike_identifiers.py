# ruff: noqa: E501  (the case tables read best one case per line)
"""Check 23 — look-alike identifiers: a new name that reads as another is refused at the door.

An attacker's probe (docs/security.md, 2026-12-07) added a belief keyed ``preferences.tone`` in
full-width letters next to the plain one: two beliefs the person cannot tell apart in the admin or a
notice. The class, through the real tools over POST /mcp (in-process):

- the door: every identifier field that makes a NEW name (action type, recipient, intent topic,
  directive topic, an added belief's key, a goal/priority/project title on add or rename, a task key)
  x every class of look-alike — full-width letters, mathematical alphanumerics (U+1D400 block), circled
  and parenthesised letters, superscripts and subscripts, ligatures, compatibility signs (Kelvin, micro,
  long s, Roman numerals, half-width kana), a combining accent left uncomposed, and one word mixing
  Latin with Cyrillic, Greek, Armenian or Cherokee letters, a Bengali or Devanagari digit or an
  ideograph → `invalid_arguments` naming the field and the character, nothing written; and whole
  look-alike names (the probe's keys, Cyrillic with Greek, Hebrew with Latin, Latin with kana);
- positive controls: plain ASCII, accented Latin in NFC, all-Cyrillic, all-Greek, Hebrew, Arabic,
  Persian digits, Devanagari, Thai, Korean, Japanese kanji with kana, digits, and words of two
  scripts separated by punctuation still pass the door (and are written where no evidence is needed);
- cleanup: names stored before the rule (written here through the same tools with the rule switched
  off) stay readable, updatable and retirable by exactly their stored name; an update naming the plain
  key lists the stored look-alike first among its candidates; a goal-model title that reads as another
  is ambiguous (refused with both candidates) rather than silently the plain one; a mute finds a
  notice title written in full-width letters;
- the shared script check (operator_site.wording) also closes a hole in the evidence rules: "not"
  written with a Bengali zero hid a negation.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from django.utils import timezone

from beliefs import services as beliefs_services
from beliefs.models import Belief
from goals.models import Goal, Priority, Project, Task
from intents import directives
from intents.models import Directive, Intent
from operator_site import display
from operator_site.models import AuditEvent
from tests.fixtures import asgi_http, orm
from tests.security.helpers import (
    Tally,
    envelope_of,
    message_of,
    post,
    tools_call,
    whole_word_twin,
)

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

# (class, text put inside a Latin word, the character the refusal must name). Written as escapes: the
# point of each is that it reads as a plain letter.
LOOK_ALIKES: list[tuple[str, str, str]] = [
    ("full-width letter", "\uff4f", "\uff4f"),
    ("full-width run", "\uff4e\uff4f\uff54", "\uff4e"),
    ("full-width capital", "\uff2f", "\uff2f"),
    ("full-width digit", "\uff11", "\uff11"),
    ("mathematical bold", "\U0001d428", "\U0001d428"),
    ("mathematical italic", "\U0001d45c", "\U0001d45c"),
    ("mathematical bold script", "\U0001d4f8", "\U0001d4f8"),
    ("mathematical fraktur", "\U0001d52c", "\U0001d52c"),
    ("mathematical double-struck", "\U0001d560", "\U0001d560"),
    ("mathematical sans-serif", "\U0001d5c8", "\U0001d5c8"),
    ("mathematical monospace", "\U0001d698", "\U0001d698"),
    ("mathematical bold capital", "\U0001d400", "\U0001d400"),
    ("mathematical digit", "\U0001d7ce", "\U0001d7ce"),
    ("circled letter", "\u24de", "\u24de"),
    ("parenthesised letter", "\u24aa", "\u24aa"),
    ("superscript letter", "\u1d52", "\u1d52"),
    ("superscript n", "\u207f", "\u207f"),
    ("superscript digit", "\u00b2", "\u00b2"),
    ("subscript letter", "\u2092", "\u2092"),
    ("ligature fi", "\ufb01", "\ufb01"),
    ("ligature ff", "\ufb00", "\ufb00"),
    ("ligature st", "\ufb06", "\ufb06"),
    ("ligature ij", "\u0133", "\u0133"),
    ("Kelvin sign", "\u212a", "\u212a"),
    ("micro sign", "\u00b5", "\u00b5"),
    ("long s", "\u017f", "\u017f"),
    ("small Roman numeral", "\u2170", "\u2170"),
    ("half-width katakana", "\uff71", "\uff71"),
    ("uncomposed accent", "e\u0301", "\u0301"),
    ("Cyrillic o", "\u043e", "\u043e"),
    ("Cyrillic a", "\u0430", "\u0430"),
    ("Cyrillic i", "\u0456", "\u0456"),
    ("Cyrillic es", "\u0441", "\u0441"),
    ("Greek omicron", "\u03bf", "\u03bf"),
    ("Greek nu", "\u03bd", "\u03bd"),
    ("Greek capital alpha", "\u0391", "\u0391"),
    ("Armenian oh", "\u0585", "\u0585"),
    ("Cherokee a", "\u13aa", "\u13aa"),
    ("Bengali zero", "\u09e6", "\u09e6"),
    ("Devanagari zero", "\u0966", "\u0966"),
    ("ideographic zero", "\u3007", "\u3007"),
    ("ideograph like l", "\u4e28", "\u4e28"),
    ("squared unit", "\u33a1", "\u33a1"),  # ㎡ reads as "m2" in one cell
    ("parenthesised digit", "\u2474", "\u2474"),
    ("account-of sign", "\u2100", "\u2100"),  # a/c in one character
    ("raised ideograph", "\u3192", "\u3192"),  # a kanbun mark: 一 raised
    ("full-width exclamation in a type", "\uff01", "\uff01"),
]

# The typographic signs a title may hold (the person's own writing: "m²", "25 µg", "Acme™", "…"). In every
# other new name they are refused like any character NFKC changes: a title is words a person reads, a type,
# a key, a topic or a recipient is matched by rules.
TITLE_SIGNS = {"superscript digit", "micro sign", "full-width exclamation in a type"}


TITLE_FIELDS = {"title", "changes.0.fields.title", "changes.0.fields.name"}


def _door_fields() -> list[tuple[str, str, Any]]:
    """(tool, the field the refusal must name, arguments around the text `x` put inside a word)."""
    return [
        (
            "operator_record_action_intent",
            "action.type",
            lambda x: {"action": {"type": f"spe{x}nd", "title": "t"}},
        ),
        (
            "operator_record_action_intent",
            "action.recipient",
            lambda x: {"action": {"type": "email", "title": "t", "recipient": f"jo{x}hn@example.com"}},
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
            lambda x: {
                "changes": [{"op": "add", "kind": "preference", "key": f"preferences.t{x}ne", "value": "v"}]
            },
        ),
        ("operator_apply_goal_change", "title", lambda x: {"action": "add", "title": f"Run a mara{x}thon"}),
        (
            "operator_reconcile_goal_model",
            "changes.0.fields.title",
            lambda x: {"changes": [{"entity": "project", "op": "add", "fields": {"title": f"Sh{x}ed"}}]},
        ),
        (
            "operator_reconcile_goal_model",
            "changes.0.fields.name",
            lambda x: {
                "changes": [{"entity": "priority", "op": "add", "fields": {"name": f"Hea{x}lth first"}}]
            },
        ),
        (
            "operator_reconcile_goal_model",
            "changes.0.fields.title",
            lambda x: {
                "changes": [
                    {"entity": "goal", "op": "update", "target": 1, "fields": {"title": f"Lea{x}rn Italian"}}
                ]
            },
        ),
        ("operator_update_task", "key", lambda x: {"key": f"renew{x}passport", "patch": {"title": "t"}}),
    ]


# Whole names that read as another: (value, the character the refusal must name).
WHOLE_NAMES: list[tuple[str, str]] = [
    (
        "\uff50\uff52\uff45\uff46\uff45\uff52\uff45\uff4e\uff43\uff45\uff53.\uff54\uff4f\uff4e\uff45",
        "\uff50",
    ),  # the probe's key
    ("preferences.\uff54one", "\uff54"),  # mixed, as the probe tried too
    ("preferences.t\u043ene", "\u043e"),  # a Cyrillic o
    ("preferences.\u03c4one", "\u03c4"),  # a Greek tau
    ("\u043c\u043e\u03c3\u043a\u0432\u0430", "\u03c3"),  # Cyrillic with a Greek sigma
    ("\u03b1\u03b8\u03b7\u03bd\u0430", "\u0430"),  # Greek with a Cyrillic a
    ("\u05e9\u05dc\u05d5\u05ddx", "x"),  # Hebrew with a Latin letter
    ("T\u30b7\u30e3\u30c4", "T"),  # Latin with kana in one word
    ("\U0001d42d\U0001d428\U0001d427\U0001d41e", "\U0001d42d"),  # all mathematical bold
    ("\u24e3\u24de\u24dd\u24d4", "\u24e3"),  # all circled
]

# Names that must pass the door: one script per word, plain form.
PLAIN: list[str] = [
    "preferences.tone",
    "home_city_2027",
    "caf\u00e9",  # NFC
    "d\u00e9j\u00e0 vu",
    "stra\u00dfe",
    "\u0130stanbul",
    "\u043c\u043e\u0441\u043a\u0432\u0430",  # all Cyrillic
    "\u041c\u043e\u0441\u043a\u0432\u04302027",  # Cyrillic and digits
    "\u03b1\u03b8\u03ae\u03bd\u03b1",  # all Greek, with a precomposed accent
    "\u05e9\u05dc\u05d5\u05dd",  # Hebrew
    "\u0627\u0644\u0642\u0627\u0647\u0631\u0629",  # Arabic
    "\u062a\u0647\u0631\u0627\u0646\u06f1\u06f4\u06f0\u06f2",  # Persian, with its own digits
    "\u0661\u0662\u0663",  # Arabic-Indic digits
    "\u0928\u092e\u0938\u094d\u0924\u0947",  # Devanagari, with its vowel signs
    "\u0e01\u0e23\u0e38\u0e07\u0e40\u0e17\u0e1e",  # Thai
    "\uc11c\uc6b8",  # Korean
    "\u5927\u97d3\ubbfc\uad6d",  # Korean, Han with Hangul
    "\u98df\u3079\u7269",  # Japanese: kanji with hiragana
    "\u30b3\u30fc\u30d2\u30fc",  # katakana with the prolonged sound mark
    "\u6771\u4eac\u30bf\u30ef\u30fc",  # kanji with katakana
    "T-\u30b7\u30e3\u30c4",  # a Latin word and a kana word
    "paris.\u043c\u043e\u0441\u043a\u0432\u0430",  # two words, two scripts
    "2027",
]


def _written_state() -> tuple:
    return (
        Intent.objects.count(),
        Directive.objects.count(),
        sorted(Belief.objects.values_list("kind", "key", "status")),
        Goal.objects.count(),
        Priority.objects.count(),
        Project.objects.count(),
        Task.objects.count(),
        AuditEvent.objects.exclude(error_code="invalid_arguments").count(),
    )


def _refused_naming(body: dict[str, Any], is_error: bool, field: str, ch: str) -> bool:
    named = [f for f in body.get("fields", []) if f["field"] == field]
    return (
        body.get("error") == "invalid_arguments"
        and bool(named)
        and f"U+{ord(ch):04X}" in named[0]["message"]
        and is_error
    )


async def _call(http: Any, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    return envelope_of(message_of(await post(http, tools_call(tool, arguments))))


async def test_new_names_that_read_as_another_are_refused_at_the_door(
    principals, scorecard, no_rate_limit
) -> None:
    agent = principals["full_agent"]
    passed: list[str] = []
    cases = 0
    before = await orm(_written_state)
    async with asgi_http(agent.token) as http:
        for tool, field, build in _door_fields():
            for name, text, culprit in LOOK_ALIKES:
                if field in TITLE_FIELDS and name in TITLE_SIGNS:
                    continue  # allowed in a title: test_titles_may_hold_the_typographic_signs_of_writing
                cases += 1
                body, is_error = await _call(http, tool, build(text))
                if not _refused_naming(body, is_error, field, culprit):
                    passed.append(
                        f"{tool} {field} {name}: {body.get('error')} {body.get('fields') or body.get('reason')}"
                    )
        for value, culprit in WHOLE_NAMES:
            for tool, field, arguments in (
                (
                    "operator_update_world_model",
                    "changes.0.key",
                    {"changes": [{"op": "add", "kind": "note", "key": value, "value": "v"}]},
                ),
                (
                    "operator_reconcile_goal_model",
                    "changes.0.fields.title",
                    {"changes": [{"entity": "project", "op": "add", "fields": {"title": value}}]},
                ),
                ("operator_set_directive", "topic", {"kind": "focus", "topic": value}),
                (
                    "operator_record_action_intent",
                    "action.recipient",
                    {"action": {"type": "email", "title": "t", "recipient": value}},
                ),
            ):
                cases += 1
                body, is_error = await _call(http, tool, arguments)
                if not _refused_naming(body, is_error, field, culprit):
                    passed.append(
                        f"{tool} {field} {value!r}: {body.get('error')} {body.get('fields') or body.get('reason')}"
                    )
    after = await orm(_written_state)
    scorecard(
        23,
        f"the door: {len(_door_fields())} new-name fields x {len(LOOK_ALIKES)} look-alike classes (titles: {len(LOOK_ALIKES) - len(TITLE_SIGNS)}), and {len(WHOLE_NAMES)} whole look-alike names x 4 fields → invalid_arguments naming field and character",
        cases=cases,
        bypasses=len(passed) + int(after != before),
        passed=passed[:20],
    )
    assert passed == [] and after == before


async def test_plain_names_of_every_script_still_pass(principals, scorecard, no_rate_limit) -> None:
    """Positive controls: written where no evidence is needed (a note's key, a project's title and
    rename, a directive's topic, an intent's type, recipient and topic); a goal's or priority's (high
    stakes) passes the door and is refused only for want of the person's words."""
    agent = principals["full_agent"]
    refused: list[str] = []
    cases = 0
    async with asgi_http(agent.token) as http:
        body, _ = await _call(
            http,
            "operator_reconcile_goal_model",
            {"changes": [{"entity": "project", "op": "add", "fields": {"title": "Renamed below"}}]},
        )
        assert body.get("ok") is True, body
        project_id = await orm(lambda: Project.objects.get(title="Renamed below").pk)
        for i, name in enumerate(PLAIN):
            written = [
                (
                    "operator_update_world_model",
                    {"changes": [{"op": "add", "kind": "note", "key": name, "value": "v"}]},
                ),
                (
                    "operator_reconcile_goal_model",
                    {"changes": [{"entity": "project", "op": "add", "fields": {"title": name}}]},
                ),
                (
                    "operator_reconcile_goal_model",
                    {
                        "changes": [
                            {
                                "entity": "project",
                                "op": "update",
                                "target": project_id,
                                "fields": {"title": name},
                            }
                        ]
                    },
                ),
                ("operator_set_directive", {"kind": "topic_mute", "topic": name}),
                (
                    "operator_record_action_intent",
                    {"action": {"type": name[:64], "title": f"t{i}", "recipient": name, "topic": name}},
                ),
            ]
            for tool, arguments in written:
                cases += 1
                body, _ = await _call(http, tool, arguments)
                if body.get("ok") is False or "error" in body:
                    refused.append(
                        f"{tool} {name!r}: {body.get('error')} {body.get('fields') or body.get('reason')}"
                    )
            for tool, arguments in (
                ("operator_apply_goal_change", {"action": "add", "title": name}),
                (
                    "operator_reconcile_goal_model",
                    {"changes": [{"entity": "priority", "op": "add", "fields": {"name": name}}]},
                ),
            ):
                cases += 1
                body, _ = await _call(http, tool, arguments)
                if body.get("error") == "invalid_arguments" or body.get("ok") is not False:
                    refused.append(
                        f"{tool} {name!r}: {body.get('error')} {body.get('fields') or body.get('reason')}"
                    )
        cases += 1
        body, _ = await _call(
            http, "operator_update_task", {"key": "renew-passport-2027", "patch": {"title": "Renew passport"}}
        )
        if body.get("ok") is not True:
            refused.append(f"task key: {body}")
    stored = await orm(lambda: set(Belief.objects.filter(kind="note").values_list("key", flat=True)))
    missing = [n for n in PLAIN if beliefs_services.normalise_key(n) not in stored]
    scorecard(
        23,
        f"positive controls: {len(PLAIN)} plain names of every script x 7 new-name fields, and a task key → pass the door, written as given",
        cases=cases + len(PLAIN),
        bypasses=len(refused) + len(missing),
        refused=refused[:20],
        missing=missing,
    )
    assert refused == [] and missing == []


# Titles as people write them, each holding a typographic sign NFKC spells out (written as escapes).
SIGNED_TITLES: list[str] = [
    "Run a \u00bd marathon",  # ½
    "\u00be of the way",  # ¾
    "Read \u2153 of the book",  # ⅓
    "Tile 30 m\u00b2 of floor",  # m²
    "Cut CO\u2082 by half",  # CO₂
    "x\u207a and (y)\u207d\u00b3\u207e",  # raised plus, brackets and three
    "Launch Acme\u2122",  # ™
    "Acme\u2120 services",  # ℠
    "Think it over\u2026",  # …
    "Done\u203c",  # ‼
    "Don\u00b4t stop",  # the spacing acute accent typed for an apostrophe
    "\u4e70\u623f\uff08\u9996\u4ed8\uff09\uff0c\u660e\u5e74",  # Chinese, full-width brackets and comma
    "\u76ee\u6a19\uff1a\u5065\u5eb7\uff01",  # Japanese, full-width colon and exclamation mark
    "\u4e3a\u4ec0\u4e48\uff1f",  # full-width question mark
    "9\uff5e5",  # full-width tilde
    "\u041a\u0432\u0430\u0440\u0442\u0438\u0440\u0430 \u21165",  # Russian, №
    "1\u00ba de mayo",  # º
    "2\u00aa semana",  # ª
    "Vitamin D 25 \u00b5g",  # µ
    "Keep it at 21 \u2103",  # ℃
    "Bake at 350 \u2109",  # ℉
]


async def test_titles_may_hold_the_typographic_signs_of_writing(principals, scorecard, no_rate_limit) -> None:
    """A goal's, priority's or project's title is words a person reads: "m²", "25 µg", "Acme™", "…"
    and CJK full-width punctuation pass the door there (a project is written exactly as given; a goal
    or priority is refused only for want of the person's words). The same sign in a type, key, topic
    or recipient is still refused, and a title spelled out ("AcmeTM") still reads as the signed one
    (naming either is ambiguous)."""
    agent = principals["full_agent"]
    tally = Tally()
    expect = tally.expect

    def project(op: str, title: str, target: Any = None) -> dict[str, Any]:
        change: dict[str, Any] = {"entity": "project", "op": op, "fields": {"title": title}}
        if target is not None:
            change["target"] = target
        return {"changes": [change]}

    async with asgi_http(agent.token) as http:
        for i, title in enumerate(SIGNED_TITLES):
            body, _ = await _call(http, "operator_reconcile_goal_model", project("add", title))
            expect(f"project {title!r} added", body.get("ok") is True, body)
            stored = await orm(
                lambda t=title: list(Project.objects.filter(title=t).values_list("pk", flat=True))
            )
            expect(f"project {title!r} stored as given", len(stored) == 1, stored)
            if stored:
                body, _ = await _call(
                    http, "operator_reconcile_goal_model", project("update", f"{title} {i}", stored[0])
                )
                expect(f"project renamed {title!r}", body.get("ok") is True, body)
            for tool, arguments in (
                ("operator_apply_goal_change", {"action": "add", "title": title}),
                (
                    "operator_reconcile_goal_model",
                    {"changes": [{"entity": "priority", "op": "add", "fields": {"name": title}}]},
                ),
            ):
                body, _ = await _call(http, tool, arguments)
                expect(
                    f"{tool} {title!r} past the door",
                    body.get("error") != "invalid_arguments" and body.get("ok") is False,
                    body,
                )
        # The same signs in names that rules match: still refused, naming the sign.
        for sign in ("\u00b2", "\u00bd", "\u2122", "\u2026", "\uff08", "\u00b5", "\u2116", "\u00ba"):
            for tool, field, arguments in (
                (
                    "operator_record_action_intent",
                    "action.type",
                    {"action": {"type": f"tile{sign}", "title": "t"}},
                ),
                (
                    "operator_update_world_model",
                    "changes.0.key",
                    {"changes": [{"op": "add", "kind": "note", "key": f"floor{sign}", "value": "v"}]},
                ),
                ("operator_set_directive", "topic", {"kind": "topic_mute", "topic": f"news{sign}"}),
                (
                    "operator_update_task",
                    "key",
                    {"key": f"tile{sign}", "patch": {"title": "t"}},
                ),
            ):
                body, is_error = await _call(http, tool, arguments)
                expect(
                    f"{tool} {field} U+{ord(sign):04X}", _refused_naming(body, is_error, field, sign), body
                )
        # A title spelled out reads as the signed one: naming either is ambiguous.
        for signed, spelled in (("Acme\u2122 launch", "AcmeTM launch"), ("Think\u2026", "Think...")):
            for title in (signed, spelled):
                body, _ = await _call(http, "operator_reconcile_goal_model", project("add", title))
                assert body.get("ok") is True, body
            for named in (signed, spelled):
                change = {"entity": "project", "op": "update", "target": named, "fields": {"detail": "d"}}
                body, _ = await _call(http, "operator_reconcile_goal_model", {"changes": [change]})
                expect(f"{named!r} ambiguous", body.get("error") == "ambiguous_target", body)
    scorecard(
        23,
        f"typographic signs in titles: {len(SIGNED_TITLES)} titles x project add and rename, goal and priority add → past the door; 8 signs x type, key, topic, task key → refused; 2 spelled-out twins → ambiguous_target",
        cases=tally.cases,
        bypasses=len(tally.problems),
        problems=tally.problems[:20],
    )
    assert tally.problems == []


FULL_WIDTH_KEY = "\uff50\uff52\uff45\uff46\uff45\uff52\uff45\uff4e\uff43\uff45\uff53.\uff54\uff4f\uff4e\uff45"
CYRILLIC_O_KEY = "preferences.t\u043ene"
FULL_WIDTH_SHED = "\uff33\uff48\uff45\uff44"
FULL_WIDTH_TOPIC = "\uff4e\uff45\uff57\uff53\uff4c\uff45\uff54\uff54\uff45\uff52\uff53"


async def test_names_stored_before_the_rule_can_be_read_updated_and_retired(
    principals, scorecard, monkeypatch, no_rate_limit
) -> None:
    """Rows holding a look-alike name, written before the door refused them (here: through the same
    tools with the rule switched off), must stay reachable by exactly their stored name so that an
    agent or the person can clean them up; the plain name finds them as candidates, and in the goal
    model naming either where both exist is ambiguous, never silently one of them."""
    agent = principals["full_agent"]
    tally = Tally()
    expect, problems = tally.expect, tally.problems

    async with asgi_http(agent.token) as http:
        with monkeypatch.context() as before_the_rule:
            before_the_rule.setattr(
                display, "identifier_problem", functools.partial(display.identifier_problem, target=True)
            )
            # ... nor a key that reads as a stored one (beliefs.services, looks_like_existing) ...
            before_the_rule.setattr(beliefs_services, "_refuse_lookalikes", lambda adds, stored: None)
            # ... and a topic stored as it was given (lower-cased), as before NFKC was part of it.
            before_the_rule.setattr(
                directives, "normalise_topic", lambda t: " ".join((t or "").split()).lower()
            )
            for key, value in ((FULL_WIDTH_KEY, "formal"), (CYRILLIC_O_KEY, "casual")):
                body, _ = await _call(
                    http,
                    "operator_update_world_model",
                    {"changes": [{"op": "add", "kind": "preference", "key": key, "value": value}]},
                )
                assert body.get("ok") is True, body
            body, _ = await _call(
                http,
                "operator_reconcile_goal_model",
                {"changes": [{"entity": "project", "op": "add", "fields": {"title": FULL_WIDTH_SHED}}]},
            )
            assert body.get("ok") is True, body
            body, _ = await _call(
                http,
                "operator_set_directive",
                {"kind": "topic_mute", "topic": FULL_WIDTH_TOPIC, "minutes": 30},
            )
            assert body.get("ok") is True, body
            directive_id = body["directive"]["id"]

        # Read: the stored keys, exactly.
        body, _ = await _call(http, "operator_user_world_model", {"kind": "preference"})
        keys = {b["key"] for b in body.get("beliefs", {}).get("preference", [])}
        expect("read both stored keys", {FULL_WIDTH_KEY, CYRILLIC_O_KEY} <= keys, body)

        # An add is a new name, even of a key that exists: refused at the door.
        body, is_error = await _call(
            http,
            "operator_update_world_model",
            {"changes": [{"op": "add", "kind": "preference", "key": FULL_WIDTH_KEY, "value": "x"}]},
        )
        expect(
            "add of the stored look-alike refused",
            _refused_naming(body, is_error, "changes.0.key", "\uff50"),
            body,
        )

        # Update by exactly the stored key.
        body, _ = await _call(
            http,
            "operator_update_world_model",
            {"changes": [{"op": "update", "kind": "preference", "key": FULL_WIDTH_KEY, "value": "warm"}]},
        )
        expect("update by the stored full-width key", body.get("ok") is True, body)
        body, _ = await _call(
            http,
            "operator_update_world_model",
            {"changes": [{"op": "update", "kind": "preference", "key": CYRILLIC_O_KEY, "confidence": 0.5}]},
        )
        expect("update by the stored mixed-script key", body.get("ok") is True, body)

        # The plain key is not there: the refusal names both look-alikes first.
        body, _ = await _call(
            http,
            "operator_update_world_model",
            {"changes": [{"op": "update", "kind": "preference", "key": "preferences.tone", "value": "x"}]},
        )
        expect(
            "an update of the plain key lists the stored look-alikes first",
            body.get("error") == "belief_not_found"
            and set((body.get("candidates") or [])[:2]) == {FULL_WIDTH_KEY, CYRILLIC_O_KEY},
            body,
        )

        # The plain key is a new name that reads as both stored ones: refused while they are active.
        body, _ = await _call(
            http,
            "operator_update_world_model",
            {"changes": [{"op": "add", "kind": "preference", "key": "preferences.tone", "value": "x"}]},
        )
        expect(
            "the plain key refused next to its stored look-alikes",
            body.get("error") == "looks_like_existing"
            and body.get("existing") in {f"preference/{FULL_WIDTH_KEY}", f"preference/{CYRILLIC_O_KEY}"},
            body,
        )

        # Retire both by exactly the stored key; then the plain key can be added.
        for key in (FULL_WIDTH_KEY, CYRILLIC_O_KEY):
            body, _ = await _call(
                http,
                "operator_update_world_model",
                {"changes": [{"op": "retire", "kind": "preference", "key": key}]},
            )
            expect(f"retire {key!r} by its stored key", body.get("ok") is True, body)
        body, _ = await _call(
            http,
            "operator_update_world_model",
            {"changes": [{"op": "add", "kind": "preference", "key": "preferences.tone", "value": "warm"}]},
        )
        expect("the plain key added after the cleanup", body.get("ok") is True, body)
        statuses = await orm(
            lambda: dict(Belief.objects.filter(kind="preference").values_list("key", "status"))
        )
        expect(
            "the look-alikes retired, the plain key active",
            statuses == {FULL_WIDTH_KEY: "retired", CYRILLIC_O_KEY: "retired", "preferences.tone": "active"},
            statuses,
        )

        # The goal model: the stored title is a target (hidden characters alone are refused there).
        body, _ = await _call(
            http,
            "operator_reconcile_goal_model",
            {
                "changes": [
                    {
                        "entity": "project",
                        "op": "update",
                        "target": FULL_WIDTH_SHED,
                        "fields": {"detail": "behind the house"},
                    }
                ]
            },
        )
        expect("update a project by its stored full-width title", body.get("ok") is True, body)
        body, _ = await _call(
            http,
            "operator_update_task",
            {"key": "build-shed", "patch": {"title": "Build the shed"}, "project": FULL_WIDTH_SHED},
        )
        expect(
            "link a task by the stored full-width title",
            body.get("ok") is True and body["task"]["project"] is not None,
            body,
        )
        old_id = await orm(lambda: Project.objects.get(title=FULL_WIDTH_SHED).pk)
        body, _ = await _call(
            http,
            "operator_reconcile_goal_model",
            {"changes": [{"entity": "project", "op": "add", "fields": {"title": "Shed"}}]},
        )
        assert body.get("ok") is True, body
        for target in ("Shed", FULL_WIDTH_SHED):
            body, _ = await _call(
                http,
                "operator_reconcile_goal_model",
                {
                    "changes": [
                        {"entity": "project", "op": "update", "target": target, "fields": {"detail": "x"}}
                    ]
                },
            )
            candidates = [c["id"] for r in body.get("resolution", []) for c in r.get("candidates", [])]
            expect(
                f"{target!r} where both exist is ambiguous",
                body.get("error") == "ambiguous_target" and old_id in candidates and len(candidates) == 2,
                body,
            )
            body, _ = await _call(http, "operator_update_task", {"key": "build-shed", "project": target})
            expect(
                f"a task link to {target!r} where both exist is ambiguous",
                body.get("error") == "ambiguous_target",
                body,
            )
        body, _ = await _call(
            http,
            "operator_reconcile_goal_model",
            {
                "changes": [
                    {"entity": "project", "op": "update", "target": old_id, "fields": {"title": "Old shed"}}
                ]
            },
        )
        expect("rename the look-alike by id to a plain title", body.get("ok") is True, body)
        body, _ = await _call(
            http,
            "operator_reconcile_goal_model",
            {
                "changes": [
                    {"entity": "project", "op": "update", "target": "Shed", "fields": {"detail": "new"}}
                ]
            },
        )
        expect("the plain title resolves once the look-alike is renamed", body.get("ok") is True, body)

        # A directive's stored topic: listed as stored, cleared by id.
        body, _ = await _call(http, "operator_list_directives", {})
        expect(
            "the stored topic is listed",
            FULL_WIDTH_TOPIC in [d["topic"] for d in body.get("directives", [])],
            body,
        )
        body, _ = await _call(http, "operator_clear_directive", {"id": directive_id})
        expect(
            "clear the look-alike directive by id", body.get("ok") is True and body.get("count") == 1, body
        )

        # A mute on the plain topic finds a notice whose (free-text) title is written in full-width letters.
        body, _ = await _call(
            http, "operator_set_directive", {"kind": "topic_mute", "topic": "newsletters", "minutes": 30}
        )
        assert body.get("ok") is True, body
        reason = await orm(
            lambda: directives.hold_reason(topic="", title=f"{FULL_WIDTH_TOPIC} digest", now=timezone.now())
        )
        expect("a mute holds a full-width title", reason is not None, reason)
    scorecard(
        23,
        "cleanup: keys, titles and topics stored before the rule → read, updated, retired, renamed and cleared by their stored name or id; the plain name finds them as candidates or ambiguous",
        cases=tally.cases,
        bypasses=len(problems),
        problems=problems,
    )
    assert problems == []


async def test_the_shared_script_check_reads_a_negation_written_with_a_look_alike_digit(
    principals, scorecard
) -> None:
    """The evidence rules and the door decide "a word mixing scripts" in one place: "not" written
    with a Bengali zero (or an ideographic zero) for its "o" hid the negation from the rules."""
    owner, agent = principals["owner"], principals["full_agent"]
    cases: list[tuple[str, str]] = [
        ("Do n\u09e6t share my address.", "share my address"),
        ("Do n\u3007t share my address.", "share my address"),
        ("D\u03bf not share my address.", "share my address"),
    ]
    passed: list[str] = []
    async with asgi_http(agent.token) as http:
        for said, value in cases:
            await orm(
                lambda said=said: beliefs_services.record_instruction(
                    principal=owner.principal, text=said, channel="chat"
                )
            )
            body, _ = await _call(
                http,
                "operator_update_world_model",
                {
                    "changes": [
                        {"op": "add", "kind": "behavior_policy", "key": "share_address", "value": value}
                    ],
                    "confirmedInConversation": True,
                    "confirmationQuote": said,
                },
            )
            if body.get("error") != "confirmation_unreadable":
                passed.append(f"{said!r}: {body.get('error') or 'WRITTEN'}")
    scorecard(
        23,
        f"evidence: {len(cases)} negations written with a look-alike digit or letter → confirmation_unreadable",
        cases=len(cases),
        bypasses=len(passed),
        passed=passed,
    )
    assert passed == []


# --- names that read as a stored one (2026-12-07, the thirteenth sitting) ----------------------------------
# What the door lets through: a whole word in one other script ("payday" in six Cyrillic letters is
# one script), and a plain name beside a look-alike stored before the rule. Each is caught where a
# name must pick out one thing (operator_site.lookalikes): a belief's key on add, a title named as a
# target. The words are built from the fold's own table, per script, from the letters each script has
# that read as a Latin one; a word is used for a script only when every letter has one.
WORDS = (
    *("payday", "scope", "apple", "eye", "copy", "cocoa", "soap", "pesos", "hope", "yes", "ace", "sea"),
    *("pop", "papa", "ivy", "pray", "via", "hug", "now", "fog", "who", "own", "civics", "crop", "coop"),
)
SCRIPTS = ("CYRILLIC", "GREEK", "ARMENIAN", "LATIN", "CHEROKEE", "COPTIC", "GEORGIAN")


def _whole_word_twins() -> list[tuple[str, str, str]]:
    """(script, plain word, the word written wholly in that script's look-alike letters)."""
    # Lower case: keys are stored lower-cased.
    return [(s, word, twin) for s in SCRIPTS for word in WORDS if (twin := whole_word_twin(word, s))]


async def test_names_that_read_as_a_stored_one_are_refused_or_ambiguous(
    principals, scorecard, monkeypatch
) -> None:
    agent = principals["full_agent"]
    twins = _whole_word_twins()
    tally = Tally()
    expect, problems = tally.expect, tally.problems

    def add(kind: str, *keys: str) -> dict[str, Any]:
        return {"changes": [{"op": "add", "kind": kind, "key": key, "value": "v"} for key in keys]}

    async with asgi_http(agent.token) as http:
        # The plain words, stored as notes.
        body, _ = await _call(http, "operator_update_world_model", add("note", *WORDS))
        assert body.get("ok") is True, body
        for script, word, twin in twins:
            body, _ = await _call(http, "operator_update_world_model", add("note", twin))
            expect(
                f"{script} {word!r} beside the stored key",
                body.get("error") == "looks_like_existing" and body.get("existing") == f"note/{word}",
                body,
            )
            # Two words of a key, one of them the twin: each word is one script, past the door.
            body, _ = await _call(
                http, "operator_update_world_model", add("risk", f"{word} day", f"{twin} day")
            )
            expect(
                f"{script} {word!r} twin in the same call", body.get("error") == "looks_like_existing", body
            )
            # Control: the twin in another kind, where nothing reads the same, is written.
            body, _ = await _call(
                http, "operator_update_world_model", add("project", f"{twin} {script.lower()}")
            )
            expect(f"{script} {word!r} twin alone in its kind (control)", body.get("ok") is True, body)

        # A plain key beside a look-alike stored before the rule (written with the rule off).
        with monkeypatch.context() as before_the_rule:
            before_the_rule.setattr(beliefs_services, "_refuse_lookalikes", lambda adds, stored: None)
            before_the_rule.setattr(
                display, "identifier_problem", functools.partial(display.identifier_problem, target=True)
            )
            stored = [
                "\u0435mployer",
                "\uff48\uff4f\uff4d\uff45 city",
                "ti\u0441ket",
            ]  # Cyrillic e, full-width, Cyrillic es
            body, _ = await _call(http, "operator_update_world_model", add("preference", *stored))
            assert body.get("ok") is True, body
        for old, plain in zip(stored, ("employer", "home city", "ticket"), strict=True):
            body, _ = await _call(http, "operator_update_world_model", add("preference", plain))
            expect(
                f"plain {plain!r} beside the stored {old!r}",
                body.get("error") == "looks_like_existing" and body.get("existing") == f"preference/{old}",
                body,
            )

        # A project titled with a twin: naming either title is ambiguous (the agent must name one by id).
        one_per_script = {script: (script, word, twin) for script, word, twin in twins}
        for script, word, twin in one_per_script.values():
            for title in (f"{word} plan", f"{twin} plan"):
                body, _ = await _call(
                    http,
                    "operator_reconcile_goal_model",
                    {"changes": [{"entity": "project", "op": "add", "fields": {"title": title}}]},
                )
                assert body.get("ok") is True, body
            for named in (f"{word} plan", f"{twin} plan"):
                body, _ = await _call(
                    http,
                    "operator_reconcile_goal_model",
                    {
                        "changes": [
                            {"entity": "project", "op": "update", "target": named, "fields": {"detail": "d"}}
                        ]
                    },
                )
                expect(f"{script} project {named!r} ambiguous", body.get("error") == "ambiguous_target", body)

    stored_notes = await orm(lambda: sorted(Belief.objects.filter(kind="note").values_list("key", flat=True)))
    expect("no twin written among the notes", stored_notes == sorted(WORDS), stored_notes)
    scorecard(
        23,
        f"reads as a stored name: {len(twins)} whole words in one other script ({', '.join(sorted({s for s, _, _ in twins}))}) beside a stored key, in one call, and as twin project titles; 3 plain keys beside pre-rule look-alikes → looks_like_existing or ambiguous_target; a twin alone in its kind written (control)",
        cases=tally.cases,
        bypasses=len(problems),
        problems=problems[:20],
    )
    assert problems == []


async def test_an_agents_revert_brings_back_no_key_beside_one_that_reads_the_same(
    principals, make_principal, scorecard, no_rate_limit
) -> None:
    """A version may hold a key that had no twin when it was written: agent A retires "payday",
    agent B then adds "payday" in Cyrillic letters (no active twin then), and A's undo of its
    retire would make both active. An agent's revert is refused for it (`looks_like_existing`);
    the person's never is (beliefs.services, `_refuse_revived_lookalikes`)."""
    writer, other = principals["full_agent"], await orm(lambda: make_principal("other-agent"))
    twins = _whole_word_twins()
    tally = Tally()
    expect, problems = tally.expect, tally.problems

    def change(op: str, kind: str, key: str) -> dict[str, Any]:
        return {"changes": [{"op": op, "kind": kind, "key": key, **({"value": "v"} if op == "add" else {})}]}

    async with asgi_http(writer.token) as mine, asgi_http(other.token) as theirs:

        async def undo_beside(kind: str, word: str, twin_kind: str, twin: str) -> dict[str, Any]:
            """I add and retire `word`, the other agent adds `twin`; my undo of the retire."""
            for http, arguments in (
                (mine, change("add", kind, word)),
                (mine, change("retire", kind, word)),
                (theirs, change("add", twin_kind, twin)),
            ):
                body, _ = await _call(http, "operator_update_world_model", arguments)
                assert body.get("ok") is True, body
            body, _ = await _call(mine, "operator_revert_world_model", {})
            return body

        controlled: set[str] = set()
        for script, plain, look_alike in twins:
            # A second word per script: the same word's twins in two scripts read the same.
            word, twin = f"{plain} {script.lower()}", f"{look_alike} {script.lower()}"
            body = await undo_beside("preference", word, "preference", twin)
            expect(
                f"{script} {word!r}: the undo of its retire beside the twin",
                body.get("error") == "looks_like_existing"
                and body.get("existing") == f"preference/{twin}"
                and body.get("entity") == f"preference/{word}",
                body,
            )
            if script not in controlled:  # once per script: the twin in another kind, the undo written
                controlled.add(script)
                body = await undo_beside("risk", word, "note", twin)
                expect(f"{script} {word!r}: the twin in another kind (control)", body.get("ok") is True, body)

    active = await orm(
        lambda: sorted(
            Belief.objects.filter(kind="preference", status=Belief.Status.ACTIVE).values_list(
                "key", flat=True
            )
        )
    )
    twins_written = sorted(f"{t} {s.lower()}" for s, _, t in twins)
    expect("only the twins active among the preferences", active == twins_written, active)
    scorecard(
        23,
        f"reads as a stored name, brought back: {len(twins)} agents' undos of a retire beside a twin another agent added since → looks_like_existing; one undo per script beside a twin of another kind written (control)",
        cases=tally.cases,
        bypasses=len(problems),
        problems=problems[:20],
    )
    assert problems == []
