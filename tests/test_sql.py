"""operator_site/sql/, the database seam: every hand-written statement answers exactly what the
ORM answers (on SQLite and on PostgreSQL: CI runs this file on both), a unique key decides an insert
without an error, a savepoint or a half write, and the seam uses no private internal."""

from __future__ import annotations

import ast
import functools
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import DataError, IntegrityError, connection, models, transaction
from django.db.models import Max, Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from goals.models import Task
from intents.models import Directive
from operator_site import sql
from operator_site.cross_domain import reads
from operator_site.models import AuditEvent, Notification, NotificationBudget, Principal, RateCounter
from operator_site.sql import Rows, insert_row, insert_unless_conflict, row_where, rows_where
from runs.models import ProgressEntry

pytestmark = pytest.mark.django_db


def _notice(key: str | None, title: str = "t") -> Notification:
    return Notification(kind="test", title=title, dedupe_key=key)


def _fields(row: Any) -> dict[str, Any]:
    """The values of the fields loaded (a field `.only()` left out stays deferred, unread)."""
    deferred = row.get_deferred_fields()
    return {
        f.attname: getattr(row, f.attname)
        for f in type(row)._meta.concrete_fields
        if f.attname not in deferred
    }


# --- lookups ---------------------------------------------------------------------------------------------
def test_row_where_reads_what_the_orm_reads(agent) -> None:
    from runs.records import record_progress

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


def _entry(principal: Any, summary: str = "s") -> ProgressEntry:
    return ProgressEntry(
        summary=summary,
        outcome="done",
        tried=["a", {"b": 1}],
        recorded_by=principal,
        created_at=timezone.now(),
    )


def test_insert_under_writes_the_child_and_attaches_the_parent_the_orm_reads(agent) -> None:
    from runs.days import open_day

    day, _ = open_day(principal=agent.principal)
    other, _ = open_day(principal=agent.principal, day=day.date - timedelta(days=1))
    with CaptureQueriesContext(connection) as seen:
        written = sql.insert_under(_entry(agent.principal), "day", date=day.date)
    assert written is not None and written.pk is not None and not written._state.adding
    # One statement on PostgreSQL (the day's lookup and the insert that selects its key); SQLite:
    # the lookup, then the insert.
    assert len(seen.captured_queries) == (1 if connection.vendor == "postgresql" else 2)
    stored = ProgressEntry.objects.select_related("day").get(pk=written.pk)
    assert _fields(stored) == _fields(written) and stored.day_id == day.pk != other.pk
    # The parent came with the insert, as the ORM reads it (converters included: a date, datetimes).
    with CaptureQueriesContext(connection) as seen:
        attached = written.day
    assert seen.captured_queries == []
    assert _loaded(attached) == _loaded(stored.day)


def test_insert_under_a_missing_parent_inserts_nothing_and_the_transaction_goes_on(agent) -> None:
    from runs.days import open_day

    day, _ = open_day(principal=agent.principal)
    with transaction.atomic():
        entry = _entry(agent.principal)
        assert sql.insert_under(entry, "day", date=day.date + timedelta(days=3)) is None
        assert entry.pk is None and entry._state.adding and entry.day_id is None
        assert ProgressEntry.objects.count() == 0
        # No error was raised: the transaction is still usable.
        assert sql.insert_under(_entry(agent.principal), "day", date=day.date) is not None
    assert ProgressEntry.objects.count() == 1


def test_insert_under_looks_the_parent_up_only_by_a_unique_key(agent) -> None:
    from runs.days import open_day

    open_day(principal=agent.principal)
    for lookup in ({"state": "open"}, {"opened_by": agent.principal}, {"date": None, "state": "open"}):
        with pytest.raises(ValueError, match="unique key"):
            sql.insert_under(_entry(agent.principal), "day", **lookup)
    assert ProgressEntry.objects.count() == 0


def test_a_claim_with_a_child_writes_both_or_neither(agent) -> None:
    from runs.models import OperatorDay

    today = timezone.localdate()

    def day() -> OperatorDay:
        return OperatorDay(date=today, opened_at=timezone.now(), opened_by=agent.principal, opened_via="t")

    first, entry = day(), _entry(agent.principal, "first")
    with CaptureQueriesContext(connection) as seen:
        assert insert_unless_conflict(first, "date", child=(entry, "day")) is True
    # PostgreSQL: one statement (the claim and the child selecting its key); SQLite: two.
    assert len(seen.captured_queries) == (1 if connection.vendor == "postgresql" else 2)
    assert (
        first.pk is not None and entry.pk is not None and not first._state.adding and not entry._state.adding
    )
    assert entry.day is first and entry.day_id == first.pk
    assert _fields(OperatorDay.objects.get(pk=first.pk)) == _fields(first)
    assert _fields(ProgressEntry.objects.get(pk=entry.pk)) == _fields(entry)
    with transaction.atomic():
        loser, orphan = day(), _entry(agent.principal, "loser")
        assert insert_unless_conflict(loser, "date", child=(orphan, "day")) is False
        assert loser.pk is None and orphan.pk is None and orphan._state.adding
        # No error: the transaction goes on, and the loser's child was never written.
        assert list(ProgressEntry.objects.values_list("summary", flat=True)) == ["first"]
    with pytest.raises(TypeError, match="foreign key"):
        insert_unless_conflict(day(), "date", child=(_entry(agent.principal), "recorded_by"))


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


def test_an_async_commit_insert_writes_what_the_orm_reads_back(agent) -> None:
    row = AuditEvent(
        principal_id=agent.principal.pk,
        tool="operator_list_directives",
        outcome="ok",
        duration_ms=1.5,
        args_sha256="0" * 64,
        claimed_actor={"who": "me", "n": [1, 2]},
    )
    sql.insert_async_commit(row)
    assert row.pk is not None and not row._state.adding
    assert _fields(AuditEvent.objects.get(pk=row.pk)) == _fields(row)


def _synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_async_commit_is_the_rows_own_and_never_a_later_writes(agent) -> None:
    """The setting is local to the row's own one-statement transaction: the connection's next
    transaction (a durable write) commits with the flush again; inside a caller's transaction the
    row is a plain insert and the caller's commit stays durable."""
    from django.db import DataError, transaction

    def row(tool: str = "t") -> AuditEvent:
        return AuditEvent(principal_id=agent.principal.pk, tool=tool, outcome="ok", duration_ms=0.0)

    assert _synchronous_commit() == "on"
    with CaptureQueriesContext(connection) as queries:
        sql.insert_async_commit(row())
    (statement,) = [q["sql"] for q in queries.captured_queries]
    assert "set_config('synchronous_commit', 'off', true)" in statement and ";" not in statement
    assert _synchronous_commit() == "on"
    with transaction.atomic():
        sql.insert_async_commit(row())
        assert _synchronous_commit() == "on"
    # A value its column refuses is refused as the ORM's insert refuses it (the cast keeps no
    # length): nothing written, the connection usable.
    before = AuditEvent.objects.count()
    with pytest.raises(DataError):
        sql.insert_async_commit(row(tool="x" * 500))
    assert AuditEvent.objects.count() == before and _synchronous_commit() == "on"


# --- the bearer check and the rate count ------------------------------------------------------------
def test_the_principal_and_its_count_are_what_the_orm_reads(make_principal) -> None:
    holder = make_principal("counted")
    from operator_site.face.auth import digest

    found, counted = sql.principal_and_count(digest(holder.token), 77)
    assert _fields(found) == _fields(Principal.objects.get(pk=holder.principal.pk))
    assert counted == (1, 77)
    assert sql.principal_and_count(digest(holder.token), 77)[1] == (2, 77)
    assert sql.principal_and_count(digest(holder.token), 78)[1] == (1, 78)  # a new window starts at 1
    assert sql.principal_and_count(digest(holder.token), 76)[1] == (2, 78)  # a late clock never resets
    stored = RateCounter.objects.get(principal=holder.principal)
    assert (stored.count, stored.window_no) == (2, 78)
    assert sql.principal_and_count("f" * 64, 78) == (None, None)
    assert sql.principal_and_count(digest(holder.token), None)[1] is None  # the limit off: no count


def test_an_inactive_principal_is_found_but_never_counted(make_principal) -> None:
    holder = make_principal("sleeper")
    Principal.objects.filter(pk=holder.principal.pk).update(active=False)
    from operator_site.face.auth import digest

    found, counted = sql.principal_and_count(digest(holder.token), 5)
    assert found is not None and found.active is False and counted is None
    assert not RateCounter.objects.filter(principal=holder.principal).exists()


def test_the_bearer_check_and_the_count_are_one_statement_on_postgresql(make_principal, settings) -> None:
    holder = make_principal("one-trip")
    settings.OPERATOR_RATE_LIMIT = 100
    from operator_site.face.ratelimit import authenticate_and_admit

    authenticate_and_admit(holder.token)  # refreshes last_used_at once
    with CaptureQueriesContext(connection) as seen:
        principal, verdict = authenticate_and_admit(holder.token)
    assert principal is not None and verdict is not None and verdict.count == 2
    assert len(seen) == (1 if connection.vendor == "postgresql" else 2), seen.captured_queries


# --- the other named statements ---------------------------------------------------------------------
def test_max_value_is_the_orm_aggregate() -> None:
    assert sql.max_value(Notification, "id") is None
    for i in range(3):
        Notification.objects.create(kind="k", title=f"t{i}")
    assert sql.max_value(Notification, "id") == Notification.objects.aggregate(m=Max("id"))["m"]


def test_a_budget_slot_is_taken_until_the_cap() -> None:
    assert [sql.take_budget_slot("mail", 10, 2) for _ in range(3)] == [1, 2, None]
    assert sql.take_budget_slot("mail", 11, 2) == 1
    assert NotificationBudget.objects.get(kind="mail", hour=10).used == 2


def _directives_in_force(now: Any) -> Any:
    return Directive.objects.active(now)


def _progress_after(since: Any, after_id: Any, outcome: Any) -> Any:
    return ProgressEntry.objects.filter(created_at__gte=since, id__gt=after_id, outcome=outcome).order_by(
        "-id"
    )


def test_instances_are_the_rows_of_the_orm_rule_compiled_once(agent) -> None:
    now = timezone.now()
    Directive.objects.create(kind="quiet", expires_at=now + timedelta(hours=2), set_by=agent.principal)
    Directive.objects.create(kind="quiet", expires_at=now + timedelta(hours=1), set_by=agent.principal)
    Directive.objects.create(
        kind="quiet",
        created_at=now - timedelta(hours=1),
        expires_at=now - timedelta(minutes=1),
        set_by=agent.principal,
    )
    Directive.objects.create(
        kind="quiet", expires_at=now + timedelta(hours=3), set_by=agent.principal, cleared_at=now
    )
    seen = []
    for at in (now, now + timedelta(minutes=90), now - timedelta(hours=2), now + timedelta(days=1)):
        with CaptureQueriesContext(connection) as queries:
            raw = sql.instances(_directives_in_force, now=at)
        orm = list(Directive.objects.active(at).order_by("expires_at", "id"))
        assert [_fields(d) for d in raw] == [_fields(d) for d in orm]
        assert len(queries) == 1
        seen.append(len(raw))
    assert seen == [2, 1, 3, 0]
    # Datetimes, integers and text bound per call, in the order the ORM compiled them.
    from runs.records import record_progress

    outcomes = ("done", "done", "partial")
    made = [
        record_progress(principal=agent.principal, summary=f"s{i}", outcome=o) for i, o in enumerate(outcomes)
    ]
    for since, after, outcome in ((now - timedelta(hours=1), 0, "done"), (now, made[0].pk, "done")):
        orm = list(_progress_after(since, after, outcome))
        raw = sql.instances(_progress_after, since=since, after_id=after, outcome=outcome)
        assert [_fields(e) for e in raw] == [_fields(e) for e in orm] and all(
            type(e) is ProgressEntry for e in raw
        )
    with pytest.raises(TypeError):
        sql.instances(lambda when: Directive.objects.active(now), when=now)  # a closure: refused
    # Rows of one model only: nothing joined or added that the instances would have to carry.
    for builder in (_progress_with_its_day, _progress_ranked):
        with pytest.raises(ValueError, match="one model's rows"):
            sql.instances(builder, since=now)


def _progress_with_its_day(since: Any) -> Any:
    return ProgressEntry.objects.filter(created_at__gte=since).select_related("day")


def _progress_ranked(since: Any) -> Any:
    from django.db.models import Value

    return ProgressEntry.objects.filter(created_at__gte=since).annotate(rank=Value(1))


@pytest.mark.django_db(transaction=True)
def test_an_advisory_lock_is_named_and_held_until_the_transaction_ends() -> None:
    """One key scheme: a lock's name, through `lock_key`. On SQLite there is nothing to take."""
    held_sql = (
        "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks "
        "WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
    )

    def held() -> set[int]:
        if connection.vendor != "postgresql":
            return set()
        with connection.cursor() as cursor:
            cursor.execute(held_sql)
            return {row[0] for row in cursor.fetchall()}

    assert sql.lock_key("operator.test") == sql.lock_key("operator.test") > 0
    with transaction.atomic():
        sql.advisory_xact_lock("operator.test")
        inside = held()
    assert inside == ({sql.lock_key("operator.test")} if connection.vendor == "postgresql" else set())
    assert held() == set()


def test_capped_figures_count_up_to_the_cap() -> None:
    for i in range(5):
        Notification.objects.create(kind="k", title=f"t{i}", safety=i % 2 == 0)
    figures = sql.capped_figures(
        {"all": Notification.objects.all(), "safety": Notification.objects.filter(safety=True)},
        {"newest": Notification.objects.order_by("-id").values("id")},
        cap=3,
    )
    assert figures == {"all": 4, "safety": 3, "newest": Notification.objects.aggregate(m=Max("id"))["m"]}


@pytest.mark.parametrize("cap", [3, 4, 5, 6, 20])
def test_a_breakdown_counts_what_a_capped_count_of_each_part_counts(cap: int) -> None:
    """One scan of at most cap + 1 rows, or, past the cap, each part counted on its own: either
    way each figure equals its own capped count (5 rows: below, at and past the cap)."""
    from django.db.models import Q

    for i in range(5):
        Notification.objects.create(kind=f"k{i % 2}", title=f"t{i}", safety=i % 2 == 0)
    rows = Notification.objects.order_by("-id")
    parts = {
        "safety": Q(safety=True),
        "k1": Q(kind="k1"),
        "none": Q(kind="nothing"),
        "k1_or_safety": Q(kind="k1") | Q(safety=True),
    }
    counts = {"alone_total": rows, **{f"alone_{name}": rows.filter(q) for name, q in parts.items()}}
    figures = sql.capped_figures(
        {"total": sql.Breakdown(rows, parts), **counts},
        {"newest": Notification.objects.order_by("-id").values("id")},
        cap=cap,
    )
    expected = {name: min(Notification.objects.filter(q).count(), cap + 1) for name, q in parts.items()}
    assert {name: figures[name] for name in parts} == expected
    assert figures["total"] == min(5, cap + 1) == figures["alone_total"]
    assert all(figures[name] == figures[f"alone_{name}"] for name in parts)
    assert figures["newest"] == Notification.objects.aggregate(m=Max("id"))["m"]


def test_a_breakdown_past_its_cap_counts_each_part_on_its_own() -> None:
    """Past the cap the scan saw only some rows: a part whose rows are mostly outside them is
    still counted in full (up to the cap), not as the few the scan saw."""
    from django.db.models import Q

    for i in range(6):
        Notification.objects.create(kind="old" if i < 4 else "new", title=f"t{i}")
    newest_first = Notification.objects.order_by("-id")  # the scan of 3 rows sees "new", "new", "old"
    figures = sql.capped_figures({"all": sql.Breakdown(newest_first, {"old": Q(kind="old")})}, {}, cap=2)
    assert figures == {"all": 3, "old": 3}  # "old" capped at 3 on its own, not 1 from the scan
    figures = sql.capped_figures({"all": sql.Breakdown(newest_first, {"old": Q(kind="old")})}, {}, cap=10)
    assert figures == {"all": 6, "old": 4}


def test_tuples_are_the_values_list(agent) -> None:
    for i in range(3):
        Notification.objects.create(kind="k", title=f"t{i}")
    assert sql.tuples(_notification_titles, 2) == list(_notification_titles(2))


def _notification_titles(limit: int) -> Any:
    return Notification.objects.order_by("-id").values_list("id", "title")[:limit]


def test_a_builder_with_a_closure_is_refused() -> None:
    limit = 3
    with pytest.raises(TypeError, match="no closure"):
        sql.compiled(lambda: Notification.objects.all()[:limit])


# --- many lists in one statement --------------------------------------------------------------------
def _loaded(obj: Any, depth: int = 1) -> tuple[Any, ...]:
    """Everything an instance read from the database holds: its attributes in their order, with
    their types (the field values, an annotation), and its `_state` in its order, with the related
    rows cached there (described to `depth`, then by type and key)."""
    attrs = [(name, type(value), value) for name, value in vars(obj).items() if name != "_state"]
    state = []
    for name, value in vars(obj._state).items():
        if name == "fields_cache":
            value = {
                key: None if rel is None else (_loaded(rel, depth - 1) if depth else (type(rel), rel.pk))
                for key, rel in value.items()
            }
        state.append((name, value))
    return type(obj), attrs, state


def _same(
    found: list[Any], expected: list[Any], related: tuple[str, ...] = (), annotations: tuple[str, ...] = ()
) -> None:
    assert [r.get_deferred_fields() for r in found] == [r.get_deferred_fields() for r in expected]
    assert [_fields(r) for r in found] == [_fields(r) for r in expected]
    for got, want in zip(found, expected, strict=True):
        for name in related:
            mine, theirs = getattr(got, name), getattr(want, name)
            assert (mine is None) == (theirs is None)
            if mine is not None:
                assert _fields(mine) == _fields(theirs)
        for name in annotations:
            assert getattr(got, name) == getattr(want, name)
    # And nothing else differs: the same attributes in the same order, the same state, the same
    # related rows cached (as the ORM's select_related caches them, None for a null relation).
    assert [_loaded(r) for r in found] == [_loaded(r) for r in expected]


def test_every_list_of_the_packet_reads_what_the_orm_reads(agent, owner, django_assert_num_queries) -> None:
    from tests.test_reads import some_of_everything

    some_of_everything(agent.principal, owner.principal)
    now = timezone.now()
    _, end = reads.day_bounds(reads.check_date(None, now))
    from goals.goal_model import ordered_priorities_query, project_list_query, ranked_goals_query
    from runs.lock import last_finished_query, running_run_query

    task_ids = tuple(Task.objects.values_list("id", flat=True))
    cases = {
        "day": (Rows(reads._day_row, (reads.check_date(None, now),)), ()),
        "goals": (Rows(ranked_goals_query, (("active",), 10)), ()),
        "priorities": (Rows(ordered_priorities_query, (10,)), ()),
        "projects": (Rows(project_list_query, (("active",), None, 10)), ("goal",)),
        "decisions": (Rows(reads._open_decisions, (10,)), ("decided_by",)),
        "approvals": (Rows(reads._pending_approvals, (10,)), ()),
        "approval_decisions": (Rows(reads._decisions_of_pending_approvals, (10,)), ()),
        "directives": (Rows(reads._directives_in_force, values={"now": now}), ()),
        "high": (Rows(reads._high_stakes_beliefs, (25,)), ()),
        "low": (Rows(reads._low_stakes_beliefs, (10,)), ()),
        "progress": (Rows(reads._recent_progress, (end, 8)), ("day", "recorded_by")),
        "observations": (Rows(reads._recent_observations, (end, 8)), ("day", "recorded_by")),
        "running_run": (Rows(running_run_query), ("holder", "day")),
        "last_finished_run": (Rows(last_finished_query), ("holder", "day", "ended_by")),
        "tasks": (Rows(reads._shown_tasks, values={"ids": task_ids}), ("updated_by", "goal", "project")),
    }
    # One statement on PostgreSQL; one per list on SQLite (sql.many._select).
    with django_assert_num_queries(1 if connection.vendor == "postgresql" else len(cases)):
        found, figures = sql.read_many({name: rows for name, (rows, _) in cases.items()})
    assert figures == {}
    nonempty = {name for name, rows in found.items() if rows}
    # Every kind of row is there (so every converter ran), not only empty lists compared.
    assert nonempty >= {
        "goals",
        "priorities",
        "projects",
        "decisions",
        "approvals",
        "approval_decisions",
        "high",
        "low",
        "progress",
        "observations",
        "tasks",
    }, nonempty
    for name, (rows, related) in cases.items():
        expected = list(rows.build(*rows.args, **rows.values))
        annotations = ("rank",) if name == "tasks" else ()
        if name == "tasks":
            found[name].sort(key=lambda t: t.id)
            expected.sort(key=lambda t: t.id)
        _same(found[name], expected, related, annotations)
    # Reading an attached relation asks nothing more (the rows came with the list).
    with django_assert_num_queries(0):
        for row in found["progress"] + found["observations"]:
            assert row.day.date and row.recorded_by.name
    # `.only()` reads some fields: the database sends only those (the others stay deferred, as the
    # ORM leaves them; reading one would be a query).
    assert found["tasks"][0].get_deferred_fields() >= {"created_at", "created_by_id"}
    assert found["tasks"][0].updated_by.get_deferred_fields(), "a principal's every field was read"


def test_read_many_carries_json_booleans_floats_and_nulls(agent) -> None:
    from runs.records import record_observation

    record_observation(
        principal=agent.principal,
        kind="world",
        summary="s",
        data={"nested": {"a": [1, 2.5, None, True, "x"]}, "n": 1.0, "none": None, "text": 'ü\n"'},
    )
    found, _ = sql.read_many({"o": Rows(reads._recent_observations, (timezone.now() + timedelta(days=1), 5))})
    expected = list(reads._recent_observations(timezone.now() + timedelta(days=1), 5))
    _same(found["o"], expected, ("day", "recorded_by"))
    assert found["o"][0].data == expected[0].data


def _packet_lists(monkeypatch: Any) -> dict[str, Rows]:
    """The lists the packet reads (spied on `sql.read_many`)."""
    seen: dict[str, Rows] = {}
    real = sql.read_many

    def spy(lists: Any, **kwargs: Any) -> Any:
        seen.update(lists)
        return real(lists, **kwargs)

    monkeypatch.setattr(sql, "read_many", spy)
    reads.context_packet()
    monkeypatch.setattr(sql, "read_many", real)
    return seen


def test_the_fast_instances_are_what_from_db_builds_for_every_model_the_packet_reads(
    agent, owner, monkeypatch
) -> None:
    """`loading.loader` builds instances without `Model.__init__`: for every model the packet reads
    (its lists' and their select_related rows'), an instance built from a row's values is
    `from_db`'s in every attribute, in order, and in its `_state`. If Django changes what
    `from_db` sets, this fails (not an answer); if it changes a field's descriptor, the shortcut
    turns itself off and the first assertion says so."""
    from operator_site.sql import loading
    from operator_site.sql.many import _list_plan_of
    from tests.test_reads import some_of_everything

    some_of_everything(agent.principal, owner.principal)
    # Every model with every field, and with the fields a list reads (`.only()`: the rest deferred).
    read: set[tuple[Any, tuple[str, ...]]] = set()
    for rows in _packet_lists(monkeypatch).values():
        plan, _ = _list_plan_of(connection, rows)
        read |= {(plan.model, plan.attnames)} | {(target, names) for _, target, names, _ in plan.related}
    read |= {(model, loading.all_attnames(model)) for model, _ in read}
    assert len({model for model, _ in read}) >= 12, read
    assert any(names != loading.all_attnames(model) for model, names in read), "no list reads some fields"
    for model, attnames in sorted(read, key=lambda r: (r[0].__name__, r[1])):
        assert loading._shortcut(model, attnames) is not None, f"{model.__name__}: built by from_db (slower)"
        rows = list(model._base_manager.order_by("pk").values_list(*attnames)[:5])
        assert rows, f"no {model.__name__} to compare"
        for values in rows:
            fast = loading.loader(model, attnames)(connection.alias, list(values))
            orm = model.from_db(connection.alias, attnames, list(values))
            assert _loaded(fast) == _loaded(orm), model.__name__
            assert fast.get_deferred_fields() == orm.get_deferred_fields()
            assert fast == orm and hash(fast) == hash(orm)
        # A null foreign key leaves no cache on the state; a value makes an empty one (both as
        # Model.__init__ does).
        by_attname = {f.attname: f for f in model._meta.concrete_fields}
        nulls = [None if by_attname[a].null else v for a, v in zip(attnames, rows[0], strict=True)]
        fast = loading.loader(model, attnames)(connection.alias, nulls)
        assert _loaded(fast) == _loaded(model.from_db(connection.alias, attnames, nulls)), model.__name__


def test_a_model_with_an_init_receiver_is_built_by_from_db(agent) -> None:
    from django.db.models.signals import post_init, pre_init

    now = timezone.now()
    directive = Directive.objects.create(
        kind="quiet", expires_at=now + timedelta(hours=1), set_by=agent.principal
    )
    for signal in (pre_init, post_init):
        seen: list[Any] = []

        def receiver(sender: Any, seen: list[Any] = seen, **kwargs: Any) -> None:
            seen.append(kwargs.get("instance", sender))

        signal.connect(receiver, sender=Directive)
        try:
            found = sql.read_many({"d": Rows(_directives_by_id, values={"ids": (directive.pk,)})})[0]["d"]
        finally:
            signal.disconnect(receiver, sender=Directive)
        assert len(seen) == 1 and [d.pk for d in found] == [directive.pk]
        if signal is post_init:
            assert seen[0] is found[0]


def test_statements_write_only_code_constants_into_the_text() -> None:
    from goals.models import Goal
    from intents.models import IntentStatus
    from operator_site.sql.many import _statement

    sql_text = "SELECT a FROM t WHERE s = %s AND k = %s AND n = %s AND p LIKE %s AND d < %s"
    params = [IntentStatus.PENDING_APPROVAL, "pending_approval", 3, "%x", "2026-01-01"]
    constants = tuple((i, p) for i, p in enumerate(params) if isinstance(p, models.Choices))
    # The enumeration member is written in; the same word as a plain string (it could be input),
    # the number, the pattern and the date stay bound: named on SQLite, PostgreSQL's own `$n` for
    # psycopg's RawCursor, "%s" where Django's cursor converts them.
    text, kept, names, count = _statement(sql_text, constants, style="named")
    assert text == (
        "SELECT a FROM t WHERE s = 'pending_approval' AND k = %(p0)s AND n = %(p1)s "
        "AND p LIKE %(p2)s AND d < %(p3)s"
    )
    assert kept == (1, 2, 3, 4) and names == ("p0", "p1", "p2", "p3") and count == 5
    text, kept, _, count = _statement(sql_text, constants, style="native")
    assert (
        text == "SELECT a FROM t WHERE s = 'pending_approval' AND k = $1 AND n = $2 AND p LIKE $3 AND d < $4"
    )
    assert kept == (1, 2, 3, 4) and count == 5
    text, kept, _, count = _statement(sql_text, constants, style="format")
    assert (
        text == "SELECT a FROM t WHERE s = 'pending_approval' AND k = %s AND n = %s AND p LIKE %s AND d < %s"
    )
    assert kept == (1, 2, 3, 4) and count == 5
    # Any other "%" in the text: sent as it is.
    for other in ("SELECT %s, 100 %% 7", "SELECT %s, '%d'", "SELECT '%%s', %s"):
        assert all(_statement(other, (), style=style) is None for style in ("named", "native", "format"))
    # A member whose value is not a plain word is bound like any value.
    odd = models.TextChoices("Odd", {"QUOTE": "it's"})
    text, kept, _, _ = _statement("SELECT %s, %s", ((0, odd.QUOTE), (1, Goal.Status.ACTIVE)), style="named")
    assert text == "SELECT %(p0)s, 'active'" and kept == (0,)
    text, kept, _, _ = _statement("SELECT %s, %s, %s", ((1, Goal.Status.ACTIVE),), style="native")
    assert text == "SELECT $1, 'active', $2" and kept == (0, 2)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's statements")
def test_the_packet_binds_every_value_that_is_not_a_constant_of_the_code(agent, owner) -> None:
    from tests.test_reads import some_of_everything

    some_of_everything(agent.principal, owner.principal)
    sent: list[tuple[str, Any]] = []

    def record(execute: Any, sql_text: str, params: Any, many: bool, context: Any) -> Any:
        sent.append((sql_text, params))
        return execute(sql_text, params, many, context)

    with connection.execute_wrapper(record):
        reads.context_packet()
    lists = [(text, params) for text, params in sent if "json_group_array" in text]
    assert len(lists) == 15
    for text, params in lists:
        assert isinstance(params, dict) and not re.search(r"(?<!%)%s", text)
        assert not any(isinstance(v, models.Choices) for v in params.values())
    # The ids of the tasks shown are bound (data, not code), padded to one shape.
    shown = Task.objects.filter(status__in=Task.OPEN_STATUSES).values_list("id", flat=True)
    (bound,) = [list(p.values()) for text, p in lists if '"goals_task"."id" IN' in text]
    most = reads.LIMITS.lanes * reads.LIMITS.tasks_per_lane
    assert set(bound[-most:]) == set(shown)  # the last placeholders: the ids of `id IN (…)`


def _packet_statements_prepared() -> int:
    with connection.cursor() as cursor:
        # (Not this statement: psycopg prepares it too once it runs often enough.)
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements "
            "WHERE statement LIKE '%%json_agg%%' AND statement NOT LIKE '%%pg_prepared_statements%%'"
        )
        return cursor.fetchone()[0]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_packets_statement_is_prepared_at_its_first_run_and_again_after_a_rollback(agent, owner) -> None:
    """psycopg deallocates every prepared statement of a connection after any rollback; the
    packet's one statement (the costliest to parse and plan) is prepared by its first run, then and
    after each rollback, not by its third (the connection's prepare_threshold)."""
    from tests.test_reads import some_of_everything

    some_of_everything(agent.principal, owner.principal)
    assert not connection.queries_logged  # the statement goes through psycopg's RawCursor
    assert _packet_statements_prepared() == 0
    reads.context_packet()
    assert _packet_statements_prepared() == 1
    # A rolled-back transaction (a refused write): psycopg deallocates what it had prepared.
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        Task.objects.count()
        raise ZeroDivisionError
    assert _packet_statements_prepared() == 0
    reads.context_packet()
    assert _packet_statements_prepared() == 1
    reads.context_packet()  # the prepared statement is run again, not prepared a second time
    assert _packet_statements_prepared() == 1


# --- a versioned model's write (sql/versions.py) ---------------------------------------------------
def _version(principal: Any, number: int, **extra: Any) -> Any:
    from beliefs.models import WorldModelVersion

    return WorldModelVersion(
        number=number, supersedes=number - 1, principal=principal, actor=principal.name, **extra
    )


def _belief(principal: Any, key: str, **extra: Any) -> Any:
    from beliefs.models import Belief

    values = {
        "kind": "note",
        "key": key,
        "value": "v",
        "source_principal": principal,
        "source_name": principal.name,
        "source_kind": principal.kind,
        "set_in_version": 1,
        "last_version": 1,
        **extra,
    }
    return Belief.objects.create(**values)


def test_read_after_lock_is_the_orm_maximum_and_rows(agent) -> None:
    from beliefs.models import Belief, WorldModelVersion

    lock = "operator.test"
    assert sql.read_after_lock(lock, WorldModelVersion, "number") == (None, [])
    keys = [("note", "a"), ("note", "b"), ("risk", "a")]
    assert sql.read_after_lock(lock, WorldModelVersion, "number", Belief, ("kind", "key"), keys) == (None, [])
    insert_row(_version(agent.principal, 1))
    # Floats, nulls, datetimes, foreign keys: every converter matters.
    _belief(agent.principal, "a", confidence=0.5)
    _belief(agent.principal, "b", status="retired", evidence_span="said so")
    _belief(agent.principal, "c")
    top, rows = sql.read_after_lock(lock, WorldModelVersion, "number", Belief, ("kind", "key"), keys)
    assert top == WorldModelVersion.objects.aggregate(m=Max("number"))["m"] == 1
    expected = Belief.objects.filter(kind="note", key__in=["a", "b"]).order_by("key")
    assert [_fields(r) for r in sorted(rows, key=lambda r: r.key)] == [_fields(r) for r in expected]
    assert all(not r._state.adding for r in rows)
    _, one = sql.read_after_lock(lock, WorldModelVersion, "number", Belief, ("kind", "key"), [("note", "c")])
    assert [r.key for r in one] == ["c"]


def test_read_after_lock_also_finds_rows_another_way_in_the_same_read(agent) -> None:
    """`also_fields`/`also_keys` (the world model's look-alike probe): the rows either way finds, each
    once — a row found both ways included — and the ORM's answer to the same question."""
    from beliefs.models import Belief, WorldModelVersion

    lock = "operator.test"
    insert_row(_version(agent.principal, 1))
    _belief(agent.principal, "a", key_alike="x")
    _belief(agent.principal, "b", key_alike="x")
    _belief(agent.principal, "c", key_alike="y")
    _belief(agent.principal, "d", key_alike="x", kind="risk")
    read = functools.partial(sql.read_after_lock, lock, WorldModelVersion, "number", Belief, ("kind", "key"))
    top, rows = read([("note", "a")], ("kind", "key_alike"), [("note", "x")])
    expected = Belief.objects.filter(Q(kind="note", key="a") | Q(kind="note", key_alike="x"))
    assert top == 1
    assert sorted(r.key for r in rows) == sorted(expected.values_list("key", flat=True)) == ["a", "b"]
    _, rows = read([("note", "c")], ("kind", "key_alike"), [("note", "x"), ("risk", "x"), ("note", "z")])
    found = sorted((r.kind, r.key) for r in rows)
    assert found == [("note", "a"), ("note", "b"), ("note", "c"), ("risk", "d")]
    _, rows = read([], ("kind", "key_alike"), [("note", "y")])
    assert [r.key for r in rows] == ["c"]
    _, rows = read([("note", "zz")], ("kind", "key_alike"), [("note", "zz")])
    assert rows == []


@pytest.mark.django_db(transaction=True)
def test_read_after_lock_is_one_round_trip_holding_the_lock(agent) -> None:
    from beliefs.models import WorldModelVersion

    held_sql = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
    with transaction.atomic(), CaptureQueriesContext(connection) as seen:
        sql.read_after_lock("operator.test", WorldModelVersion, "number")
        statements = len(seen)
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(held_sql)
                assert cursor.fetchone()[0] == 1
    assert statements == 1  # PostgreSQL: the lock and the read, one message


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_read_after_the_lock_sees_the_writer_that_held_it(agent) -> None:
    """The lock and the read travel as one message, but the read is a statement of its own: under
    READ COMMITTED its snapshot is taken once the lock is granted, so it sees what the writer that
    held the lock committed (a read folded into the lock's statement would see what was there
    before the wait)."""
    import threading
    import time as clock

    from beliefs.models import Belief, WorldModelVersion

    if connection.vendor != "postgresql":
        pytest.skip("the queue exists on PostgreSQL only")
    lock, keys = "operator.test.queue", [("note", "held")]
    holding, go_on = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def holder() -> None:
        try:
            with transaction.atomic():
                sql.read_after_lock(lock, WorldModelVersion, "number", Belief, ("kind", "key"), keys)
                insert_row(_version(agent.principal, 1))
                _belief(agent.principal, "held", value="written under the lock")
                holding.set()
                go_on.wait(timeout=30)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    assert holding.wait(timeout=30)
    waited: dict[str, Any] = {}

    def release_soon() -> None:
        clock.sleep(0.5)
        waited["released"] = clock.monotonic()
        go_on.set()

    threading.Thread(target=release_soon).start()
    with transaction.atomic():
        top, rows = sql.read_after_lock(lock, WorldModelVersion, "number", Belief, ("kind", "key"), keys)
        answered = clock.monotonic()
    thread.join(timeout=30)
    assert errors == []
    assert answered >= waited["released"]  # it queued behind the holder
    assert top == 1 and [r.value for r in rows] == ["written under the lock"]


def test_a_claim_writes_its_rows_and_updates_with_it(agent) -> None:
    from beliefs.models import Belief, WorldModelChange, WorldModelVersion

    kept = _belief(agent.principal, "kept", value="old", confidence=0.25)
    untouched = _fields(_belief(agent.principal, "untouched"))
    version = _version(agent.principal, 1, summary="first", evidence={"span": "said"})
    rows = [
        WorldModelChange(version=version, entity=f"note/{k}", before=before, after={"key": k, "n": [1, 2.5]})
        for k, before in (("a", None), ("kept", {"key": "kept", "value": "old"}))
    ]
    new = Belief(
        kind="note",
        key="a",
        value="new",
        source_principal=agent.principal,
        source_name="scout",
        source_kind="agent",
        set_in_version=1,
        last_version=1,
    )
    later = timezone.now() + timedelta(minutes=5)
    changed = sql.Update(
        Belief,
        {
            "value": "new",
            "confidence": None,
            "evidence_span": "x" * 300,
            "last_version": 1,
            "updated_at": later,
        },
        {"kind": "note", "key": "kept"},
    )
    with CaptureQueriesContext(connection) as seen:
        assert sql.insert_claiming(version, "number", [*rows, new], [changed]) == [1]
    # PostgreSQL: one statement. SQLite: the claim, each model's rows, the update.
    assert len(seen) == (1 if connection.vendor == "postgresql" else 4), seen.captured_queries
    assert not version._state.adding and not new._state.adding
    assert _fields(WorldModelVersion.objects.get(number=1)) == _fields(version)
    stored = WorldModelChange.objects.order_by("entity")
    assert [(c.version_id, c.entity, c.before, c.after) for c in stored] == [
        (1, r.entity, r.before, r.after) for r in rows
    ]
    added = Belief.objects.get(key="a")
    assert {k: v for k, v in _fields(added).items() if k not in {"id", "updated_at"}} == {
        k: v for k, v in _fields(new).items() if k not in {"id", "updated_at"}
    }
    # What the ORM's update() would have left.
    Belief.objects.filter(pk=kept.pk).update(value="orm")
    expected = {**_fields(kept), **{k: v for k, v in changed.values.items()}}
    assert _fields(Belief.objects.get(pk=kept.pk)) == {**expected, "value": "orm"}
    assert _fields(Belief.objects.get(key="untouched")) == untouched
    assert sql.update_rows(changed) == 1
    assert sql.update_rows(sql.Update(Belief, {"value": "x"}, {"kind": "note", "key": "absent"})) == 0


def test_a_lost_claim_writes_nothing_and_the_transaction_goes_on(agent) -> None:
    from beliefs.models import Belief, WorldModelChange, WorldModelVersion

    _belief(agent.principal, "kept", value="old")
    with transaction.atomic():
        assert sql.insert_claiming(_version(agent.principal, 1, summary="winner"), "number") == []
        loser = _version(agent.principal, 1, summary="loser")
        row = WorldModelChange(version=loser, entity="note/x", before=None, after={"key": "x"})
        changed = sql.Update(Belief, {"value": "lost"}, {"kind": "note", "key": "kept"})
        assert sql.insert_claiming(loser, "number", [row], [changed]) is None
        assert loser._state.adding and row._state.adding
        # No error: the transaction is still usable.
        assert WorldModelVersion.objects.get(number=1).summary == "winner"
    assert not WorldModelChange.objects.exists()
    assert Belief.objects.get(key="kept").value == "old"


def test_only_the_claimed_key_decides_another_constraint_still_refuses(agent) -> None:
    from beliefs.models import Belief, WorldModelChange, WorldModelVersion

    insert_row(_version(agent.principal, 1))
    gapped = WorldModelVersion(number=3, supersedes=1, principal=agent.principal, actor="scout")
    row = WorldModelChange(version=gapped, entity="note/x", before=None, after={"key": "x"})
    with pytest.raises(IntegrityError), transaction.atomic():
        sql.insert_claiming(gapped, "number", [row])
    assert list(WorldModelVersion.objects.values_list("number", flat=True)) == [1]
    # A value too long for its column is refused as the ORM's insert refuses it, not cut to fit
    # (PostgreSQL; SQLite does not check a varchar's length).
    if connection.vendor == "postgresql":
        long = WorldModelChange(version=_version(agent.principal, 2), entity="e" * 251, before=None, after={})
        with pytest.raises(DataError), transaction.atomic():
            sql.insert_claiming(long.version, "number", [long])
        too_long = sql.Update(Belief, {"status": "s" * 9}, {"kind": "note", "key": "k"})
        with pytest.raises(DataError), transaction.atomic():
            sql.insert_claiming(_version(agent.principal, 2), "number", [], [too_long])
    assert list(WorldModelVersion.objects.values_list("number", flat=True)) == [1]


def test_insert_rows_writes_what_the_orm_reads_back(agent) -> None:
    rows = [_notice(f"k{i}", f"t{i}") for i in range(7)]
    with CaptureQueriesContext(connection) as seen:
        sql.insert_rows(rows)
    assert len(seen) == 1
    stored = list(Notification.objects.order_by("id"))
    assert [(n.dedupe_key, n.title) for n in stored] == [(r.dedupe_key, r.title) for r in rows]
    assert all(not r._state.adding for r in rows)
    sql.insert_rows([])  # nothing to write: no statement
    with pytest.raises(TypeError):
        sql.insert_rows([_notice("z"), Principal(name="p", kind="agent")])


# --- no private internals ---------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    path
    for app in ("operator_site", "beliefs", "goals", "intents", "runs")
    for path in (ROOT / app).rglob("*.py")
    if "tests" not in path.parts and "migrations" not in path.parts
]


def test_no_module_uses_the_private_internals_issue_17_names() -> None:
    found = []
    for path in SOURCES:
        text = path.read_text()
        for needle in ("_set_running_loop", "health_check_done", "as_sql =", "get_compiler ="):
            if needle in text:
                found.append(f"{path.relative_to(ROOT)}: {needle}")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in {
                "django",
                "asyncio",
                "mcp",
            }:
                found += [
                    f"{path.relative_to(ROOT)}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_")
                ]
    assert found == []


def test_only_the_seam_executes_sql_text() -> None:
    """Outside operator_site/sql/ no module opens a cursor or hands SQL text to the database."""
    found = []
    seam = ROOT / "operator_site" / "sql"
    assert sorted(p.name for p in seam.glob("*.py")), "the seam is where this test expects it"
    for path in SOURCES:
        if path.parent == seam:
            continue
        text = path.read_text()
        for needle in (
            r"\.cursor\(",
            r"objects\.raw\(",
            r"RawSQL\(",
            r"\.extra\(",
            r"execute_sql\(",
            r"\.execute\(",
        ):
            if re.search(needle, text):
                found.append(f"{path.relative_to(ROOT)}: {needle}")
    assert found == []


def test_a_list_compiled_per_call_reuses_its_plan_with_this_calls_values(agent) -> None:
    now = timezone.now()
    soon = Directive.objects.create(kind="quiet", expires_at=now + timedelta(hours=1), set_by=agent.principal)
    later = Directive.objects.create(
        kind="quiet", expires_at=now + timedelta(hours=3), set_by=agent.principal
    )
    rows = [
        sql.read_many({"d": Rows(reads._directives_in_force, values={"now": at})})[0]["d"]
        for at in (now, now + timedelta(hours=2), now + timedelta(hours=4))
    ]
    assert [[d.pk for d in found] for found in rows] == [[soon.pk, later.pk], [later.pk], []]
    # Another number of ids is another shape, with its own plan; each answers its own ids.
    one = sql.read_many({"t": Rows(_directives_by_id, values={"ids": (soon.pk,)})})[0]["t"]
    two = sql.read_many({"t": Rows(_directives_by_id, values={"ids": (soon.pk, later.pk)})})[0]["t"]
    assert [d.pk for d in one] == [soon.pk] and [d.pk for d in two] == [soon.pk, later.pk]


def _directives_by_id(ids: tuple[int, ...]) -> Any:
    return Directive.objects.filter(id__in=list(ids)).order_by("id")


def _notifications_due(limit: int, now: Any) -> Any:
    return (
        Notification.objects.filter(next_attempt_at__lte=now)
        .order_by("id")
        .values_list("id", "title")[:limit]
    )


def test_tuples_bind_their_values_on_every_call(agent) -> None:
    now = timezone.now()
    for i in range(4):
        Notification.objects.create(kind="k", title=f"t{i}", next_attempt_at=now + timedelta(minutes=i))
    for at in (now - timedelta(minutes=1), now, now + timedelta(minutes=2), now + timedelta(hours=1)):
        with CaptureQueriesContext(connection) as queries:
            got = sql.tuples(_notifications_due, 3, now=at)
        assert got == list(_notifications_due(3, at)) and len(queries) == 1
    assert [
        len(sql.tuples(_notifications_due, 3, now=now + timedelta(minutes=m))) for m in (-1, 0, 2, 9)
    ] == [
        0,
        1,
        3,
        3,
    ]
    with pytest.raises(TypeError):
        sql.tuples(_notifications_due, 3, now=[now])  # a list is no bound value


def _claimable(notice_id: Any, now: Any) -> Any:
    """What the deliverer claims: the notice, if it is due (pending and its time has come, or
    being sent under a claim that lapsed)."""
    from django.db.models import Q

    due = Q(state="pending", next_attempt_at__lte=now) | Q(state="sending", claimed_until__lt=now)
    return Notification.objects.filter(Q(id=notice_id) & due)


def test_update_returning_is_the_orm_update_and_the_rows_it_changed(agent) -> None:
    now = timezone.now()
    due = Notification.objects.create(kind="k", title="due", next_attempt_at=now - timedelta(seconds=1))
    later = Notification.objects.create(kind="k", title="later", next_attempt_at=now + timedelta(hours=1))
    lapsed = Notification.objects.create(
        kind="k",
        title="lapsed",
        state="sending",
        claimed_until=now - timedelta(seconds=1),
        channels=["email"],
    )
    held = Notification.objects.create(
        kind="k", title="held", state="sending", claimed_until=now + timedelta(hours=1)
    )
    until = now + timedelta(minutes=2)
    changes = {
        "state": "sending",
        "claimed_until": until,
        "claim": "token-1",
        "channels": ["email", "webhook"],
    }
    for notice in (due, later, lapsed, held):
        with CaptureQueriesContext(connection) as queries:
            got = sql.update_returning(_claimable, changes, notice_id=notice.id, now=now)
        assert len(queries) == 1
        if notice in (later, held):  # not claimable: nothing changed, nothing returned
            assert got == []
            assert _fields(Notification.objects.get(id=notice.id)) == _fields(notice)
            continue
        # The row as it is after the update, every field converted as the ORM converts it.
        assert len(got) == 1 and type(got[0]) is Notification
        assert _fields(got[0]) == _fields(Notification.objects.get(id=notice.id))
        assert (got[0].claim, got[0].claimed_until, got[0].channels) == (
            "token-1",
            until,
            ["email", "webhook"],
        )
        # Claimed once: the same call again finds it taken.
        assert sql.update_returning(_claimable, changes, notice_id=notice.id, now=now) == []
    # What the ORM's own update would have done, on a fresh pair of rows.
    one = Notification.objects.create(kind="k", title="one", next_attempt_at=now - timedelta(seconds=1))
    two = Notification.objects.create(kind="k", title="two", next_attempt_at=now - timedelta(seconds=1))
    sql.update_returning(_claimable, changes, notice_id=one.id, now=now)
    _claimable(two.id, now).update(**changes)
    first, second = Notification.objects.get(id=one.id), Notification.objects.get(id=two.id)
    assert {
        k: v for k, v in _fields(first).items() if k not in ("id", "title", "created_at", "next_attempt_at")
    } == {
        k: v for k, v in _fields(second).items() if k not in ("id", "title", "created_at", "next_attempt_at")
    }
    with pytest.raises(TypeError):
        sql.update_returning(lambda notice_id: _claimable(notice_id, now), changes, notice_id=1)  # a closure
    for builder in (_progress_with_its_day, _progress_ranked, _all_notifications):
        with pytest.raises(ValueError, match="one model's own columns"):
            sql.update_returning(builder, {"summary": "x"}, since=now)


def _all_notifications(since: Any) -> Any:
    return Notification.objects.all()


def test_only_a_plain_lowercase_word_becomes_a_literal() -> None:
    from operator_site.sql.literals import word_literal

    assert word_literal("held") == "'held'" and word_literal("check-in_2") == "'check-in_2'"
    for not_a_word in ("", "Held", "2nd", "a b", "x'; DROP TABLE y; --", "é", "held\n", 1, None):
        assert word_literal(not_a_word) is None, not_a_word


def test_in_constants_writes_plain_words_into_the_text() -> None:
    from django.db.models import F, Q

    for i, state in enumerate(("pending", "held", "delivered")):
        Notification.objects.create(kind="k", title=f"t{i}", state=state)
    one = Notification.objects.filter(sql.InConstants(F("state"), [Notification.State.HELD]))
    many = Notification.objects.filter(~Q(sql.InConstants(F("state"), ["held", "delivered"])))
    assert [n.title for n in one] == ["t1"] and [n.title for n in many] == ["t0"]
    text, params = one.query.sql_with_params()
    assert "= 'held'" in text and "held" not in [str(p) for p in params]
    assert "IN ('held', 'delivered')" in many.query.sql_with_params()[0]
    for words in ([], ["held'); DROP TABLE x; --"], ["Held"], [1]):
        with pytest.raises(ValueError, match="plain words"):
            list(Notification.objects.filter(sql.InConstants(F("state"), words)))
