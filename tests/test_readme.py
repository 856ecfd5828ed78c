"""The README speaks to a newcomer: the 24 tools one line each (generated from the registry), the
Node version the Inspector needs, what the brain is, `--port`, and no internal shorthand."""

from __future__ import annotations

import re

from operator_site import docs
from operator_site.face import registry
from tests.fixtures import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
PROSE = " ".join(README.split())  # line breaks do not matter to a reader


def test_the_readme_lists_the_24_tools_one_line_each_in_registry_order() -> None:
    block = README[README.index(docs.TOOLS_START) : README.index(docs.TOOLS_END)]
    listed = re.findall(
        r"^- `(operator_[a-z_]+)` — \*\*.+\*\* \((read|write|gated|intent)\)\. .+\.$", block, re.M
    )
    assert [name for name, _ in listed] == registry.names() == list(registry.SEED_ORDER)
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
