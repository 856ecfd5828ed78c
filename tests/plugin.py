"""Shared pytest set-up, loaded for every test in the tree (`-p tests.plugin` in pyproject.toml)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

# Tests never need a real secret; a fixed one keeps runs reproducible.
os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production")
# Tool calls run on worker threads; closing their connections after each call keeps the test
# database droppable at the end. Persistent connections are exercised by the live-server tests.
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "0")
# Deliver notices in the committing thread, so a test sees the delivery it caused.
os.environ.setdefault("OPERATOR_DELIVERY", "sync")

from tests import scorecard
from tests.fixtures import *  # noqa: F403


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's production hasher with 1,000 rounds instead of a million. The round count is stored
    in each hash, so a server or command a test starts as a subprocess (production hashers) still
    verifies these passwords: a browser test logs in to a real uvicorn with them."""

    iterations = 1000


def pytest_configure(config: pytest.Config) -> None:
    """Logins are created in hundreds of tests (the `owner` fixture, `principals`), and a million
    PBKDF2 rounds cost ~0.3 s per password on a small machine: the tests hash with 1,000. No test is
    about the round count."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["tests.plugin.QuickPBKDF2PasswordHasher"]


# The fast inner loop is `pytest -m "not slow"` (README, "Contributing"). Slow means a real socket,
# a browser, a Node.js peer, a PostgreSQL race, a fuzzer or a subprocess server: marked here from
# what a test already declares or where it lives, so no test has to remember the mark; and the few
# single tests in SLOW_TESTS below (tests/test_fast_loop.py checks that they exist).
SLOW_MARKERS = frozenset({"socket", "postgres"})
SLOW_FILES = frozenset(
    {
        "tests/browser",
        "tests/interop",
        "tests/security/test_02_fuzz.py",
        "tests/security/test_10_races.py",
        "tests/security/test_11_faults.py",
        "tests/security/test_15_deadlines.py",
        "tests/security/test_18_token_rotation.py",
        "tests/security/test_19_admin_crawl.py",
        "tests/test_mcp_clients.py",
        "tests/test_serving.py",
        "tests/test_access_log.py",
        "tests/test_deploy_units.py",
        "beliefs/tests/test_evidence_property.py",
    }
)
# Single tests that take over a second for a reason of their own (a subprocess, a real deadline, a
# race, a volume), named here with that reason. Each measured on two cores, SQLite, unloaded to lightly
# loaded; they still run in the full suite (`python3 manage.py runtests`, CI).
SLOW_TESTS = frozenset(
    {
        # Every code point (1.1 million) against the hidden-character rules, twice (~3.5 s).
        "tests/test_display.py::test_the_compiled_patterns_match_exactly_the_characters_the_rules_name",
        # A real executor process held past its real 30 s threshold, then SIGKILLed (~38 s).
        "tests/security/test_17_run_lock.py::test_a_killed_executor_gives_the_lock_back_within_its_short_threshold",
        # A reader and a writer connection racing, up to a 20 s deadline (~13-16 s).
        "tests/test_snapshot_reads.py::test_counts_and_lists_agree_while_another_connection_writes",
        # Executors racing on threads against a stalling brain (~4.5-8 s).
        "intents/tests/test_executor.py::test_executors_racing_run_every_handler_exactly_once_per_intent",
        # Real `manage.py operator_execute` processes, killed mid brain call (~3 s each).
        "intents/tests/test_executor.py::test_a_crash_after_the_brain_call_never_leads_to_a_second_call",
        "intents/tests/test_executor.py::test_sigterm_mid_call_fails_the_intent_at_once_and_cancels_the_run",
        # Real `manage.py operator_tick` processes, one per exit code (~7-10 s).
        "operator_site/cross_domain/tests/test_tick_command.py::test_exit_codes_of_the_real_command",
        # Real `manage.py` processes: waiting out the database's connect timeout (~11 s), starting
        # `serve` (~1.5-6 s each).
        "tests/test_configuration.py::test_an_unreachable_database_is_one_line_naming_it",
        "tests/test_configuration.py::test_serve_says_e_mail_is_printed_not_sent",
        "tests/test_configuration.py::test_serve_with_an_unreachable_database_prints_no_credential",
        "tests/test_configuration.py::test_a_port_in_use_stops_serve_before_any_credential_is_created",
        "tests/test_configuration.py::test_the_bare_server_of_the_systemd_unit_also_fails_in_one_line",
        # A real pip process (~1.4-1.9 s).
        "tests/test_bootstrap.py::test_a_real_install_shows_progress_and_a_last_line",
        # Fresh interpreters importing Django and the app to see which modules load (~1-3 s each).
        "runs/tests/test_observe.py::test_importing_the_observe_step_loads_no_model_vector_or_embedding_module",
        "runs/tests/test_observe.py::test_a_full_observe_run_in_a_fresh_interpreter_loads_no_banned_module",
        "runs/tests/test_observe.py::test_the_import_check_can_fail",
        "operator_site/cross_domain/tests/test_ticks.py::test_ticks_and_reads_import_no_brain_or_observe_module",
        "tests/test_brain_client.py::test_the_brain_client_module_loads_no_model_or_embedding_library",
        # 10,000 tasks and 10,000 observations written to show the packet stays bounded (~3.6-5.7 s).
        "tests/test_reads.py::test_the_packet_stays_bounded_with_10000_tasks_and_10000_observations",
    }
)
_ROOT = Path(__file__).resolve().parents[1]


def _is_slow(item: pytest.Item) -> bool:
    if any(item.get_closest_marker(name) for name in SLOW_MARKERS):
        return True
    relative = Path(str(item.path)).resolve().relative_to(_ROOT).as_posix()
    # By the function's name: every parametrisation of a test named in SLOW_TESTS.
    if f"{relative}::{getattr(item, 'originalname', item.name)}" in SLOW_TESTS:
        return True
    return any(relative == f or relative.startswith(f + "/") for f in SLOW_FILES) or "races" in relative


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)


# --- the security scorecard (tests/scorecard.py), also under pytest-xdist ---------------------------
def pytest_sessionfinish(session: pytest.Session) -> None:
    if not scorecard.hand_to_controller(session):
        scorecard.write_file()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    scorecard.summary(terminalreporter)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    scorecard.take_from_worker(node)
