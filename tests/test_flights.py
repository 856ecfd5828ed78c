"""Round trips on PostgreSQL, counted on the wire (libpq's protocol trace through psycopg's public
`PGconn.trace`), and what `sql.flights` must not change: answers, errors, rollbacks, row counts,
commit hooks (operator_site/sql/flights.py)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import DataError, IntegrityError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.utils import timezone
from psycopg import pq

from operator_site import sql
from operator_site.face import registry
from operator_site.face.admission import Presented
from operator_site.face.dispatch import _serve_call, canonical_digest
from operator_site.models import AuditEvent, Principal
from runs.models import ProgressEntry

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def flights(fn: Callable[..., Any], *args: Any) -> tuple[Any, list[list[str]]]:
    """What `fn` returned, and the flights it sent: each a run of protocol messages the client
    sent before it waited for the server's answer (one round trip each)."""
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    with tempfile.TemporaryFile(mode="w+") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            result = fn(*args)
        finally:
            pgconn.untrace()
        trace.seek(0)
        lines = trace.read().splitlines()
    runs: list[list[str]] = []
    previous = ""
    for line in lines:
        direction, _, rest = line.partition("\t")
        if direction == "F":
            if previous != "F":
                runs.append([])
            runs[-1].append(rest.split("\t", 1)[-1])
        previous = direction
    return result, runs


def _call(principal: Any, token: str, name: str, arguments: dict[str, Any]) -> Any:
    spec = registry.get(name)
    args = spec.args.model_validate(arguments)
    return _serve_call(
        spec, Presented(token), args, None, time.perf_counter(), canonical_digest(arguments), None
    )


def _commands(run: list[str]) -> str:
    """A flight's statements, shortened: 'BEGIN', 'SELECT', 'INSERT', 'COMMIT', ..."""
    words = []
    for message in run:
        kind, _, text = message.partition("\t")
        if kind in ("Query", "Parse"):
            statement = text.split('"')[3] if kind == "Parse" and text.count('"') >= 4 else text.strip(' "')
            words.append(statement.split()[0].upper() if statement.split() else kind)
        elif kind == "Bind" and not words:
            words.append("(prepared)")
    return " ".join(words) or "+".join(m.split("\t")[0] for m in run)


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        # The token and the rate count; BEGIN; the entry under today's day (one statement,
        # sql.insert_under); the audit row with COMMIT. Before sql.flights: six round trips; before
        # insert_under: five (the day's lookup on its own).
        ("operator_record_progress", {"summary": "s", "outcome": "done"}, 4),
        # The token; BEGIN; the intent with its decision (one statement: insert_unless_conflict's
        # child); its event and its notice with the audit row and COMMIT (sql.insert_with_commit).
        # Before: eight, then five.
        ("operator_record_action_intent", {"action": {"type": "spend", "title": "T", "amount_cents": 1}}, 4),
        # The token; BEGIN; the queue (advisory lock) and the version with the belief's pre-image
        # (one message); the version claim with its change row and the belief (one statement);
        # the audit row with COMMIT. Before the world-model write's own round trips were cut: ten.
        (
            "operator_update_world_model",
            {"changes": [{"op": "add", "kind": "note", "key": "k", "value": "v"}]},
            5,
        ),
        # A one-query read: the token, the query, the audit row (one message with its commit).
        ("operator_list_directives", {}, 3),
        # A snapshot read: the token, BEGIN (REPEATABLE READ READ ONLY), the board, the lists and
        # counts; the snapshot's COMMIT with the audit row in its own transaction. Before: six.
        ("operator_context_packet", {}, 5),
    ],
)
def test_round_trips_of_a_call_on_the_wire(
    agent, settings, tool: str, arguments: dict[str, Any], expected: int
) -> None:
    settings.OPERATOR_DELIVERY = "off"  # a notice is delivered after the commit, not in the call
    # Warm: the day opens, and every statement crosses psycopg's prepare threshold (preparing one
    # costs a round trip of its own, once per connection).
    for n in range(3):
        warm = arguments
        if tool == "operator_record_action_intent":
            warm = {"action": {**arguments["action"], "title": f"warm {n}"}}
        _call(agent.principal, agent.token, tool, warm)
    if tool == "operator_record_action_intent":
        arguments = {"action": {**arguments["action"], "title": "T2"}}
    if tool == "operator_update_world_model":
        arguments = {"changes": [{**arguments["changes"][0], "key": "k2"}]}
    result, runs = flights(_call, agent.principal, agent.token, tool, arguments)
    assert result.is_error is not True, result
    described = [_commands(run) for run in runs]
    assert len(runs) == expected, "\n".join(described)


def test_the_audit_row_goes_with_the_commit(agent) -> None:
    arguments = {"summary": "s", "outcome": "done"}
    _call(agent.principal, agent.token, "operator_record_progress", arguments)
    _, runs = flights(_call, agent.principal, agent.token, "operator_record_progress", arguments)
    (last,) = runs[-1]
    assert last.startswith("Query") and '"operator_site_auditevent"' in last, last
    assert last.rstrip().endswith('; COMMIT"'), last


def _progress_rows() -> int:
    return ProgressEntry.objects.count()


def test_a_value_the_database_refuses_in_the_last_row_rolls_the_whole_write_back(agent) -> None:
    before, audits = _progress_rows(), AuditEvent.objects.count()
    with pytest.raises(DataError), sql.write_transaction() as last:
        sql.create_row(
            ProgressEntry, summary="kept?", outcome="done", day=_a_day(), recorded_by=agent.principal
        )
        last(_audit_row(agent, tool="x" * 5000))  # too long
    assert _progress_rows() == before and AuditEvent.objects.count() == audits
    # The connection is usable, in autocommit, outside any transaction.
    assert connection.get_autocommit() and not connection.in_atomic_block
    assert Principal.objects.filter(pk=agent.principal.pk).exists()


def test_an_error_in_the_first_statement_is_djangos_and_rolls_back(agent) -> None:
    with pytest.raises(IntegrityError), sql.write_transaction():
        Principal.objects.create(name=agent.principal.name)  # the name is unique: refused at once
    assert connection.get_autocommit() and not connection.in_atomic_block
    assert Principal.objects.filter(name=agent.principal.name).count() == 1


def test_a_conditional_update_as_the_first_statement_counts_its_rows(agent) -> None:
    pk = agent.principal.pk
    with sql.write_transaction():
        missed = Principal.objects.filter(pk=pk, name="someone else").update(name="changed")
        hit = Principal.objects.filter(pk=pk).update(tools=["operator_list_directives"])
    assert (missed, hit) == (0, 1)
    with sql.write_transaction():
        first = Principal.objects.filter(pk=pk, name=agent.principal.name).update(tools=None)
    assert first == 1


def test_nothing_may_follow_the_last_row(agent) -> None:
    """A statement after last() is a bug (it would run outside the transaction last() ended): it
    is refused; what last() committed stays committed, and the connection is left clean."""
    before = _progress_rows()
    with pytest.raises(RuntimeError, match="no statement may follow"), sql.write_transaction() as last:
        sql.create_row(
            ProgressEntry, summary="kept", outcome="done", day=_a_day(), recorded_by=agent.principal
        )
        last(_audit_row(agent))
        Principal.objects.count()
    assert _progress_rows() == before + 1
    assert connection.get_autocommit() and not connection.in_atomic_block
    assert Principal.objects.filter(pk=agent.principal.pk).exists()


def test_a_block_django_means_to_roll_back_commits_nothing(agent) -> None:
    """As with a plain atomic(): the row is refused (Django allows no query in a block marked for
    rollback) and nothing is committed."""
    before, audits = _progress_rows(), AuditEvent.objects.count()
    with pytest.raises(TransactionManagementError), sql.write_transaction() as last:
        sql.create_row(
            ProgressEntry, summary="gone", outcome="done", day=_a_day(), recorded_by=agent.principal
        )
        transaction.set_rollback(True)  # what Django does after an error caught inside a nested atomic
        last(_audit_row(agent))
    assert _progress_rows() == before and AuditEvent.objects.count() == audits


def test_a_snapshot_reads_audit_row_is_kept_even_when_the_snapshot_rolls_back(agent) -> None:
    audits = AuditEvent.objects.count()
    with sql.read_snapshot() as last:
        assert Principal.objects.filter(pk=agent.principal.pk).exists()
        transaction.set_rollback(True)
        last(_audit_row(agent))
    assert AuditEvent.objects.count() == audits + 1
    with sql.read_snapshot() as last:
        Principal.objects.count()
        last(_audit_row(agent))
    assert AuditEvent.objects.count() == audits + 2
    assert connection.get_autocommit() and not connection.in_atomic_block


def test_a_commit_hook_runs_after_the_commit_and_outside_any_pipeline(agent) -> None:
    seen: list[int] = []
    with sql.write_transaction() as last:
        entry = sql.create_row(
            ProgressEntry, summary="hooked", outcome="done", day=_a_day(), recorded_by=agent.principal
        )
        transaction.on_commit(
            lambda: seen.append(ProgressEntry.objects.filter(pk=entry.pk).update(summary="h2"))
        )
        last(_audit_row(agent))
    assert seen == [1]  # the hook's own update counted its row: no pipeline was open
    assert ProgressEntry.objects.get(pk=entry.pk).summary == "h2"


def test_a_write_commits_what_it_wrote(agent) -> None:
    audits = AuditEvent.objects.count()
    with sql.write_transaction() as last:
        entry = sql.create_row(
            ProgressEntry, summary="committed", outcome="done", day=_a_day(), recorded_by=agent.principal
        )
        last(_audit_row(agent))
    assert ProgressEntry.objects.filter(pk=entry.pk, summary="committed").exists()
    assert AuditEvent.objects.count() == audits + 1


def _a_day() -> Any:
    from runs.days import current_day

    with transaction.atomic():
        return current_day(principal=None, via="test_flights")


def _audit_row(holder: Any, tool: str = "t") -> AuditEvent:
    return AuditEvent(principal_id=holder.principal.pk, tool=tool, outcome="ok", duration_ms=0.0)


# --- rows that go with the COMMIT (sql.insert_with_commit) -------------------------------------------
def _notice(key: str) -> Any:
    from operator_site.models import Notification

    return Notification(kind="test", title=key, dedupe_key=key)


def _notices(key: str) -> int:
    from operator_site.models import Notification

    return Notification.objects.filter(dedupe_key=key).count()


def test_a_queued_row_travels_with_the_last_message(agent) -> None:
    def block() -> None:
        with sql.write_transaction() as last:
            Principal.objects.filter(pk=agent.principal.pk).update(tools=None)
            sql.insert_with_commit(_notice("with-commit"), unless_conflict_on=("dedupe_key",))
            assert _notices("with-commit") == 0  # not sent yet
            last(_audit_row(agent))

    _, runs = flights(block)
    # BEGIN; the update; the test's own count; the queued row, the audit row and COMMIT.
    assert [_commands(run) for run in runs] == ["BEGIN", "UPDATE", "SELECT", "INSERT"], runs
    (message,) = runs[-1]
    assert "operator_site_notification" in message and message.rstrip().endswith('; COMMIT"'), message
    assert _notices("with-commit") == 1


def test_a_queued_row_is_rolled_back_with_its_write(agent) -> None:
    with pytest.raises(DataError), sql.write_transaction() as last:
        sql.insert_with_commit(_notice("rolled-back"))
        last(_audit_row(agent, tool="x" * 5000))  # too long: the message fails, nothing commits
    assert _notices("rolled-back") == 0
    with pytest.raises(ZeroDivisionError), sql.write_transaction():
        sql.insert_with_commit(_notice("rolled-back"))
        1 / 0  # noqa: B018
    assert _notices("rolled-back") == 0


def test_a_block_without_last_inserts_what_it_queued_before_its_commit(agent) -> None:
    with sql.write_transaction():
        sql.insert_with_commit(_notice("no-last"))
    assert _notices("no-last") == 1


def test_a_row_queued_under_a_savepoint_goes_at_once_and_with_its_savepoint(agent) -> None:
    """A savepoint may be rolled back without the write: a row queued inside one is inserted at
    once, so the savepoint's rollback takes it back."""
    with sql.write_transaction() as last:
        with pytest.raises(ZeroDivisionError), transaction.atomic():
            sql.insert_with_commit(_notice("in-savepoint"))
            assert _notices("in-savepoint") == 1  # inserted at once
            1 / 0  # noqa: B018
        sql.insert_with_commit(_notice("kept"))
        last(_audit_row(agent))
    assert _notices("in-savepoint") == 0 and _notices("kept") == 1


def test_outside_a_unit_a_row_goes_at_once(agent) -> None:
    with transaction.atomic():
        sql.insert_with_commit(_notice("no-unit"))
        assert _notices("no-unit") == 1


def test_a_recorded_intent_keeps_its_history_row_and_its_one_notice(agent, settings) -> None:
    from intents.models import IntentEvent
    from operator_site.models import Notification

    settings.OPERATOR_DELIVERY = "off"
    arguments = {"action": {"type": "spend", "title": "With the commit", "amount_cents": 5}}
    first = _call(agent.principal, agent.token, "operator_record_action_intent", arguments)
    again = _call(agent.principal, agent.token, "operator_record_action_intent", arguments)
    assert first.is_error is not True and again.is_error is not True
    import json

    intent_id = json.loads(first.content[0].text)["id"]
    assert json.loads(again.content[0].text)["created"] is False
    assert IntentEvent.objects.filter(intent_id=intent_id, event="recorded").count() == 1
    assert Notification.objects.filter(dedupe_key=f"intent:{intent_id}").count() == 1
    blocked = {"action": {"type": "share_credentials", "title": "The keys", "recipient": "x@example.com"}}
    answer = json.loads(
        _call(agent.principal, agent.token, "operator_record_action_intent", blocked).content[0].text
    )
    assert answer["status"] == "blocked", answer
    assert Notification.objects.filter(dedupe_key=f"intent-blocked:{answer['id']}", safety=True).count() == 1


def _parsed_statements(runs: list[list[str]]) -> list[str]:
    """The text of each statement the flights parsed (a Query's or a Parse's)."""
    texts = []
    for run in runs:
        for message in run:
            kind, _, rest = message.partition("\t")
            if kind == "Parse":  # ' "name" "text" count types…': the text runs to the last quote
                texts.append(rest.split('" "', 1)[-1].rsplit('"', 1)[0])
            elif kind == "Query":
                texts.append(rest.strip(' "'))
    return texts


def test_the_packets_statement_reaches_the_server_as_the_same_text_either_way(agent, owner) -> None:
    """read_many sends its statement with PostgreSQL's own `$n` placeholders through psycopg's
    RawCursor, except when Django logs queries (it then goes through Django's cursor with "%s"
    placeholders, which psycopg writes as `$n`): the server receives the same text, the same
    values and gives the same answer either way."""
    from django.test.utils import CaptureQueriesContext

    from operator_site.cross_domain import reads
    from tests.test_reads import some_of_everything

    some_of_everything(agent.principal, owner.principal)
    now = timezone.now()
    sent: list[str] = []

    def record(execute: Any, sql_text: str, params: Any, many: bool, context: Any) -> Any:
        sent.append(sql_text)
        return execute(sql_text, params, many, context)

    connection.ensure_connection()
    threshold = connection.connection.prepare_threshold
    connection.connection.prepare_threshold = None  # no statement prepared: every text is parsed
    try:
        with connection.execute_wrapper(record):
            native, native_runs = flights(lambda: reads.context_packet(now=now))
            with CaptureQueriesContext(connection) as logged:
                logged_answer, logged_runs = flights(lambda: reads.context_packet(now=now))
    finally:
        connection.connection.prepare_threshold = threshold
    assert native == logged_answer
    (native_text,) = [t for t in _parsed_statements(native_runs) if "json_agg" in t]
    (logged_text,) = [t for t in _parsed_statements(logged_runs) if "json_agg" in t]
    assert native_text == logged_text and "$1" in native_text and "%s" not in native_text
    # Django's execute wrappers saw both: the `$n` text (the RawCursor), then the "%s" one, which
    # is what Django's query log holds.
    given = [t for t in sent if "json_agg" in t]
    assert len(given) == 2 and given[0] == native_text and "%s" in given[1] and "$1" not in given[1]
    assert [q["sql"] for q in logged.captured_queries if "json_agg" in q["sql"]]
