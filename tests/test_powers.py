"""Scoped principals hold exactly the powers the power table grants them, checked over the registry."""

from __future__ import annotations

import pytest

from operator_site import powers
from operator_site.face import registry
from tests.fixtures import asgi_http, call, orm

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


def test_onboarding_holds_only_read_tools() -> None:
    for name in powers.ONBOARDING_TOOLS:
        assert name in registry.DECLARED_TOOLS
        spec = registry.get(name)
        if spec is not None:  # every onboarding tool that exists is a read
            assert spec.tool_class is registry.ToolClass.READ, name


async def test_onboarding_is_refused_every_write_send_or_action_tool(make_principal) -> None:
    onboarding = await orm(lambda: make_principal("onboarding", tools=list(powers.ONBOARDING_TOOLS)))
    not_reads = [spec for spec in registry.all_tools() if spec.tool_class is not registry.ToolClass.READ]
    assert not_reads, "the registry has write tools to try"
    async with asgi_http(onboarding.token) as http:
        for spec in not_reads:
            answer = await call(http, spec.name, spec.examples[0])
            assert answer["error"] == "tool_not_allowed", spec.name


@pytest.mark.parametrize("role", ["morning-runner", "night-runner"])
async def test_runners_are_refused_everything_outside_their_list(make_principal, role: str) -> None:
    runner = await orm(lambda: make_principal(role, tools=list(powers.ROLES[role])))
    async with asgi_http(runner.token) as http:
        for spec in registry.all_tools():
            if spec.name not in powers.ROLES[role]:
                answer = await call(http, spec.name, spec.examples[0])
                assert answer["error"] == "tool_not_allowed", spec.name


def test_docs_powers_md_matches_the_code() -> None:
    from pathlib import Path

    doc = Path(__file__).resolve().parent.parent / "docs" / "powers.md"
    assert doc.read_text() == powers.render_markdown(), (
        "docs/powers.md is stale: regenerate it with `python3 manage.py operator_powers > docs/powers.md`"
    )
