"""The world model's change schema (beliefs/schemas.py), for the whole class: for every op (add,
update, retire), an unknown field, a missing required field, a wrong type (true/false or text
where a number is expected, a number where text is), hidden characters in a key, an update that
changes nothing, a retire carrying a value or confidence — each refused with nothing written,
through the real MCP path (`invalid_arguments` naming the field) and through the service given
plain dicts (`invalid_change` naming the change and the field); and the published schema (one
variant per op) says the same as the server."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from beliefs import services
from beliefs.models import Belief, WorldModelVersion
from beliefs.schemas import CHANGES
from operator_site.models import AuditEvent
from operator_site.refusals import Refusal
from tests.fixtures import mcp_client, tool_json

UPDATE = "operator_update_world_model"
VALID: dict[str, dict[str, Any]] = {
    "add": {"kind": "note", "key": "parking", "value": "level 2", "confidence": 0.5},
    "update": {"kind": "note", "key": "parking", "value": "level 3"},
    "retire": {"kind": "note", "key": "parking"},
}
REQUIRED = {"add": ["kind", "key", "value"], "update": ["kind", "key"], "retire": ["kind", "key"]}
HIDDEN = ["\u202e", "\u200b", "\n", "\x1b", "\u00a0"]


def _valid(op: str) -> dict[str, Any]:
    return {"op": op, **copy.deepcopy(VALID[op])}


def _cases() -> list[tuple[str, dict[str, Any], str | None, bool]]:
    """(label, the bad change, the field the refusal names, whether JSON Schema can say it)."""
    out: list[tuple[str, dict[str, Any], str | None, bool]] = []

    def case(label: str, change: dict[str, Any], field: str | None, schema_says: bool = True) -> None:
        out.append((f"{change.get('op')}: {label}", change, field, schema_says))

    for op in VALID:
        case("an unknown field", {**_valid(op), "source": "owner"}, "source")
        for name in REQUIRED[op]:
            bad = _valid(op)
            del bad[name]
            case(f"no {name}", bad, name)
        for wrong in (7, True, None, "", "x" * 121):
            case(f"key={wrong!r:.12}", {**_valid(op), "key": wrong}, "key")
        case("key='   '", {**_valid(op), "key": "   "}, "key", schema_says=False)
        for ch in HIDDEN:
            case(
                f"a key holding U+{ord(ch):04X}",
                {**_valid(op), "key": f"park{ch}ing"},
                "key",
                schema_says=False,
            )
        for wrong in ("mood", 3, None):
            case(f"kind={wrong!r}", {**_valid(op), "kind": wrong}, "kind")
        if op == "retire":
            case("a value", {**_valid(op), "value": "v"}, "value")
            case("a confidence", {**_valid(op), "confidence": 0.5}, "confidence")
            continue
        for wrong in (7, True, None, "", "x" * 4001):
            case(f"value={wrong!r:.12}", {**_valid(op), "value": wrong}, "value")
        case("value='   '", {**_valid(op), "value": "   "}, "value", schema_says=False)
        for wrong in (True, False, -0.1, 1.5, "high", None):
            case(f"confidence={wrong!r}", {**_valid(op), "confidence": wrong}, "confidence")
    bad = _valid("update")
    del bad["value"]
    case("neither value nor confidence", bad, None)
    out.append(("an unknown op", {"op": "merge", "kind": "note", "key": "k"}, "op", True))
    out.append(("no op", {"kind": "note", "key": "k", "value": "v"}, "op", True))
    return out


CASES = _cases()


@pytest.mark.parametrize("op", list(VALID))
def test_each_valid_change_passes_the_schema(op: str) -> None:
    (parsed,) = CHANGES.validate([_valid(op)])
    assert parsed.op == op
    update = {"op": "update", "kind": "note", "key": "k", "confidence": 1}
    assert CHANGES.validate([update])[0].confidence == 1.0


@pytest.mark.django_db
def test_the_service_given_dicts_refuses_each_naming_the_change_and_field(agent) -> None:
    fine = {"op": "add", "kind": "preference", "key": "coffee", "value": "flat white"}
    wrong = []
    for label, bad, field, _ in CASES:
        try:
            services.update_world_model(principal=agent.principal, changes=[fine, bad])
        except Refusal as refused:
            named = (refused.code, refused.extra.get("index"), refused.extra.get("field"))
            if named != ("invalid_change", 1, field) or not refused.reason.startswith("Change 2"):
                wrong.append((label, named, refused.reason))
        else:
            wrong.append((label, "written"))
    assert wrong == []
    assert (Belief.objects.count(), WorldModelVersion.objects.count()) == (0, 0)


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_the_mcp_door_refuses_each_as_invalid_arguments_naming_the_field(owner) -> None:
    from tests.fixtures import orm

    def state() -> tuple[int, int, int]:
        return (
            Belief.objects.count(),
            WorldModelVersion.objects.count(),
            AuditEvent.objects.exclude(error_code="invalid_arguments").count(),
        )

    before = await orm(state)
    wrong = []
    async with mcp_client(owner.token) as client:
        for label, bad, field, _ in CASES:
            result = await client.call_tool(UPDATE, {"changes": [bad]})
            body = tool_json(result)
            named = [f["field"] for f in body.get("fields", [])]
            path = "changes.0" if field is None else f"changes.0.{field}"
            if not (result.is_error and body.get("error") == "invalid_arguments" and path in named):
                wrong.append((label, body))
    assert wrong == []
    assert await orm(state) == before


def test_confidence_true_is_not_read_as_one() -> None:
    """pydantic's lax mode reads true as 1.0; a change's confidence refuses it (as `ToolArgs` does)."""
    with pytest.raises(Refusal, match="not true/false"):
        CHANGES.validate([{**_valid("add"), "confidence": True}])


# --- what tools/list publishes ----------------------------------------------------------------------------
def _published() -> dict[str, Any]:
    from operator_site.face import registry

    spec = registry.get(UPDATE)
    assert spec is not None
    return spec.mcp_tool.input_schema


def test_tools_list_publishes_one_variant_per_op() -> None:
    schema = _published()
    items = schema["properties"]["changes"]["items"]
    assert items["discriminator"] == {"propertyName": "op"}
    defs = schema.get("$defs", {})
    variants = [defs[v["$ref"].split("/")[-1]] if "$ref" in v else v for v in items["oneOf"]]
    assert [v["properties"]["op"]["const"] for v in variants] == ["add", "update", "retire"]
    # What every variant says (an object; its op required) is said once, on the union.
    assert (items["type"], items["required"]) == ("object", ["op"])
    assert [sorted([*items["required"], *v.get("required", [])]) for v in variants] == [
        ["key", "kind", "op", "value"],
        ["key", "kind", "op"],
        ["key", "kind", "op"],
    ]
    assert "value" not in variants[2]["properties"] and "confidence" not in variants[2]["properties"]


@pytest.mark.parametrize("op", list(VALID))
def test_the_published_schema_accepts_each_valid_change(op: str) -> None:
    jsonschema.Draft202012Validator(_published()).validate({"changes": [_valid(op)]})


def test_the_published_schema_refuses_what_the_server_refuses() -> None:
    validator = jsonschema.Draft202012Validator(_published())
    accepted = [label for label, bad, _, says in CASES if says and validator.is_valid({"changes": [bad]})]
    assert accepted == []
