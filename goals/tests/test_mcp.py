"""End to end through the official MCP client over the real ASGI app: the person's token records what
they said, an agent's token changes goals with it, reconciles (failing closed first), links a task
to the goal, undoes its own change; every goal-model tool at least once, in both protocol eras."""

from __future__ import annotations

import pytest

from goals.models import Goal, GoalModelVersion, Project, Task
from operator_site.models import AuditEvent, Notification
from tests.fixtures import asgi_http, call, mcp_client, orm, tool_json

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]

TOOLS = {
    "operator_apply_goal_change",
    "operator_reconcile_goal_model",
    "operator_revert_goal_model",
    "operator_update_task",
    "operator_log_decision",
}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_goal_model_through_the_mcp_client(owner, agent, mode) -> None:
    async with mcp_client(owner.token, mode=mode) as person:
        for text in (
            "My top goal this year is to run a marathon.",
            "Two more goals: run a half first, and read more books.",
        ):
            said = tool_json(await person.call_tool("operator_record_instruction", {"text": text}))
            assert said["instruction"]["human_authored"] is True

    async with mcp_client(agent.token, mode=mode) as scout:
        listed = {t.name: t for t in (await scout.list_tools()).tools}
        assert set(listed) >= TOOLS
        gated = listed["operator_apply_goal_change"].annotations
        # readOnlyHint is left out (MCP's default, false); destructiveHint: false is said.
        assert (gated.read_only_hint in (None, False), gated.destructive_hint) == (True, False)

        flag_only = tool_json(
            await scout.call_tool(
                "operator_apply_goal_change",
                {"action": "add", "title": "Run a marathon", "confirmedInConversation": True},
            )
        )
        assert flag_only["error"] == "confirmation_required"

        added = tool_json(
            await scout.call_tool(
                "operator_apply_goal_change",
                {
                    "action": "add",
                    "title": "Run a marathon",
                    "confirmedInConversation": True,
                    "confirmationQuote": "my top goal this year is to run a marathon",
                    "expected_version": 0,
                    "actor": "owner",
                },
            )
        )
        assert added["ok"] is True, added
        assert (added["version"], added["goal"]["importance"]) == (1, 1)
        assert added["goal"]["source"] == {"principal": "scout", "kind": "agent"}
        assert added["notification"] is not None

        # Fails closed: "Run" names no goal (the title is "Run a marathon"), and nothing is written.
        refused = tool_json(
            await scout.call_tool(
                "operator_reconcile_goal_model",
                {
                    "changes": [
                        {"entity": "goal", "op": "add", "fields": {"title": "Read more books"}},
                        {
                            "entity": "project",
                            "op": "add",
                            "fields": {"title": "Half marathon", "goal": "Run"},
                        },
                    ],
                    "confirmedInConversation": True,
                    "confirmationQuote": "Two more goals: run a half first, and read more books.",
                },
            )
        )
        assert refused["error"] == "target_not_found"
        assert refused["resolution"][1]["links"]["goal"]["candidates"][0]["title"] == "Run a marathon"

        reconciled = tool_json(
            await scout.call_tool(
                "operator_reconcile_goal_model",
                {
                    "changes": [
                        {"entity": "goal", "op": "add", "fields": {"title": "Read more books"}},
                        {
                            "entity": "project",
                            "op": "add",
                            "fields": {"title": "Half marathon", "goal": "run a marathon"},
                        },
                    ],
                    "confirmedInConversation": True,
                    "confirmationQuote": "Two more goals: run a half first, and read more books.",
                    "expected_version": 1,
                },
            )
        )
        assert reconciled["ok"] is True, reconciled
        assert reconciled["version"] == 2

        stale = await scout.call_tool(
            "operator_reconcile_goal_model",
            {
                "changes": [
                    {
                        "entity": "project",
                        "op": "update",
                        "target": "Half marathon",
                        "fields": {"status": "done"},
                    }
                ],
                "expected_version": 1,
            },
        )
        assert stale.is_error is False
        assert (tool_json(stale)["retry"], tool_json(stale)["current_version"]) == (True, 2)

        task = tool_json(
            await scout.call_tool(
                "operator_update_task",
                {
                    "key": "long-run",
                    "patch": {"title": "Sunday long run"},
                    "goal": "Run a marathon",
                    "project": "Half marathon",
                },
            )
        )
        assert task["changed"] == ["title", "goal", "project"]

        undone = tool_json(await scout.call_tool("operator_revert_goal_model", {}))
        assert undone["ok"] is True, undone
        assert (undone["version"], undone["reverted_version"]) == (3, 2)

        logged = tool_json(
            await scout.call_tool(
                "operator_log_decision",
                {
                    "title": "Marathon before the half",
                    "decision": "Train for the full marathon; drop the half-marathon project.",
                    "rationale": "One peak per year.",
                    "alternatives": ["half first"],
                },
            )
        )
        assert logged["entry"]["actor"] == "scout"

    assert await orm(lambda: list(Goal.objects.values_list("title", flat=True))) == ["Run a marathon"]
    assert await orm(lambda: Project.objects.count()) == 0
    # The task keeps its links; the project's addition was undone, so it shows as absent.
    task_row = await orm(lambda: Task.objects.select_related("project").get())
    assert task_row.project.present is False
    versions = await orm(
        lambda: list(GoalModelVersion.objects.order_by("number").values_list("actor", "operation"))
    )
    assert versions == [("scout", "change"), ("scout", "change"), ("scout", "undo")]
    notices = await orm(
        lambda: list(
            Notification.objects.filter(subject_kind="goal_model")
            .order_by("id")
            .values_list("kind", "safety")
        )
    )
    assert notices == [("goal_model_change", True), ("goal_model_change", True), ("goal_model_revert", True)]
    audit = await orm(
        lambda: list(
            AuditEvent.objects.filter(principal=agent.principal)
            .exclude(tool="")
            .order_by("id")
            .values_list("tool", "outcome", "error_code")
        )
    )
    assert audit == [
        ("operator_apply_goal_change", "refused", "confirmation_required"),
        ("operator_apply_goal_change", "ok", ""),
        ("operator_reconcile_goal_model", "refused", "target_not_found"),
        ("operator_reconcile_goal_model", "ok", ""),
        ("operator_reconcile_goal_model", "refused", "version_conflict"),
        ("operator_update_task", "ok", ""),
        ("operator_revert_goal_model", "ok", ""),
        ("operator_log_decision", "ok", ""),
    ]


async def test_a_raw_json_rpc_call_for_an_ambiguous_goal(owner, agent) -> None:
    """A raw JSON-RPC post (as a plain HTTP client sends it, SSE answer): two goals titled "Run" —
    refused with the candidates, nothing written."""
    async with asgi_http(owner.token) as http:
        for i, title in enumerate(("Run", "run")):
            await call(http, "operator_record_instruction", {"text": f"add Run as a goal, take {i}"})
            made = await call(
                http,
                "operator_apply_goal_change",
                {
                    "action": "add",
                    "title": title,
                    "confirmedInConversation": True,
                    "confirmationQuote": f"add Run as a goal, take {i}",
                },
            )
            assert made["ok"] is True, made
    async with asgi_http(agent.token) as http:
        answer = await call(http, "operator_apply_goal_change", {"action": "pause", "goal": "RUN"})
    assert answer["error"] == "ambiguous_target"
    assert [c["title"] for c in answer["candidates"]] == ["Run", "run"]
    assert await orm(lambda: GoalModelVersion.objects.count()) == 2
    assert await orm(lambda: sorted(Goal.objects.values_list("status", flat=True))) == ["active", "active"]
