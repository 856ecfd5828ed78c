"""The README's walkthrough ("A high-stakes change, end to end") runs as written: each request is
taken from the README itself and posted to /mcp with the token it names."""

from __future__ import annotations

import json
import re

import pytest

from tests.fixtures import ROOT, asgi_http

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


def _walkthrough() -> list[tuple[str, dict]]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### A high-stakes change, end to end", 1)[1].split("\n### ", 1)[0]
    return [
        (token, json.loads(body))
        for token, body in re.findall(r"""^mcp "\$(\w+)" '(\{.*\})'$""", section, re.M)
    ]


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
