"""The README speaks to a newcomer: the 24 tools one line each (generated from the registry), the
Node version the Inspector needs, what the brain is, `--port`, and no internal shorthand; and its
walkthrough ("A high-stakes change, end to end") runs as written: each request is taken from the
README itself and posted to /mcp with the token it names."""

from __future__ import annotations

import json
import re

import pytest

from operator_site import docs
from operator_site.face import registry
from tests.fixtures import ROOT, asgi_http

README = (ROOT / "README.md").read_text(encoding="utf-8")
PROSE = " ".join(README.split())  # line breaks do not matter to a reader


def test_the_readme_lists_the_24_tools_one_line_each_in_registry_order() -> None:
    block = README[README.index(docs.TOOLS_START) : README.index(docs.TOOLS_END)]
    listed = re.findall(
        r"^- `(operator_[a-z_]+)` — \*\*.+\*\* \((read|write|gated|intent)\)\. .+\.$", block, re.M
    )
    assert [name for name, _ in listed] == registry.names() == list(registry.DECLARED_TOOLS)
    assert len(listed) == 24
    assert block == docs.render_tool_list().removesuffix(docs.TOOLS_END)


def test_the_readme_says_what_a_newcomer_needs() -> None:
    assert "Node.js 22.19 or later" in PROSE
    assert "serve --port 8001" in README
    assert "**The brain.**" in PROSE and "the person's own MCP server" in PROSE
    for internal in ("ian-brain", "§", "seed"):
        assert internal not in README, internal
    for page in ("docs/configuration.md", "docs/deploy.md", "docs/backup.md", "docs/client.md"):
        assert page in README and (ROOT / page).exists(), page


def _walkthrough() -> list[tuple[str, dict]]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### A high-stakes change, end to end", 1)[1].split("\n### ", 1)[0]
    return [
        (token, json.loads(body))
        for token, body in re.findall(r"""^mcp "\$(\w+)" '(\{.*\})'$""", section, re.M)
    ]


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_the_readme_walkthrough_works_end_to_end(owner, agent) -> None:
    steps = _walkthrough()
    assert [token for token, _ in steps] == [
        "OPERATOR_TOKEN",
        "AGENT_TOKEN",
        "AGENT_TOKEN",
        "AGENT_TOKEN",
        "OPERATOR_TOKEN",
    ]
    tokens = {"OPERATOR_TOKEN": owner.token, "AGENT_TOKEN": agent.token}
    answers = []
    for token, body in steps:
        async with asgi_http(tokens[token]) as http:
            response = await http.post(
                "/mcp", json=body, headers={"Accept": "application/json, text/event-stream"}
            )
        assert response.status_code == 200, response.text
        data = next(line[6:] for line in response.text.splitlines() if line.startswith("data: "))
        answers.append(json.loads(json.loads(data)["result"]["content"][0]["text"]))
    said, written, fragment, opposite, undone = answers
    assert said["instruction"]["human_authored"] is True
    assert written["ok"] is True and written["high_stakes"] is True and written["notification"], written
    assert fragment["error"] == "confirmation_fragment", fragment
    assert opposite["error"] == "confirmation_polarity", opposite
    assert (undone["ok"], undone["reverted_version"]) == (True, written["version"]), undone


def test_the_readme_shows_the_review_pages_at_phone_and_desktop_width() -> None:
    """Every screenshot the README shows is in docs/screenshots/ (the browser test writes them with
    OPERATOR_WRITE_SCREENSHOTS=1), every screenshot there is shown, and each review page — dashboard,
    approval, notice, revert — is shown at phone width (and all but the revert page at desktop width)."""
    shown = set(re.findall(r"docs/screenshots/([a-z0-9-]+\.png)", README))
    stored = {path.name for path in (ROOT / "docs" / "screenshots").glob("*.png")}
    assert shown == stored
    for page in ("dashboard", "approval", "notice", "revert"):
        assert f"{page}-phone.png" in shown, page
    for page in ("dashboard", "approval", "notice"):
        assert f"{page}-desktop.png" in shown, page
