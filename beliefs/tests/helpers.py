"""Helpers of the beliefs tests (fixtures live in conftest.py)."""

from __future__ import annotations

import json
import time
from typing import Any

from operator_site.face import registry
from operator_site.face.dispatch import ToolCall, _run_in_transaction, canonical_digest
from operator_site.models import Principal


def run_tool(principal: Principal, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tools/call as the dispatcher runs it (validation, one transaction with its audit row, the
    envelope), decoded from its single text block."""
    spec = registry.get(name)
    assert spec is not None, name
    args = spec.args.model_validate(arguments)
    if spec.takes_actor:
        args.actor = principal.name
    result = _run_in_transaction(
        spec, ToolCall(principal, spec), args, time.perf_counter(), canonical_digest(arguments), None
    )
    assert len(result.content) == 1
    return json.loads(result.content[0].text)


def add(kind: str, key: str, value: str, **extra: Any) -> dict[str, Any]:
    return {"op": "add", "kind": kind, "key": key, "value": value, **extra}


def update(kind: str, key: str, value: str | None = None, **extra: Any) -> dict[str, Any]:
    change = {"op": "update", "kind": kind, "key": key, **extra}
    if value is not None:
        change["value"] = value
    return change


def retire(kind: str, key: str) -> dict[str, Any]:
    return {"op": "retire", "kind": kind, "key": key}
