"""Check 2 — property-based fuzzing (hypothesis) over every tool's own published input schema.

For every tool, arguments are generated from its `inputSchema` (the same JSON Schema `tools/list`
publishes): valid ones, and near-valid ones — one mutation away from valid (a required field
dropped, an unknown field added, a value of the wrong type, a string one character too long, a
number one past its bound, a value outside its enum, true/false for a number, a NUL character).
Each goes through the whole face (HTTP framing, bearer, dispatcher, transaction, envelope) as the
owner or a full-access agent.

Properties:
- never a 5xx, never a traceback; every answer is one well-formed envelope (one text block of
  indented JSON; a refusal carries `error` and `reason`); never `internal_error` or
  `database_unavailable`;
- every near-valid call that breaks the schema is refused as `invalid_arguments` (nothing ran);
- every call appended exactly one audit row;
- afterwards the database invariants hold (`helpers.invariant_violations`: no forked lineage, no
  orphan version, version counters equal the number of version rows, live state equal to the
  lineage, nothing approved by an agent, observations tainted).

Examples per tool: `OPERATOR_FUZZ_EXAMPLES` (default 24 valid + 24 near-valid), derandomised so CI
runs are reproducible; raise it locally to search longer.
"""

from __future__ import annotations

import asyncio
import json
import os
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operator_site.face import registry
from operator_site.models import AuditEvent
from tests.fixtures import asgi_http
from tests.security.helpers import (
    close_loop,
    envelope_of,
    invariant_violations,
    message_of,
    no_traceback,
    post,
    tools_call,
)

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = int(os.environ.get("OPERATOR_FUZZ_EXAMPLES", "24"))
CRASH_CODES = {"internal_error", "database_unavailable"}
WORDS = ["Run a marathon", "renew-passport", "coffee", "name", "Ian", "owner", "approve", "42", "note", "x"]


# --- JSON Schema → hypothesis strategies (the subset pydantic emits) ---------------------------------
def _text(min_size: int = 0, max_size: int | None = None) -> st.SearchStrategy[str]:
    cap = 60 if max_size is None else min(max_size, 60)
    plain = st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        min_size=min_size,
        max_size=max(cap, min_size),
    )
    fitting = [w for w in WORDS if len(w) >= min_size and (max_size is None or len(w) <= max_size)]
    return st.one_of(st.sampled_from(fitting), plain) if fitting else plain


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), _text(0, 20))
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(_text(1, 10), inner, max_size=4)
        ),
        max_leaves=12,
    )


def _split(schema: dict[str, Any]) -> dict[str, Any]:
    """A compact `type: [T, "null"]` (the published schema's form) as the `anyOf` it stands for."""
    kinds = schema.get("type")
    if not isinstance(kinds, list):
        return schema
    parts = []
    for kind in kinds:
        if kind == "null":
            parts.append({"type": "null"})
            continue
        part = {**schema, "type": kind}
        if "enum" in part:
            part["enum"] = [choice for choice in part["enum"] if choice is not None]
        parts.append(part)
    rest = {k: v for k, v in schema.items() if k in ("description", "default")}
    return {**rest, "anyOf": parts}


def _with(shared: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """A union's variant with the union's own keywords (both apply to a value)."""
    required = [*shared.get("required", []), *part.get("required", [])]
    return {**shared, **part, **({"required": required} if required else {})}


def strategy(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "$ref" in schema:
        return strategy(defs[schema["$ref"].split("/")[-1]], defs)
    schema = _split(schema)
    if "oneOf" in schema:  # a discriminated union (the per-operation changes): one of its variants
        # What the union says of every variant (`type: object`, the required tags) applies to each.
        shared = {k: v for k, v in schema.items() if k not in ("oneOf", "discriminator", "description")}
        return st.one_of([strategy(_with(shared, part), defs) for part in schema["oneOf"]])
    if "anyOf" in schema and schema.get("type") != "object":
        return st.one_of([strategy(part, defs) for part in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type")
    if kind is None:
        return _json_values()  # `actor`, `tainted`: anything
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        low = schema.get("minimum", -(2**31))
        high = schema.get("maximum")
        near = st.integers(low, (low + 30) if high is None else min(high, low + 30))
        far = st.integers(low, high if high is not None else 2**70)
        return st.one_of(near, far)
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False)
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(
                lambda s: len(s) <= schema.get("maxLength", 10**6)
            )
        if schema.get("format") == "date":
            return st.dates().map(str)
        if schema.get("format") == "date-time":
            return st.datetimes().map(lambda d: d.isoformat())
        return _text(schema.get("minLength", 0), schema.get("maxLength"))
    if kind == "array":
        items = strategy(schema.get("items", {}), defs) if schema.get("items") else _json_values()
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=min(schema.get("maxItems", 5), 5))
    if kind == "object":
        properties = schema.get("properties")
        if not properties:
            anything = st.dictionaries(_text(1, 12), _json_values(), max_size=4)
            # An object that takes nothing (an op without fields, a tool without arguments): mostly
            # empty, sometimes not (refused; it keeps the space large enough to draw every example).
            return (
                st.one_of(st.just({}), anything) if schema.get("additionalProperties") is False else anything
            )
        required = set(schema.get("required", []))
        fixed = {name: strategy(properties[name], defs) for name in properties if name in required}
        optional = {name: strategy(properties[name], defs) for name in properties if name not in required}
        # An update names at least one field (`minProperties`, or `anyOf` of `required` lists).
        least = schema.get("minProperties", 0)
        needs = [set(part.get("required", [])) for part in schema.get("anyOf", [])]
        return st.fixed_dictionaries(fixed, optional=optional).filter(
            lambda d: len(d) >= least and (not needs or any(n <= d.keys() for n in needs))
        )
    raise AssertionError(f"schema construct not covered by the fuzzer: {schema}")


def valid_arguments(spec: registry.ToolSpec) -> st.SearchStrategy[dict[str, Any]]:
    schema = spec.mcp_tool.input_schema
    generated = strategy(schema, schema.get("$defs", {}))
    return st.one_of(st.sampled_from(list(spec.examples)), generated)


# --- near-valid: one mutation that breaks the schema ---------------------------------------------------
def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        return _split(defs[schema["$ref"].split("/")[-1]])
    return _split(schema)


def _typed_parts(schema: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    schema = _resolve(schema, defs)
    return [_resolve(p, defs) for p in schema.get("anyOf", [schema])]


def mutations(schema: dict[str, Any], arguments: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every single mutation of `arguments` that the schema forbids, with a label."""
    defs = schema.get("$defs", {})
    properties = schema.get("properties", {})
    out = [("unknown field", {**arguments, "zz_not_a_field": 1})]
    for name in schema.get("required", []):
        if name in arguments:
            out.append((f"missing {name}", {k: v for k, v in arguments.items() if k != name}))
    for name, prop in properties.items():
        parts = _typed_parts(prop, defs)
        types = {p.get("type") for p in parts}
        free_string = any(p.get("type") == "string" and "enum" not in p for p in parts)
        if not any(p.get("type") or p.get("enum") for p in parts):
            continue  # accepts anything
        if "object" not in types:
            out.append((f"{name}: an object", {**arguments, name: {"nested": [1, 2]}}))
        if "array" not in types:
            out.append((f"{name}: an array", {**arguments, name: ["x"]}))
        if types & {"integer", "number"}:
            out.append((f"{name}: true", {**arguments, name: True}))
        for part in parts:
            if part.get("type") == "integer" and "minimum" in part:
                out.append((f"{name}: below minimum", {**arguments, name: part["minimum"] - 1}))
            if part.get("type") == "integer" and "maximum" in part:
                out.append((f"{name}: above maximum", {**arguments, name: part["maximum"] + 1}))
            if part.get("type") == "string" and "maxLength" in part:
                out.append((f"{name}: too long", {**arguments, name: "y" * (part["maxLength"] + 1)}))
            if part.get("type") == "string" and "enum" not in part and "pattern" not in part:
                out.append((f"{name}: NUL", {**arguments, name: "a\x00b"}))
            if "enum" in part and not free_string:
                out.append((f"{name}: outside its enum", {**arguments, name: "NOT_A_CHOICE"}))
            if part.get("type") == "array" and "maxItems" in part:
                given_items = arguments.get(name)
                item = given_items[0] if isinstance(given_items, list) and given_items else "x"
                out.append((f"{name}: too many items", {**arguments, name: [item] * (part["maxItems"] + 1)}))
    return out


# --- the property -------------------------------------------------------------------------------------
def _seed(call: Any) -> None:
    """Some rows for ids 1..n to land on: an instruction, goals, a task, intents, a belief, a run."""
    call("owner", "operator_record_instruction", {"text": "I really want to run a marathon next autumn"})
    call(
        "owner",
        "operator_apply_goal_change",
        {
            "action": "add",
            "title": "Run a marathon",
            "confirmedInConversation": True,
            "confirmationQuote": "I really want to run a marathon next autumn",
        },
    )
    call("agent", "operator_update_task", {"key": "renew-passport", "patch": {"title": "Renew passport"}})
    spend = {"type": "spend", "title": "Plan", "amount_cents": 4900}
    call("agent", "operator_record_action_intent", {"action": spend})
    call("agent", "operator_record_action_intent", {"action": {"type": "note", "title": "Remember"}})
    note = {"op": "add", "kind": "note", "key": "k", "value": "v"}
    call("agent", "operator_update_world_model", {"changes": [note]})


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _fuzz_one_tool(spec: registry.ToolSpec, call: Any, stats: dict[str, int], failures: list[str]) -> None:
    schema = spec.mcp_tool.input_schema

    @SETTINGS
    @given(arguments=valid_arguments(spec), who=st.sampled_from(["owner", "agent"]))
    def valid(arguments: dict[str, Any], who: str) -> None:
        stats["valid"] += 1
        body, problem = call(who, spec.name, arguments)
        if problem:
            failures.append(f"{spec.name} {json.dumps(arguments)[:300]}: {problem}")
        assert problem is None, (spec.name, arguments, problem)
        stats["ok" if body.get("ok", True) is not False else "refused"] += 1

    @SETTINGS
    @given(arguments=valid_arguments(spec), pick=st.integers(0, 10**6))
    def near_valid(arguments: dict[str, Any], pick: int) -> None:
        options = mutations(schema, arguments)
        label, mutated = options[pick % len(options)]
        stats["near_valid"] += 1
        body, problem = call("agent", spec.name, mutated)
        if problem is None and body.get("error") != "invalid_arguments":
            problem = f"{label} was not refused as invalid_arguments: {body.get('error')}"
        if problem:
            failures.append(f"{spec.name} [{label}] {json.dumps(mutated)[:300]}: {problem}")
        assert problem is None, (spec.name, label, mutated, problem)
        stats["refused_invalid"] += 1

    valid()
    near_valid()


def test_every_tool_under_generated_arguments(principals, scorecard, no_rate_limit) -> None:
    loop = asyncio.new_event_loop()
    clients = {
        "owner": asgi_http(principals["owner"].token),
        "agent": asgi_http(principals["full_agent"].token),
    }
    stats = {"calls": 0, "valid": 0, "near_valid": 0, "refused_invalid": 0, "ok": 0, "refused": 0}
    failures: list[str] = []

    def call(who: str, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """One tools/call; returns (envelope, problem)."""
        stats["calls"] += 1
        response = loop.run_until_complete(post(clients[who], tools_call(name, arguments)))
        if response.status_code >= 500 or not no_traceback(response.text):
            return None, f"HTTP {response.status_code}: {response.text[:300]}"
        message = message_of(response)
        if response.status_code != 200 or not message or "result" not in message:
            return None, f"not a result: HTTP {response.status_code} {response.text[:300]}"
        try:
            body, _is_error = envelope_of(message)
        except (AssertionError, ValueError, KeyError) as exc:
            return None, f"malformed envelope: {exc!r}"
        if body.get("error") in CRASH_CODES:
            return body, f"{body['error']}: {body.get('reason')}"
        return body, None

    def seeded_call(who: str, name: str, arguments: dict[str, Any]) -> None:
        body, problem = call(who, name, arguments)
        assert problem is None and body is not None, (name, problem)
        assert body.get("ok", True) is not False, (name, body)

    audit_before = AuditEvent.objects.count()
    _seed(seeded_call)
    specs = registry.all_tools()
    assert len(specs) == 24
    try:
        for spec in specs:
            _fuzz_one_tool(spec, call, stats, failures)
        problems = invariant_violations()
        audit_rows = AuditEvent.objects.count() - audit_before
    finally:
        for client in clients.values():
            loop.run_until_complete(client.aclose())
        close_loop(loop)
        scorecard(
            2,
            "hypothesis over every tool's input schema (valid and near-valid)",
            cases=stats["calls"],
            bypasses=len(failures),
            tools=len(registry.all_tools()),
            examples_per_tool=EXAMPLES * 2,
            **{k: v for k, v in stats.items() if k != "calls"},
            failures=failures[:20],
        )
    scorecard(
        2,
        "hypothesis over every tool's input schema (valid and near-valid)",
        cases=stats["calls"],
        bypasses=len(failures) + len(problems) + int(audit_rows != stats["calls"]),
        tools=len(specs),
        examples_per_tool=EXAMPLES * 2,
        invariant_violations=problems,
        audit_rows=audit_rows,
        **{k: v for k, v in stats.items() if k != "calls"},
    )
    assert problems == []
    assert audit_rows == stats["calls"], "every tools/call appends exactly one audit row"
    assert stats["valid"] >= EXAMPLES * len(specs) and stats["near_valid"] >= EXAMPLES * len(specs)


def test_the_fuzzer_covers_every_schema_construct() -> None:
    """Every tool's schema converts (an uncovered construct would raise), and the mutations of each
    example include at least one per property."""
    for spec in registry.all_tools():
        schema = spec.mcp_tool.input_schema
        strategy(schema, schema.get("$defs", {}))
        labels = [label for label, _ in mutations(schema, dict(spec.examples[0]))]
        assert "unknown field" in labels
        assert all(ch in string.printable for ch in "".join(labels))
