"""The board (operator_update_task) and the decision log (operator_log_decision)."""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from goals import services
from goals.models import DecisionLogEntry, Task
from operator_site.models import AppendOnlyError
from operator_site.refusals import Refusal
from tests.fixtures import asgi_http, call, mcp_client, orm, tool_json

pytestmark = pytest.mark.django_db


def _patch(principal, **kw):
    patch = kw.pop("patch")
    return services.update_task(principal=principal, patch=patch, **kw)


def test_an_unknown_key_creates_the_task_and_reports_what_it_set(agent) -> None:
    result = _patch(agent.principal, key="renew-passport", patch={"title": "Renew passport", "lane": "admin"})
    assert result.created is True
    assert result.changed == ["title", "lane"]
    assert (result.task.status, result.task.priority) == ("todo", "normal")
    again = _patch(agent.principal, key="renew-passport", patch={"priority": "high"})
    assert again.created is False
    assert again.task.id == result.task.id
    assert Task.objects.count() == 1


def test_changed_is_exact_for_no_op_one_field_and_many_field_patches(agent) -> None:
    task = _patch(agent.principal, key="t", patch={"title": "T", "lane": "home"}).task
    before = Task.objects.get(pk=task.pk).updated_at
    assert _patch(agent.principal, task_id=task.id, patch={"lane": "home", "title": "T"}).changed == []
    assert Task.objects.get(pk=task.pk).updated_at == before  # nothing was written
    assert _patch(agent.principal, task_id=task.id, patch={"lane": "work", "title": "T"}).changed == ["lane"]
    many = _patch(
        agent.principal,
        task_id=task.id,
        patch={"status": "doing", "priority": "urgent", "owner": "scout", "detail": "x", "lane": "work"},
    )
    assert many.changed == ["status", "priority", "owner", "detail"]


@pytest.mark.parametrize(
    ("selector", "patch", "code"),
    [
        ({"key": "new-one"}, {"lane": "x"}, "title_required"),
        ({"key": "b"}, {"title": "B", "status": "blocked"}, "blocker_required"),
        ({"task_id": 999}, {"status": "done"}, "not_found"),
        ({}, {"status": "done"}, "one_selector_required"),
        ({"key": "b", "task_id": 1}, {"status": "done"}, "one_selector_required"),
        ({"key": "b"}, {"colour": "red"}, "unknown_field"),
        ({"key": "b"}, {"title": None}, "invalid_value"),
    ],
)
def test_bad_patches_are_refused_naming_the_problem(agent, selector: dict, patch: dict, code: str) -> None:
    with pytest.raises(Refusal) as refused:
        _patch(agent.principal, patch=patch, **selector)
    assert refused.value.code == code
    assert Task.objects.count() == 0


def test_blocked_needs_a_blocker_also_when_patching(agent) -> None:
    task = _patch(agent.principal, key="t", patch={"title": "T"}).task
    with pytest.raises(Refusal, match="blocker"):
        _patch(agent.principal, task_id=task.id, patch={"status": "blocked"})
    done = _patch(agent.principal, task_id=task.id, patch={"status": "blocked", "blocker": "waiting on bank"})
    assert done.changed == ["status", "blocker"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_agents_patching_different_fields_concurrently_both_land(agent, make_principal) -> None:
    other = make_principal("other-agent")
    task = _patch(agent.principal, key="race", patch={"title": "Race"}).task
    for round_ in range(20):
        barrier = threading.Barrier(2)
        errors: list[Exception] = []

        def patcher(principal, patch, barrier=barrier, errors=errors):
            try:
                barrier.wait()
                from django.db import transaction

                with transaction.atomic():
                    _patch(principal, task_id=task.id, patch=patch)
            except Exception as exc:  # surfaced below
                errors.append(exc)
            finally:
                connection.close()

        threads = [
            threading.Thread(target=patcher, args=(agent.principal, {"owner": f"o{round_}"})),
            threading.Thread(target=patcher, args=(other.principal, {"detail": f"d{round_}"})),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        row = Task.objects.get(pk=task.pk)
        assert (row.owner, row.detail) == (f"o{round_}", f"d{round_}")


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_the_board_through_the_mcp_client(agent) -> None:
    async with mcp_client(agent.token) as client:
        made = tool_json(
            await client.call_tool(
                "operator_update_task",
                {"key": "file-taxes", "patch": {"title": "File taxes", "lane": "admin"}},
            )
        )
        assert made["created"] is True
        assert made["task"]["title"] == "File taxes"
        same = tool_json(
            await client.call_tool(
                "operator_update_task", {"key": "file-taxes", "patch": {"title": "File taxes"}}
            )
        )
        assert same["changed"] == []
        bad = await client.call_tool(
            "operator_update_task", {"id": made["task"]["id"], "patch": {"status": "late"}}
        )
    assert bad.is_error is True
    assert tool_json(bad)["fields"][0]["field"] == "patch.status"


# --- the decision log --------------------------------------------------------------------------------
def _log(principal, title: str = "Keep the plan") -> DecisionLogEntry:
    return services.log_decision(
        principal=principal,
        title=title,
        decision="Renew yearly.",
        rationale="Cheaper.",
        alternatives=["monthly"],
        context="budget review",
    )


def test_entries_chain_and_verify(agent) -> None:
    first, second, third = (_log(agent.principal, t) for t in ("one", "two", "three"))
    assert first.prev_hash == DecisionLogEntry.GENESIS
    assert second.prev_hash == first.entry_hash
    assert third.prev_hash == second.entry_hash
    check = services.verify_log()
    assert (check.ok, check.entries) == (True, 3)


def test_tampering_with_raw_sql_is_detected_at_the_first_broken_entry(agent) -> None:
    entries = [_log(agent.principal, t) for t in ("one", "two", "three")]
    table = DecisionLogEntry._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET decision = %s WHERE id = %s", ["Cancel it.", entries[1].id])
    check = services.verify_log()
    assert check.broken_at == entries[1].id
    assert "content" in check.reason
    with pytest.raises(CommandError, match=f"broken at entry {entries[1].id}"):
        call_command("operator_decision_log", "--verify", stdout=io.StringIO())


def test_a_deleted_entry_breaks_the_link_of_the_next(agent) -> None:
    entries = [_log(agent.principal, t) for t in ("one", "two", "three")]
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {DecisionLogEntry._meta.db_table} WHERE id = %s", [entries[1].id])
    check = services.verify_log()
    assert check.broken_at == entries[2].id
    assert "link" in check.reason


def test_the_log_is_append_only(agent) -> None:
    entry = _log(agent.principal)
    entry.decision = "changed"
    with pytest.raises(AppendOnlyError):
        entry.save()
    with pytest.raises(AppendOnlyError):
        DecisionLogEntry.objects.all().delete()


def test_the_log_prints_as_markdown_newest_last(agent) -> None:
    _log(agent.principal, "first decision")
    _log(agent.principal, "second decision")
    out = io.StringIO()
    call_command("operator_decision_log", stdout=out)
    text = out.getvalue()
    assert text.startswith("# Decision log")
    assert text.index("first decision") < text.index("second decision")
    assert "**Alternatives considered.**\n- monthly" in text
    ok = io.StringIO()
    call_command("operator_decision_log", "--verify", stdout=ok)
    assert "intact: 2 entries" in ok.getvalue()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_never_fork_the_chain(agent) -> None:
    barrier = threading.Barrier(8)

    def writer(i: int) -> None:
        try:
            barrier.wait()
            for j in range(5):
                from django.db import transaction

                with transaction.atomic():
                    _log(agent.principal, f"w{i}-{j}")
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert DecisionLogEntry.objects.count() == 40
    assert services.verify_log().ok


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_log_decision_over_mcp_keeps_the_principal_as_actor(agent) -> None:
    async with asgi_http(agent.token) as http:
        answer = await call(
            http, "operator_log_decision", {"title": "t", "decision": "d", "rationale": "r", "actor": "owner"}
        )
    assert answer["entry"]["actor"] == agent.name
    entry = await orm(lambda: DecisionLogEntry.objects.get())
    assert entry.principal_id == agent.principal.id


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("blank", ["", " ", "\t\n", "\u3000", "\u00a0\u2003"])
@pytest.mark.parametrize("field", ["title", "decision", "rationale"])
async def test_a_blank_entry_is_refused_and_nothing_is_appended(agent, field: str, blank: str) -> None:
    """The log keeps every entry for good: one with nothing to read is refused, as a blank progress
    summary, task title or instruction is."""
    arguments = {"title": "t", "decision": "d", "rationale": "r", field: blank}
    async with asgi_http(agent.token) as http:
        answer = await call(http, "operator_log_decision", arguments)
    assert answer["ok"] is False and answer["error"] in (f"{field}_required", "invalid_arguments"), answer
    assert await orm(lambda: DecisionLogEntry.objects.count()) == 0
