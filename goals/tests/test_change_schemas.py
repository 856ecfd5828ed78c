"""The goal model's change schema (goals/goal_model/schemas.py), for the whole class: for EVERY
(entity, op) pair, an unknown field, a missing required field, a wrong type (true/false or text
where a number is expected, a number where a title is), hidden characters in a title or a target,
a target on an add, a missing or empty target on anything else, an update with no fields — each
refused with nothing written, through the real MCP path (the SDK client: `invalid_arguments`
naming the field) and through the service given plain dicts (`invalid_change` naming the change
and the field). And the published schema says the same as the server: tools/list carries one
variant per op, every valid change validates against it and every shape refused here is refused by
it too (hidden characters are the server's own rule: JSON Schema cannot say them)."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from goals import goal_model
from goals.goal_model.schemas import CHANGES
from goals.tests.helpers import everything
from operator_site.models import AuditEvent
from operator_site.refusals import Refusal
from tests.fixtures import mcp_client, tool_json

RECONCILE = "operator_reconcile_goal_model"

# A valid change of every (entity, op) pair: each bad case below is one of these, broken once.
VALID: dict[tuple[str, str], dict[str, Any]] = {
    ("goal", "add"): {"fields": {"title": "Run far", "detail": "d", "importance": 1}},
    ("goal", "update"): {"target": "Run", "fields": {"title": "Run far"}},
    ("goal", "rerank"): {"target": "Run", "fields": {"importance": 1}},
    ("goal", "pause"): {"target": "Run"},
    ("goal", "resume"): {"target": 3},
    ("goal", "mark_under_review"): {"target": "Run", "fields": {}},
    ("goal", "remove"): {"target": "Run"},
    ("priority", "add"): {"fields": {"name": "Craft", "detail": "d", "position": 1}},
    ("priority", "update"): {"target": "Health", "fields": {"detail": "d"}},
    ("priority", "move"): {"target": "Health", "fields": {"position": 1}},
    ("priority", "remove"): {"target": "Health"},
    ("project", "add"): {"fields": {"title": "Shed", "detail": "d", "status": "paused", "goal": "Run"}},
    ("project", "update"): {"target": "Shed", "fields": {"status": "done", "goal": None}},
    ("project", "remove"): {"target": 7},
}
REQUIRED = {
    ("goal", "add"): ["title"],
    ("goal", "rerank"): ["importance"],
    ("priority", "add"): ["name"],
    ("priority", "move"): ["position"],
    ("project", "add"): ["title"],
}
NUMBERS = {"importance", "position"}
LABELS = {"title", "name"}
HIDDEN = ["\u202e", "\u200b", "\n", "\x1b", "\u00a0"]


def _valid(entity: str, op: str) -> dict[str, Any]:
    return {"entity": entity, "op": op, **copy.deepcopy(VALID[(entity, op)])}


def _cases() -> list[tuple[str, dict[str, Any], str, bool]]:
    """(label, the bad change, the field the refusal names, whether JSON Schema can say it)."""
    out: list[tuple[str, dict[str, Any], str, bool]] = []

    def case(label: str, change: dict[str, Any], field: str, schema_says: bool = True) -> None:
        out.append((f"{change['entity']} {change['op']}: {label}", change, field, schema_says))

    for entity, op in VALID:
        fields = VALID[(entity, op)].get("fields", {})
        bad = _valid(entity, op)
        bad.setdefault("fields", {})["surprise"] = 1
        case("an unknown field", bad, "fields.surprise")
        for name in REQUIRED.get((entity, op), []):
            bad = _valid(entity, op)
            del bad["fields"][name]
            case(f"no {name}", bad, f"fields.{name}")
        for name in fields:
            if name in NUMBERS:
                for wrong in (True, False, "1", 1.5):
                    bad = _valid(entity, op)
                    bad["fields"][name] = wrong
                    case(f"{name}={wrong!r}", bad, f"fields.{name}")
                bad = _valid(entity, op)
                bad["fields"][name] = 0
                case(f"{name}=0", bad, f"fields.{name}")
            if name in LABELS:
                for wrong in (7, True, None, "   ", "x" * 301):
                    bad = _valid(entity, op)
                    bad["fields"][name] = wrong
                    case(f"{name}={wrong!r:.12}", bad, f"fields.{name}", schema_says=wrong != "   ")
                for ch in HIDDEN:
                    bad = _valid(entity, op)
                    bad["fields"][name] = f"Sh{ch}ed"
                    case(f"{name} holding U+{ord(ch):04X}", bad, f"fields.{name}", schema_says=False)
            if name == "goal":
                for wrong in (True, 1.5, ["Run"]):
                    bad = _valid(entity, op)
                    bad["fields"]["goal"] = wrong
                    case(f"goal={wrong!r}", bad, "fields.goal")
                bad = _valid(entity, op)
                bad["fields"]["goal"] = "Ru\u202en"
                case("goal holding U+202E", bad, "fields.goal", schema_says=False)
            if name == "status":
                bad = _valid(entity, op)
                bad["fields"]["status"] = "removed"
                case("status=removed", bad, "fields.status")
        if op == "add":
            for target in ("Run", 3, None):
                bad = _valid(entity, op)
                bad["target"] = target
                case(f"a target {target!r} on an add", bad, "target")
        else:
            bad = _valid(entity, op)
            del bad["target"]
            case("no target", bad, "target")
            for wrong in ("", True, 1.5, None, {"id": 1}):
                bad = _valid(entity, op)
                bad["target"] = wrong
                case(f"target={wrong!r}", bad, "target")
            for ch in HIDDEN:
                bad = _valid(entity, op)
                bad["target"] = f"R{ch}un"
                case(f"a target holding U+{ord(ch):04X}", bad, "target", schema_says=False)
        if op == "update":
            bad = _valid(entity, op)
            bad["fields"] = {}
            case("an update with no fields", bad, "fields")
            bad = _valid(entity, op)
            del bad["fields"]
            case("an update without fields", bad, "fields")
        if not fields and op != "add":
            bad = _valid(entity, op)
            bad["fields"] = {"title": "x"}
            case("a field on an op that takes none", bad, "fields.title")
        bad = _valid(entity, op)
        bad["fields"] = None
        case("fields=null", bad, "fields")
    out.append(
        ("an unknown entity", {"entity": "habit", "op": "add", "fields": {"title": "x"}}, "entity", True)
    )
    out.append(("no entity", {"op": "add", "fields": {"title": "x"}}, "entity", True))
    out.append(("an op the entity lacks", {"entity": "project", "op": "move", "target": 1}, "op", True))
    out.append(("a goal's op on a priority", {"entity": "priority", "op": "pause", "target": 1}, "op", True))
    out.append(("no op", {"entity": "goal", "target": 1}, "op", True))
    return out


CASES = _cases()


def test_every_entity_and_op_is_covered() -> None:
    assert {(c.get("entity"), c.get("op")) for _, c, _, _ in CASES} >= set(VALID)
    assert len(CASES) > 150


@pytest.mark.parametrize(("entity", "op"), list(VALID))
def test_each_valid_change_passes_the_schema(entity: str, op: str) -> None:
    (parsed,) = CHANGES.validate([_valid(entity, op)])
    assert (parsed.entity, parsed.op) == (entity, op)


@pytest.mark.django_db
def test_the_service_given_dicts_refuses_each_naming_the_change_and_field(agent) -> None:
    before = everything()
    fine = {"entity": "project", "op": "add", "fields": {"title": "Fine"}}
    wrong = []
    for label, bad, field, _ in CASES:
        try:
            goal_model.reconcile_goal_model(principal=agent.principal, changes=[fine, bad])
        except Refusal as refused:
            named = (refused.code, refused.extra.get("index"), refused.extra.get("field"))
            if named != ("invalid_change", 1, field) or not refused.reason.startswith("Change 2"):
                wrong.append((label, named, refused.reason))
            elif f": {field}: " not in refused.reason:
                wrong.append((label, refused.reason))
        else:
            wrong.append((label, "written"))
    assert wrong == []
    assert everything() == before


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_the_mcp_door_refuses_each_as_invalid_arguments_naming_the_field(owner) -> None:
    from tests.fixtures import orm

    before = await orm(
        lambda: (everything(), AuditEvent.objects.exclude(error_code="invalid_arguments").count())
    )
    wrong = []
    async with mcp_client(owner.token) as client:
        for label, bad, field, _ in CASES:
            result = await client.call_tool(RECONCILE, {"changes": [bad]})
            body = tool_json(result)
            named = [f["field"] for f in body.get("fields", [])]
            if not (
                result.is_error and body.get("error") == "invalid_arguments" and f"changes.0.{field}" in named
            ):
                wrong.append((label, body))
    after = await orm(
        lambda: (everything(), AuditEvent.objects.exclude(error_code="invalid_arguments").count())
    )
    assert wrong == []
    assert after == before


def test_importance_true_is_not_read_as_one() -> None:
    """pydantic's lax mode reads true as 1; a nested rank is strict (the top-level `ToolArgs` rule)."""
    for entity, op, name in (("goal", "rerank", "importance"), ("priority", "move", "position")):
        change = _valid(entity, op)
        change["fields"][name] = True
        with pytest.raises(Refusal):
            CHANGES.validate([change])


# --- what tools/list publishes ----------------------------------------------------------------------------
def _published() -> dict[str, Any]:
    from operator_site.face import registry

    spec = registry.get(RECONCILE)
    assert spec is not None
    return spec.mcp_tool.input_schema


def _variants(schema: dict[str, Any]) -> list[dict[str, Any]]:
    defs = schema.get("$defs", {})

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref")
        return resolve(defs[ref.split("/")[-1]]) if ref else node

    items = resolve(schema["properties"]["changes"]["items"])
    assert items["discriminator"] == {"propertyName": "entity"}
    out = []
    for by_entity in map(resolve, items["oneOf"]):
        assert by_entity["discriminator"] == {"propertyName": "op"}
        out += [resolve(v) for v in by_entity["oneOf"]]
    return out


def test_tools_list_publishes_one_variant_per_op_with_exactly_its_fields() -> None:
    published = set()
    for variant in _variants(_published()):
        entity = variant["properties"]["entity"]["const"]
        op = variant["properties"]["op"]
        for name in op.get("enum") or [op["const"]]:
            published.add((entity, name))
        assert variant["additionalProperties"] is False
        assert ("target" in variant["required"]) == (op.get("const") != "add")
    assert published == set(VALID)


@pytest.mark.parametrize(("entity", "op"), list(VALID))
def test_the_published_schema_accepts_each_valid_change(entity: str, op: str) -> None:
    jsonschema.Draft202012Validator(_published()).validate({"changes": [_valid(entity, op)]})


def test_the_published_schema_refuses_what_the_server_refuses() -> None:
    validator = jsonschema.Draft202012Validator(_published())
    accepted = [label for label, bad, _, says in CASES if says and validator.is_valid({"changes": [bad]})]
    assert accepted == []
