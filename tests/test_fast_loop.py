"""The fast loop's slow marks (tests/plugin.py) name tests that exist: a renamed or moved test must not
drop out of SLOW_TESTS silently, and back into `pytest -m "not slow"`."""

from __future__ import annotations

import ast

from tests.plugin import _ROOT, SLOW_FILES, SLOW_TESTS


def test_every_slow_test_named_in_the_plugin_exists() -> None:
    missing = []
    for name in sorted(SLOW_TESTS):
        path, _, function = name.partition("::")
        source = _ROOT / path
        defined = source.is_file() and any(
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function
            for node in ast.walk(ast.parse(source.read_text()))
        )
        if not defined:
            missing.append(name)
    assert missing == []


def test_every_slow_file_named_in_the_plugin_exists() -> None:
    assert [f for f in sorted(SLOW_FILES) if not (_ROOT / f).exists()] == []
