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

from operator_site.lookalike_table import READS_AS
from operator_site.lookalikes import fold, reads_as

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
