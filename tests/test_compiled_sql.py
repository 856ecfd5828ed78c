"""operator_site/compiled_sql.py: statements compiled once must answer exactly what the ORM answers,
and a unique key must decide an insert without an error, a savepoint or a half write."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.db.models import Count
from django.test.utils import CaptureQueriesContext

from intents.models import OPEN_DECISION_STATUSES, Decision, Intent, IntentStatus
from intents.services import ActionInput, record_intent
from operator_site import compiled_sql
from operator_site.compiled_sql import (
    frozen_rows,
    insert_row,
    insert_unless_conflict,
    memo,
    row_where,
    rows_where,
)
from operator_site.models import Notification, Principal

pytestmark = pytest.mark.django_db


def _notice(key: str | None, title: str = "t") -> Notification:
    return Notification(kind="test", title=title, dedupe_key=key)


def _fields(row: Any) -> dict[str, Any]:
    return {f.attname: getattr(row, f.attname) for f in type(row)._meta.concrete_fields}


# --- lookups ---------------------------------------------------------------------------------------------
def test_row_where_reads_what_the_orm_reads(agent) -> None:
    from runs.models import ProgressEntry
    from runs.services import record_progress

    # JSON, datetimes, booleans, nullable integers and a foreign key: every converter matters.
    written = record_progress(
        principal=agent.principal, summary="s", outcome="done", tried=["a", "b"], failed=["c"]
    )
    found = row_where(ProgressEntry, id=written.pk)
    assert found is not None and not found._state.adding
    assert _fields(found) == _fields(ProgressEntry.objects.get(pk=written.pk))
    assert found.tried == ["a", "b"] and found.created_at.tzinfo is not None
    notice = Notification.objects.create(kind="k", title="t", dedupe_key="d", safety=True, subject_id=3)
    assert _fields(row_where(Notification, dedupe_key="d")) == _fields(Notification.objects.get(pk=notice.pk))
    assert row_where(Notification, dedupe_key="absent") is None
    assert [p.name for p in rows_where(Principal, kind="agent")] == [agent.name]


# --- inserts ---------------------------------------------------------------------------------------------
def test_insert_row_writes_what_the_orm_reads_back() -> None:
    written = insert_row(_notice("a", "first"))
    assert written.pk is not None and not written._state.adding
    assert _fields(Notification.objects.get(pk=written.pk)) == _fields(written)


def test_a_duplicate_key_inserts_nothing_and_the_transaction_goes_on() -> None:
    with transaction.atomic():
        assert insert_unless_conflict(_notice("same", "winner"), "dedupe_key") is True
        loser = _notice("same", "loser")
        assert insert_unless_conflict(loser, "dedupe_key") is False
        assert loser.pk is None and loser._state.adding  # not pretending to be a row
        # No error was raised, so the transaction is still usable (PostgreSQL aborts one that
        # met a unique violation): read the winner in it.
        assert Notification.objects.get(dedupe_key="same").title == "winner"
    assert Notification.objects.filter(dedupe_key="same").count() == 1


def test_only_the_named_key_decides_another_constraint_still_refuses(make_principal) -> None:
    make_principal("taken")
    # Principal.name is unique too, but the key named here is token_digest: the other constraint
    # is not silently skipped.
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_unless_conflict(Principal(name="taken", kind="agent", token_digest="d" * 64), "token_digest")
    assert Principal.objects.filter(name="taken").count() == 1


def test_a_key_must_be_named() -> None:
    with pytest.raises(ValueError, match="unique constraint"):
        insert_unless_conflict(_notice("x"))


# --- frozen reads --------------------------------------------------------------------------------------
def _intents(agent: Any, n: int) -> None:
    for i in range(n):
        record_intent(
            principal=agent.principal, action=ActionInput(type="spend", title=f"buy {i}", amount_cents=100)
        )


def test_frozen_rows_answer_what_the_queryset_answers_and_see_new_rows(agent) -> None:
    def build() -> Any:
        return (
            Decision.objects.filter(status__in=OPEN_DECISION_STATUSES)
            .select_related("intent", "opened_by")
            .order_by("-id")[:3]
        )

    _intents(agent, 2)
    assert [_fields(d) for d in frozen_rows("test.decisions", build)] == [_fields(d) for d in build()]
    _intents(agent, 3)  # not a result cache: the next call reads the rows as they are now
    fresh = frozen_rows("test.decisions", build)
    assert [d.pk for d in fresh] == [d.pk for d in build()] and len(fresh) == 3
    # select_related came with the row: reading the related objects asks nothing more.
    with CaptureQueriesContext(connection) as queries:
        assert {d.opened_by.name for d in fresh} == {agent.name}
        assert all(d.intent.title.startswith("buy") for d in fresh)
    assert len(queries) == 0


def test_frozen_rows_keep_prefetch_values_and_annotations(agent) -> None:
    _intents(agent, 4)
    pending = frozen_rows(
        "test.prefetch",
        lambda: (
            Intent.objects.filter(status=IntentStatus.PENDING_APPROVAL)
            .prefetch_related("decisions")
            .order_by("id")[:10]
        ),
    )
    with CaptureQueriesContext(connection) as queries:
        assert [len(i.decisions.all()) for i in pending] == [1, 1, 1, 1]
    assert len(queries) == 0
    values = frozen_rows("test.values", lambda: Intent.objects.order_by("id").values_list("id", "title")[:2])
    assert values == list(Intent.objects.order_by("id").values_list("id", "title")[:2])
    counted = frozen_rows(
        "test.annotate",
        lambda: Intent.objects.annotate(n=Count("decisions")).order_by("id").values("id", "n"),
    )
    assert counted == list(Intent.objects.annotate(n=Count("decisions")).order_by("id").values("id", "n"))


def test_a_frozen_query_is_built_and_compiled_once_per_connection(agent, monkeypatch) -> None:
    built = []

    def build() -> Any:
        built.append(1)
        return Principal.objects.order_by("id")

    compiles = []
    original = Intent.objects.none().query.get_compiler

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        compiles.append(1)
        return original.__func__(self, *args, **kwargs)

    monkeypatch.setattr(type(Intent.objects.none().query), "get_compiler", counting)
    for _ in range(5):
        assert [p.name for p in frozen_rows("test.once", build)] == [agent.name]
    assert len(built) == 1
    assert len(compiles) == 1


@pytest.mark.django_db(transaction=True)
def test_each_thread_runs_frozen_queries_on_its_own_connection(agent) -> None:
    def build() -> Any:
        return Principal.objects.order_by("id")

    assert [p.name for p in frozen_rows("test.threads", build)] == [agent.name]
    seen: list[Any] = []

    def other_thread() -> None:
        try:
            seen.append([p.name for p in frozen_rows("test.threads", build)])
            seen.append(connection.connection)
        finally:
            connection.close()

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert seen[0] == [agent.name]
    assert seen[1] is not connection.connection


def test_the_per_connection_memo_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(compiled_sql, "_MEMO_SIZE", 8)
    for i in range(50):
        assert memo(("test.bounded", i), lambda conn, i=i: i * 2) == i * 2
    kept = [k for k in connections["default"].__dict__["operator_memo"] if k[0] == "test.bounded"]
    assert len(kept) <= 8 and ("test.bounded", 49) in kept
