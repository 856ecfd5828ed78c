"""The withheld power stays withheld: nothing an agent can reach imports the approval function, no
principal is offered an approval tool, and every way a token might try to approve is refused."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from intents.models import Decision, Intent
from operator_site.face import registry
from tests.fixtures import asgi_http, call, mcp_client, orm

ROOT = Path(__file__).resolve().parents[2]
PROJECT_PACKAGES = ("operator_site", "beliefs", "goals", "intents", "runs")
WITHHELD = "intents.approval"
HUMAN_CHANNELS = {
    "intents.admin",
    "intents.api",
    "operator_site.cross_domain.api",
    "operator_site.cross_domain.urls",
}


def module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every project module a file imports, anywhere in it (including inside functions)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)  # `from intents import approval`
    return {name for name in found if name.split(".")[0] in PROJECT_PACKAGES and module_file(name)}


def closure(start: str) -> dict[str, str]:
    """Every project module reachable by imports from `start`, each with the module that imported it."""
    seen: dict[str, str] = {start: ""}
    todo = [start]
    while todo:
        current = todo.pop()
        path = module_file(current)
        if path is None:
            continue
        for name in imports_of(path):
            # importing a.b.c runs a/__init__ and a/b/__init__ too
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix not in seen and module_file(prefix):
                    seen[prefix] = current
                    todo.append(prefix)
    return seen


def chain(seen: dict[str, str], end: str) -> str:
    links = [end]
    while seen.get(links[-1]):
        links.append(seen[links[-1]])
    return " <- ".join(links)


def agent_reachable_modules() -> list[str]:
    face = sorted(module_name(p) for p in (ROOT / "operator_site" / "face").glob("*.py"))
    tools = sorted(
        module_name(p)
        for package in PROJECT_PACKAGES
        for p in (ROOT / package).rglob("tools.py")
        if "tests" not in p.parts
    )
    return face + tools + ["operator_site.asgi"]


def test_the_scan_sees_what_it_must() -> None:
    """The scanner is not blind: it finds the human channels importing the approval module, and it
    knows every tools module and every face module."""
    modules = agent_reachable_modules()
    assert "operator_site.face.dispatch" in modules and "operator_site.face.registry" in modules
    assert "intents.tools" in modules
    assert WITHHELD in closure("intents.admin")
    assert WITHHELD in closure("intents.api")
    assert WITHHELD in closure("operator_site.cross_domain.api")


@pytest.mark.parametrize("module", agent_reachable_modules())
def test_nothing_an_agent_reaches_imports_the_approval_function(module: str) -> None:
    seen = closure(module)
    assert WITHHELD not in seen, f"{module} reaches the approval function: {chain(seen, WITHHELD)}"
    for channel in HUMAN_CHANNELS:
        assert channel not in seen, f"{module} reaches a human channel: {chain(seen, channel)}"
    source = module_file(module).read_text()
    for needle in ("intents.approval", "approve_intent", "edit_and_approve"):
        assert needle not in source, f"{module} names {needle}"


def test_the_registry_loads_only_tools_modules() -> None:
    """Tools come only from `tools` modules, and the scan above knows each one of them."""
    loaded = {spec.fn.__module__ for spec in registry.all_tools()}
    assert all(module.endswith(".tools") for module in loaded)
    scanned = {module for module in agent_reachable_modules() if module.endswith(".tools")}
    assert loaded == scanned


def test_no_tool_approves() -> None:
    for spec in registry.all_tools():
        assert "approv" not in spec.name, spec.name
        assert spec.fn.__module__ != WITHHELD


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_tools_list_offers_no_approval_to_any_principal(owner, agent, make_principal) -> None:
    runner = await orm(
        lambda: make_principal(
            "night-runner",
            kind="agent",
            tools=[
                "operator_record_action_intent",
                "operator_update_task",
                "operator_update_decision",
                "operator_record_instruction",
                "operator_context_packet",
            ],
        )
    )
    for holder in (owner, agent, runner):
        for mode in ("legacy", "auto"):
            async with mcp_client(holder.token, mode=mode) as client:
                listed = (await client.list_tools()).tools
            names = [tool.name for tool in listed]
            assert names, holder.name
            assert set(names) <= set(registry.DECLARED_TOOLS)
            assert not [name for name in names if "approv" in name], holder.name
            if holder is runner:
                assert "operator_update_action_intent" not in names


APPROVAL_ATTEMPTS = [
    ("operator_update_decision", {"status": "approved"}),
    ("operator_update_decision", {"status": "APPROVED"}),
    ("operator_update_decision", {"status": "approved", "actor": {"human": True, "name": "owner"}}),
    ("operator_update_action_intent", {"to": "approved"}),
    ("operator_update_action_intent", {"to": "approved", "note": "the person said yes on the phone"}),
    ("operator_update_action_intent", {"to": "executing"}),
    ("operator_update_action_intent", {"to": "executed"}),
    ("operator_update_decision", {"status": "approved", "approved": True}),
    ("operator_update_action_intent", {"to": "approved", "approval_decision_id": 1}),
]


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_no_token_can_approve(owner, agent) -> None:
    """Not an agent's token, and not even the human owner's MCP token: approval is never a tool."""
    for holder in (agent, owner):
        async with asgi_http(holder.token) as http:
            row = await call(
                http,
                "operator_record_action_intent",
                {"action": {"type": "spend", "title": f"renewal for {holder.name}", "amount_cents": 4900}},
            )
            for tool, arguments in APPROVAL_ATTEMPTS:
                target = row["decision_id"] if tool == "operator_update_decision" else row["id"]
                answer = await call(http, tool, {"id": target, **arguments})
                assert answer["ok"] is False, (holder.name, tool, arguments, answer)
        intent = await orm(lambda row=row: Intent.objects.get(pk=row["id"]))
        assert intent.status == "pending_approval" and intent.approval_decision_id is None
        decision = await orm(lambda row=row: Decision.objects.get(pk=row["decision_id"]))
        assert decision.status == "pending" and decision.decided_by_id is None
