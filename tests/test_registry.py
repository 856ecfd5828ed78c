"""The registry and the envelope: every tool answers in exactly one text block of indented JSON,
whatever it is given; annotations follow the tool's class; the version-race wrapper rolls back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from intents.models import Directive
from operator_site.face import registry
from operator_site.face.dispatch import ToolCall, _run_in_transaction
from operator_site.models import AuditEvent, Principal
from operator_site.refusals import VersionConflict
from operator_site.sql import insert_unless_conflict
from tests.fixtures import mcp_client

DECLARED_TOOL_COUNT = 24


def _assert_one_indented_json_block(result: Any) -> dict[str, Any]:
    assert len(result.content) == 1, f"expected one content block, got {result.content!r}"
    block = result.content[0]
    assert block.type == "text"
    decoded = json.loads(block.text)
    assert isinstance(decoded, dict)
    assert block.text == json.dumps(decoded, indent=2, ensure_ascii=False), "not indent=2 JSON"
    assert result.structured_content is None
    return decoded


def test_registry_holds_only_seed_tools_in_seed_order() -> None:
    names = registry.names()
    assert len(registry.DECLARED_TOOLS) == DECLARED_TOOL_COUNT
    assert len(set(registry.DECLARED_TOOLS)) == DECLARED_TOOL_COUNT
    assert names == [n for n in registry.DECLARED_TOOLS if n in names]
    assert {"operator_set_directive", "operator_clear_directive", "operator_list_directives"} <= set(names)


def test_annotations_follow_the_tool_class() -> None:
    for spec in registry.all_tools():
        annotations = spec.mcp_tool.annotations
        # A value equal to MCP's default is left out: readOnlyHint defaults to false (a write says
        # nothing), destructiveHint and openWorldHint to true (so their false is always said).
        read = spec.tool_class is registry.ToolClass.READ
        assert annotations.read_only_hint is (True if read else None), spec.name
        assert annotations.destructive_hint is False, spec.name
        assert annotations.open_world_hint is False, spec.name
        listed = spec.mcp_tool.model_dump(by_alias=True, exclude_none=True)["annotations"]
        assert listed == {"destructiveHint": False, "openWorldHint": False} | (
            {"readOnlyHint": True} if read else {}
        ), spec.name
        assert spec.description, f"{spec.name} has no description a model can act on"
        assert spec.mcp_tool.input_schema["type"] == "object"
        assert spec.mcp_tool.input_schema.get("additionalProperties") is False


def test_a_tool_outside_the_seed_cannot_be_declared() -> None:
    with pytest.raises(ValueError, match="not one of the 24 declared tools"):
        registry.tool(
            "operator_approve_intent",
            tool_class=registry.ToolClass.WRITE,
            args=registry.ToolArgs,
            title="x",
            examples=[{}],
        )


def test_examples_must_validate() -> None:
    class Args(registry.ToolArgs):
        n: int

    with pytest.raises(ValidationError):
        registry.tool(
            "operator_history",
            tool_class=registry.ToolClass.READ,
            args=Args,
            title="x",
            examples=[{"n": "many"}],
        )


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_every_tool_answers_one_text_block_of_indented_json(owner) -> None:
    """Examples, an empty call, an unknown argument and a wrongly typed one: always the envelope."""
    async with mcp_client(owner.token) as client:
        for spec in registry.all_tools():
            for arguments in [*spec.examples, {}, {"no_such_argument": 1}, {"actor": {"nested": [1, 2]}}]:
                _assert_one_indented_json_block(await client.call_tool(spec.name, arguments))
            first_field = next(iter(spec.args.model_fields), None)
            if first_field:
                bad = {first_field: {"unexpected": ["object"]}}
                decoded = _assert_one_indented_json_block(await client.call_tool(spec.name, bad))
                assert decoded["ok"] is False


# --- the version-race wrapper, written once for every advisor write --------------------------------------
class _Spec:
    name = "operator_set_directive"
    read_only = False
    snapshot = False


def _collision_tool(call: ToolCall, args: Any) -> dict[str, Any]:
    """Writes a row, then loses a race on a unique constraint (the way a lineage claim loses)."""
    Directive.objects.create(
        kind="quiet", set_by=call.principal, actor=call.actor, expires_at="2099-01-01T00:00:00Z"
    )
    # The unique name collides: nothing is inserted, and the loser refuses.
    if not insert_unless_conflict(Principal(name=call.principal.name, kind="agent"), "name"):
        raise VersionConflict(current_version=7)
    return {"ok": True}


@pytest.mark.django_db(transaction=True)
def test_a_version_collision_becomes_retry_true_and_nothing_is_written(agent) -> None:
    spec = _Spec()
    spec.fn = _collision_tool  # type: ignore[attr-defined]
    result = _run_in_transaction(spec, ToolCall(agent.principal, spec), None, 0.0, "0" * 64, None)  # type: ignore[arg-type]
    body = json.loads(result.content[0].text)
    assert body == {
        "ok": False,
        "error": "version_conflict",
        "reason": body["reason"],
        "retry": True,
        "current_version": 7,
    }
    assert result.is_error is False
    assert Directive.objects.count() == 0  # the write before the collision was rolled back too
    audit = AuditEvent.objects.get()
    assert (audit.outcome, audit.error_code) == ("refused", "version_conflict")


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_nul_characters_are_refused_naming_the_field_on_every_database(owner) -> None:
    from tests.fixtures import asgi_http, call

    async with asgi_http(owner.token) as http:
        answer = await call(http, "operator_set_directive", {"kind": "focus", "topic": "tax\x00es"})
    assert answer["error"] == "invalid_arguments"
    assert answer["fields"][0]["field"] == "topic"
    assert "NUL" in answer["fields"][0]["message"]


# --- the published schema: compact, complete -----------------------------------------------------------
def _walk(schema: Any, path: str = "") -> Any:
    """Every (path, subschema) of a JSON Schema."""
    if isinstance(schema, dict):
        yield path, schema
        for name, sub in (schema.get("properties") or {}).items():
            yield from _walk(sub, f"{path}.{name}")
        for name, sub in (schema.get("$defs") or {}).items():
            yield from _walk(sub, f"$defs.{name}")
        for key in ("items", "anyOf", "oneOf", "allOf"):
            if key in schema:
                yield from _walk(schema[key], f"{path}[{key}]")
    elif isinstance(schema, list):
        for item in schema:
            yield from _walk(item, path)


def _tags(schema: Any) -> set[str]:
    """The discriminating properties of every union in a schema."""
    return {sub["discriminator"]["propertyName"] for _, sub in _walk(schema) if "discriminator" in sub}


def _described(prop: dict[str, Any], defs: dict[str, Any]) -> bool:
    """A property carries a description: its own, or that of the definition it refers to."""
    if isinstance(prop.get("description"), str) and prop["description"].strip():
        return True
    ref = prop.get("$ref", "")
    return ref.startswith("#/$defs/") and _described(defs[ref[len("#/$defs/") :]], defs)


def test_the_published_schemas_carry_no_boilerplate() -> None:
    for spec in registry.all_tools():
        for path, sub in _walk(spec.mcp_tool.input_schema):
            assert not isinstance(sub.get("title"), str), f"{spec.name} {path}: a title"
            assert "default" not in sub or sub["default"] is not None, f"{spec.name} {path}: default null"
            options = sub.get("anyOf") or []
            plain = [o for o in options if o != {"type": "null"} and "$ref" not in o and len(o) == 1]
            assert not ({"type": "null"} in options and len(options) == 2 and plain), f"{spec.name} {path}"


def test_every_published_property_is_described() -> None:
    """Every property of every published schema — top level, nested objects, `$defs`, each variant
    of a per-operation union, array items — carries a description (its own or its definition's),
    unless it is a union's tag: a `const` (the tag is its own word) or a discriminator."""
    checked = 0
    for spec in registry.all_tools():
        schema = spec.mcp_tool.input_schema
        defs, tags = schema.get("$defs", {}), _tags(schema)
        for path, sub in _walk(schema):
            for name, prop in (sub.get("properties") or {}).items():
                checked += 1
                if "const" in prop or (name in tags and "enum" in prop):
                    continue
                assert _described(prop, defs), f"{spec.name} {path}.{name} is not described"
    assert checked > 150  # the walk reaches the variants' fields, not only the top level


def _nested_samples() -> dict[str, list[dict[str, Any]]]:
    """Calls that reach inside a tool's arguments: every valid and every broken change of the two
    change-schema suites, and broken nested objects of the other tools."""
    from beliefs.tests import test_change_schemas as beliefs
    from goals.tests import test_change_schemas as goals

    def changes(suite: Any, valid: list[dict[str, Any]]) -> list[dict[str, Any]]:
        broken = [bad for _, bad, *_ in suite.CASES]
        return [{"changes": [change]} for change in [*valid, *broken]] + [{"changes": valid}]

    action = {"type": "note", "title": "t"}
    return {
        "operator_update_world_model": changes(beliefs, [beliefs._valid(op) for op in beliefs.VALID]),
        "operator_reconcile_goal_model": changes(goals, [goals._valid(*pair) for pair in goals.VALID]),
        "operator_record_action_intent": [
            {"action": {**action, "zz": 1}},
            {"action": {**action, "changes": [1]}},
            {"action": {**action, "changes": [{"op": "add"}]}},
            {"action": {"type": "note"}},
        ],
        "operator_update_task": [
            {"key": "k", "patch": {"zz": 1}},
            {"key": "k", "patch": {"status": "lost"}},
            {"key": "k", "patch": {"status": None, "title": ""}},
        ],
    }


def test_the_published_schema_accepts_what_the_full_one_accepts() -> None:
    """What tools/list publishes — pydantic's schema compacted (`compact_schema`), single-use
    definitions written in place (`inline_single_use`), what every variant of a union says said
    once on the union — accepts exactly what pydantic's full schema accepts, over samples: each
    tool's examples, an empty call, an unknown argument, every argument null, text, a number, a
    list or an object, and the nested samples above."""
    import jsonschema

    nested = _nested_samples()
    assert set(nested) <= set(registry.names())
    for spec in registry.all_tools():
        full = spec.args.model_json_schema(by_alias=True)
        published = {k: v for k, v in spec.mcp_tool.input_schema.items() if k != "examples"}
        assert len(json.dumps(published)) < len(json.dumps(full))
        names = list(full.get("properties", {}))
        samples = [*spec.examples, {}, {"unknown": 1}, *nested.get(spec.name, [])]
        samples += [{k: value for k in names} for value in (None, "x", 1, ["x"], {"a": None})]
        outcomes = set()
        for sample in samples:
            one = jsonschema.Draft202012Validator(full).is_valid(sample)
            two = jsonschema.Draft202012Validator(published).is_valid(sample)
            assert one == two, (spec.name, sample)
            outcomes.add(one)
        assert outcomes == {True, False}, spec.name  # both accepted and refused calls were tried


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_tools_list_for_a_full_access_principal_stays_small(owner) -> None:
    from tests.fixtures import asgi_http, parse_sse, rpc

    async with asgi_http(owner.token) as http:
        response = await rpc(http, "tools/list")
    assert response.status_code == 200
    tools = parse_sse(response.text)["result"]["tools"]
    assert len(tools) == DECLARED_TOOL_COUNT
    # This pins what the compaction and the shorter wording reached (docs/performance.md, "tools/list
    # after the compaction (issue 19)"): 43,003 -> 32,241 bytes. Issue 19's target, 24 KB, is not
    # met: what is not words (names, types, bounds, required lists, the per-operation change unions,
    # the annotations) is ~17 KB, and every argument keeps a description and every rule its words.
    assert len(response.content) <= 32_300, len(response.content)


def test_arguments_sent_as_json_inside_a_string_are_read_as_json() -> None:
    spec = registry.get("operator_update_world_model")
    change = {"op": "add", "kind": "note", "key": "k", "value": "v"}
    reader = spec.fn_metadata
    assert reader.pre_parse_json({"changes": json.dumps([change])}) == {"changes": [change]}
    # A plain string, a number written as text, and text that is not JSON stay as they are.
    assert reader.pre_parse_json({"changes": "7", "actor": "[1]"})["changes"] == "7"
    assert reader.pre_parse_json({"changes": "[not json"}) == {"changes": "[not json"}
    assert reader.pre_parse_json({"unknown": "[1]"}) == {"unknown": "[1]"}
    # A field that is text keeps the JSON it was given as text.
    note = registry.get("operator_record_progress")
    assert note.fn_metadata.pre_parse_json({"summary": "[1, 2]"}) == {"summary": "[1, 2]"}
