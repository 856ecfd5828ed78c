"""The board's links to the goal model: operator_update_task takes `goal` / `project` (an id, or a
title matching exactly one; "" unlinks), upserts by key with them, and reports them in `changed`
exactly; ambiguous, missing or removed targets are refused with nothing written."""

from __future__ import annotations

import pytest

from goals.models import Goal, Project, Task
from goals.services import task_dict
from goals.tests.helpers import RECONCILE, everything

pytestmark = pytest.mark.django_db

TASK = "operator_update_task"


@pytest.fixture
def linked(owner, add_goal, tool):
    run = add_goal("Run a marathon")
    read = add_goal("Read more")
    made = tool(
        owner.principal,
        RECONCILE,
        {
            "changes": [
                {"entity": "project", "op": "add", "fields": {"title": "Couch to 5k", "goal": run}},
                {"entity": "project", "op": "add", "fields": {"title": "Book club", "goal": read}},
            ]
        },
    )
    assert made["ok"] is True, made
    return {"run": run, "read": read, "c25k": Project.objects.get(title="Couch to 5k").pk}


def test_upsert_by_key_with_links_reports_them_in_changed(agent, tool, linked) -> None:
    made = tool(
        agent.principal,
        TASK,
        {
            "key": "buy-shoes",
            "patch": {"title": "Buy running shoes", "lane": "health"},
            "goal": "run a marathon",
        },
    )
    assert made["ok"] is True, made
    assert made["created"] is True
    assert made["changed"] == ["title", "lane", "goal"]
    assert made["task"]["goal"] == {"id": linked["run"], "title": "Run a marathon", "status": "active"}
    assert made["task"]["project"] is None

    same = tool(
        agent.principal, TASK, {"key": "buy-shoes", "goal": linked["run"], "patch": {"lane": "health"}}
    )
    assert (same["created"], same["changed"]) == (False, [])

    one = tool(agent.principal, TASK, {"key": "buy-shoes", "project": "Couch to 5K"})
    assert one["changed"] == ["project"]
    assert one["task"]["project"]["id"] == linked["c25k"]

    many = tool(
        agent.principal,
        TASK,
        {
            "key": "buy-shoes",
            "patch": {"status": "doing", "lane": "health"},
            "goal": "Read more",
            "project": "",
        },
    )
    assert many["changed"] == ["status", "goal", "project"]
    task = Task.objects.get()
    assert (task.goal_id, task.project_id, task.status) == (linked["read"], None, "doing")
    assert Task.objects.count() == 1


def test_a_no_op_link_writes_nothing(agent, tool, linked) -> None:
    made = tool(agent.principal, TASK, {"key": "t", "patch": {"title": "T"}, "goal": linked["run"]})
    stamp = Task.objects.get().updated_at
    again = tool(agent.principal, TASK, {"id": made["task"]["id"], "goal": "Run a marathon"})
    assert again["changed"] == []
    assert Task.objects.get().updated_at == stamp


@pytest.mark.parametrize(
    ("links", "code"),
    [
        ({"goal": "Run"}, "target_not_found"),
        ({"goal": 999}, "target_not_found"),
        ({"project": "Couch to 10k"}, "target_not_found"),
        ({"goal": "Twin"}, "ambiguous_target"),
        ({"goal": "Gone"}, "invalid_link"),
    ],
)
def test_unresolvable_links_are_refused_and_nothing_is_written(
    agent, add_goal, goal_change, tool, linked, links, code
) -> None:
    add_goal("Twin")
    add_goal("twin")
    add_goal("Gone")
    goal_change(action="remove", goal="Gone")
    tool(agent.principal, TASK, {"key": "t", "patch": {"title": "T"}})
    before = everything()
    for selector in ({"key": "t"}, {"key": "new-task"}):
        refused = tool(agent.principal, TASK, {**selector, "patch": {"title": "T2", "lane": "x"}, **links})
        assert (refused["ok"], refused["error"]) == (False, code), refused
        assert refused["field"] == next(iter(links))
    if code == "ambiguous_target":
        assert [c["title"] for c in refused["candidates"]] == ["Twin", "twin"]
    if code == "target_not_found" and links.get("goal") == "Run":
        assert [c["title"] for c in refused["candidates"]] == ["Run a marathon"]
    assert everything() == before


def test_task_dicts_name_their_goal_and_project(agent, tool, linked) -> None:
    made = tool(
        agent.principal,
        TASK,
        {"key": "t", "patch": {"title": "T"}, "goal": linked["read"], "project": "Book club"},
    )
    task = task_dict(Task.objects.select_related("goal", "project").get(pk=made["task"]["id"]))
    assert task["goal"]["title"] == "Read more"
    assert task["project"] == {
        "id": Project.objects.get(title="Book club").pk,
        "title": "Book club",
        "status": "active",
    }
    assert Goal.objects.get(pk=linked["read"]).tasks.count() == 1
