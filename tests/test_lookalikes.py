"""What a name reads as (`operator_site.lookalikes`): the fold, its table, and the belief keys it
guards — through the service on both databases, and for keys stored before the rule, through the
migration that folds them (beliefs 0006)."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from operator_site import lookalikes
from operator_site.hidden import is_hidden
from operator_site.lookalike_table import READS_AS
from operator_site.lookalikes import as_seen, fold, reads_as

ROOT = Path(__file__).resolve().parent.parent

# Whole words in one script that read as a Latin one (each passes the door: one script per word).
CYRILLIC_PAYDAY = "\u0440\u0430\u0443\u0501\u0430\u0443"  # reads as "payday"
CYRILLIC_SCOPE = "\u0455\u0441\u043e\u0440\u0435"  # reads as "scope"
CYRILLIC_APPLE = "\u0430\u0440\u0440\u04cf\u0435"  # reads as "apple" (the palochka as "l")
GREEK_VOTE = "\u03bd\u03bf\u03c4\u03b5"  # nu, omicron, tau, epsilon: tau reads as nothing plain
CYRILLIC_E_EMPLOYER = "\u0435mployer"  # a Cyrillic "e", then Latin: mixed (refused at the door)


def test_the_table_is_what_the_confusables_give() -> None:
    """operator_site/lookalike_table.py is generated; a hand edit or a new release of the data fails
    here until scripts/make_lookalikes.py is rerun."""
    done = subprocess.run(
        [sys.executable, "scripts/make_lookalikes.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_table_holds_only_plain_characters_read_as_printable_ascii() -> None:
    assert len(READS_AS) > 400
    for code, plain in READS_AS.items():
        ch = chr(code)
        assert not ch.isascii() and unicodedata.is_normalized("NFKC", ch), hex(code)
        assert len(plain) == 1 and "!" <= plain <= "~", hex(code)


@pytest.mark.parametrize(
    ("stored", "given"),
    [
        ("payday", CYRILLIC_PAYDAY),
        ("scope", CYRILLIC_SCOPE),
        ("apple", CYRILLIC_APPLE),
        ("employer", CYRILLIC_E_EMPLOYER),
        ("Run a marathon", "Run \u0430 marathon"),  # a one-letter Cyrillic word
        ("preferences.tone", "\uff50\uff52\uff45\uff46\uff45\uff52\uff45\uff4e\uff43\uff45\uff53.\uff54one"),
        ("HEAT", "\u0397\u0395\u0391\u03a4"),  # Greek capitals
        ("file", "\ufb01le"),  # a ligature
        ("caf\u00e9", "caf\u0435\u0301"),  # a Cyrillic e with a combining acute reads as é
        ("Home  City", "home city"),  # case and spacing, as before
        ("a/b", "a\u2215b"),  # a division slash
    ],
)
def test_names_that_read_the_same_fold_the_same(stored: str, given: str) -> None:
    assert fold(stored) == fold(given)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("fall", "fail"),  # ASCII is never folded into ASCII: "l" and "i" stay two letters
        ("O1", "01"),
        ("barn", "bam"),  # "rn" is not "m": only one character for one
        ("vote", GREEK_VOTE),
        ("москва", "moscow"),
        ("caf\u00e9", "cafe"),
        ("stra\u00dfe", "strasse"),  # lower case, not case folding
    ],
)
def test_names_that_read_differently_fold_differently(one: str, other: str) -> None:
    assert fold(one) != fold(other)


def test_reads_as_names_each_look_alike_once() -> None:
    assert reads_as(CYRILLIC_PAYDAY) == [("\u0440", "p"), ("\u0430", "a"), ("\u0443", "y"), ("\u0501", "d")]
    assert reads_as("payday") == []
    assert reads_as("\uff54") == [("\uff54", "t")]


# --- free text as it reads, for rules that look for words (the gate, a directive's topic) ----------
@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("p\u0301a\u0301ssword", "password"),  # accents on its letters
        ("\u1e55\u00e1ssword", "password"),  # the same, precomposed
        ("p\u0336a\u0336s\u0336s\u0336w\u0336o\u0336r\u0336d\u0336", "password"),  # struck through
        ("pass\u20ddword", "password"),  # an enclosing circle (an enclosing mark, Me)
        ("p\u0301\u0302\u0303assword", "password"),  # marks on marks
        ("\u1d7dassword", "password"),  # LATIN SMALL LETTER P WITH STROKE: no decomposition
        ("\ua751assword", "password"),  # P WITH STROKE THROUGH DESCENDER
        ("\u1d18\u1d00\ua731\ua731\u1d21\u1d0f\u0280\u1d05", "password"),  # small capitals
        ("\U0001f15f\U0001f150\U0001f162\U0001f162", "PASS"),  # negative circled capitals
        ("\u00d8\u0110", "OD"),  # O and D with stroke, capitals stay capitals
        ("\uff50\u0301assword", "password"),  # full width with an accent
        ("\u0440\u0301assword", "password"),  # a Cyrillic p with an accent
        ("AKIA\u0336IOSF", "AKIAIOSF"),
        ("na\u00efve caf\u00e9", "naive cafe"),
        ("\u028bote", "uote"),  # V WITH HOOK: the confusables read it as "u", and they stand
    ],
)
def test_free_text_reads_with_its_latin_letters_bare(text: str, seen: str) -> None:
    assert as_seen(text) == seen


@pytest.mark.parametrize(
    "text",
    [
        "\u0915\u093f\u0924\u093e\u092c",  # Hindi: its vowel signs are marks, on no Latin letter
        "\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627",  # Arabic with its vowel marks
        "\u05e9\u05c1\u05b8\u05dc\u05d5\u05b9\u05dd",  # Hebrew with its points
        "\ud55c\uad6d\uc5b4",  # Korean syllables (NFD takes them apart, NFC puts them back)
        "\u00e6\u0153 \u00df",  # letters named for two letters are not a decorated one
    ],
)
def test_marks_on_other_letters_stay(text: str) -> None:
    assert as_seen(text) == unicodedata.normalize("NFKC", text)


def test_names_fold_as_before_the_bare_reading() -> None:
    """The bare reading is for finding words, never for names: "café" and "cafe" stay two keys, and
    so do a key and its small-capital or stroked spelling (visible, and Latin, so the door takes
    them)."""
    assert fold("caf\u00e9") != fold("cafe")
    assert fold("\u1d18ayday") != fold("payday")
    assert fold("\u1d7dayday") != fold("payday")


def test_every_mark_and_only_marks_on_an_ascii_character_are_dropped() -> None:
    """The pattern of marks is built from the Unicode database; every code point of the first two
    planes is tried. Past them the only marks are variation selectors, which are hidden (dropped
    before)."""
    _, marks_on_ascii = lookalikes._bare_reading()
    wrong = []
    for code in range(0x110000):
        ch = chr(code)
        mark = unicodedata.category(ch) in ("Mn", "Me")
        if code >= 0x20000:
            if mark and not is_hidden(ch):
                wrong.append(hex(code))
            continue
        if (marks_on_ascii.search("a" + ch) is not None) != mark:
            wrong.append(hex(code))
    assert wrong == []
    assert marks_on_ascii.sub("", "\u0301a\u0301") == "\u0301a"  # a mark on nothing stays


def test_every_decorated_letter_reads_as_the_letter_its_name_gives() -> None:
    letters, _ = lookalikes._bare_reading()
    named = 0
    for code, plain in letters.items():
        name = unicodedata.name(chr(code))
        if code in READS_AS:
            assert plain == READS_AS[code], name  # the confusables stand where they read otherwise
            continue
        named += 1
        assert "LATIN" in name and plain.isascii() and plain.isalpha(), name
        letter = name.split(" WITH ")[0].split()[-1]
        capital = "CAPITAL LETTER" in name and "SMALL CAPITAL" not in name  # a small capital is lower case
        assert plain == (letter if capital else letter.lower()), name
    assert named > 500
    assert {letters[0x1D7D], letters[0x1D18], letters[0x00D8], letters[0x1F15F]} == {"p", "O", "P"}


# --- keys stored before the rule (the rest of the rule: beliefs/tests/test_lookalike_keys.py) ---------
def _write(principal: Any, *changes: dict[str, Any]) -> dict[str, Any]:
    from beliefs.tests.helpers import run_tool

    return run_tool(principal, "operator_update_world_model", {"changes": list(changes)})


def _add(kind: str, key: str) -> dict[str, Any]:
    return {"op": "add", "kind": kind, "key": key, "value": "v"}


def _migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_the_migration_folds_stored_keys_so_a_plain_key_beside_a_stored_look_alike_is_refused(
    agent: Any,
) -> None:
    from beliefs.models import Belief

    heads = MigrationExecutor(connection).loader.graph.leaf_nodes()
    before = [("beliefs", "0005_evidence_moves_out")] + [
        (app, name) for app, name in heads if app != "beliefs"
    ]
    try:
        old = _migrate(before)
        Principal = old.get_model("operator_site", "Principal")
        source = Principal.objects.get(pk=agent.principal.pk)
        for kind, key in (("note", CYRILLIC_E_EMPLOYER), ("note", "plain"), ("risk", "\uff54one")):
            old.get_model("beliefs", "Belief").objects.create(
                kind=kind,
                key=key,
                value="v",
                source_principal=source,
                source_name=source.name,
                source_kind=source.kind,
                set_in_version=1,
                last_version=1,
            )
        _migrate(heads)
    finally:
        ContentType.objects.clear_cache()
    folded = dict(Belief.objects.values_list("key", "key_alike"))
    assert folded == {CYRILLIC_E_EMPLOYER: "employer", "plain": "plain", "\uff54one": "tone"}
    answer = _write(agent.principal, _add("note", "employer"))
    assert answer["error"] == "looks_like_existing" and answer["existing"] == f"note/{CYRILLIC_E_EMPLOYER}"
    assert _write(agent.principal, _add("risk", "tone"))["error"] == "looks_like_existing"
    assert _write(agent.principal, _add("risk", "employer"))["ok"] is True
