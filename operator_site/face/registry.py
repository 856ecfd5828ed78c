"""The tool registry: every tool the face serves, declared next to its app's models.

Each app declares its tools in `<app>/tools.py` with the `@tool` decorator and a pydantic argument
model (the Python counterpart of a TypeScript server's Zod schemas). The registry turns each declaration into
the MCP `Tool` description ONCE, at import: the `inputSchema` is derived from the argument model the
way the SDK's own tool registration derives it, and every per-request server lists these prebuilt
objects (re-registering per request costs ~23 ms; reusing costs nothing).

(The low-level `Server` of the SDK serves them: MCPServer would rebuild its tool manager, a
request-state key and a logging set-up on every request, which the per-request design pays for on
every call.)

The registry also knows each tool's class (read, write, gated, intent: docs/powers.md) and derives the
MCP annotations from it.
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import autodiscover_modules
from mcp_types import Tool, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

if TYPE_CHECKING:
    from operator_site.face.dispatch import ToolCall


class ToolClass(StrEnum):
    READ = "read"
    WRITE = "write"
    GATED = "gated"
    INTENT = "intent"


# All 24 tools, in their declared order (README, "The 24 tools"). tools/list follows this order.
DECLARED_TOOLS: tuple[str, ...] = (
    "operator_context_packet",
    "operator_state",
    "operator_user_world_model",
    "operator_tick",
    "operator_update_task",
    "operator_update_decision",
    "operator_record_instruction",
    "operator_set_directive",
    "operator_clear_directive",
    "operator_list_directives",
    "operator_update_world_model",
    "operator_revert_world_model",
    "operator_apply_goal_change",
    "operator_reconcile_goal_model",
    "operator_revert_goal_model",
    "operator_log_decision",
    "operator_record_progress",
    "operator_record_observation",
    "operator_record_action_intent",
    "operator_update_action_intent",
    "operator_history",
    "operator_run_start",
    "operator_run_heartbeat",
    "operator_run_finish",
)


class ToolArgs(BaseModel):
    """Base of every tool's argument model. Unknown arguments are refused, naming the field, and so
    is true/false where a number is expected (pydantic's lax mode would read `"id": true` as id 1:
    a caller's type confusion must not select row 1), and anything but JSON true/false where a
    boolean is expected (lax mode reads "true", "yes", "on", 1 as true: `confirmedInConversation`,
    half of what a high-stakes write needs, is a flag the caller sets, not a word it is read from)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    @field_validator("*", mode="before")
    @classmethod
    def _json_types_as_sent(cls, value: Any, info: ValidationInfo) -> Any:
        numeric, boolean = _scalar_fields(cls)
        if isinstance(value, bool) and info.field_name in numeric:
            raise ValueError("expected a number, not true/false")
        if value is not None and not isinstance(value, bool) and info.field_name in boolean:
            raise ValueError("expected true or false (a JSON boolean)")
        return value


@functools.cache
def _scalar_fields(model: type[ToolArgs]) -> tuple[frozenset[str], frozenset[str]]:
    """The fields of an argument model declared as int or float, and those declared as bool (each
    optionally nullable)."""
    numeric, boolean = set(), set()
    for name, info in model.model_fields.items():
        annotation = info.annotation
        union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
        options = set(typing.get_args(annotation) if union else (annotation,)) - {type(None)}
        if bool not in options and options & {int, float}:
            numeric.add(name)
        if options == {bool}:
            boolean.add(name)
    return frozenset(numeric), frozenset(boolean)


# The `actor` argument several tools take (docs/security.md, claimed_actor): any type, accepted, never
# trusted. Declared once so every tool publishes the same words: `actor: Any = CLAIMED_ACTOR`.
CLAIMED_ACTOR: Any = Field(None, description="Never trusted: the token's principal acts.")

ToolFn = Callable[["ToolCall", Any], dict[str, Any]]


@dataclass(frozen=True)
class ArgumentReader:
    """Arguments as some clients send them: a list or an object written as JSON inside a string
    (`"tags": "[\"a\"]"`) where the field is not a string. Each such value is parsed before
    validation, as the SDK's own tool registration does; a string that is not JSON, or parses to a
    plain string or number, is left for validation to judge."""

    model: type[BaseModel]

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        fields = {}
        for name, info in self.model.model_fields.items():
            fields[name] = info
            if info.alias:
                fields[info.alias] = info
        parsed = dict(data)
        for key, value in data.items():
            info = fields.get(key)
            if info is None or not isinstance(value, str) or info.annotation is str:
                continue
            try:
                loaded = json.loads(value)
            except (ValueError, RecursionError):
                continue
            if not isinstance(loaded, str | int | float):
                parsed[key] = loaded
        return parsed


@dataclass(frozen=True)
class ToolSpec:
    name: str
    tool_class: ToolClass
    args: type[ToolArgs]
    fn: ToolFn
    title: str
    description: str
    examples: tuple[dict[str, Any], ...]
    mcp_tool: Tool = field(repr=False)
    # Unwraps arguments some clients send as JSON inside a string (see ArgumentReader).
    fn_metadata: ArgumentReader = field(repr=False)
    # A read of several queries whose counts and lists must agree: on PostgreSQL it runs in one
    # read-only REPEATABLE READ transaction (face/dispatch.py `read_snapshot`).
    snapshot: bool = False

    @property
    def takes_actor(self) -> bool:
        return "actor" in self.args.model_fields

    @property
    def read_only(self) -> bool:
        return self.tool_class is ToolClass.READ


_REGISTRY: dict[str, ToolSpec] = {}

# What pydantic writes into every schema that tells a model nothing: a `title` derived from each
# property's name, and `default: null` on optional properties (not being required says it).
_NOISE = ("title",)


_DEFS = "#/$defs/"


def _refs(node: Any) -> list[str]:
    """The names of the definitions `node` refers to, once per reference."""
    if isinstance(node, list):
        return [name for value in node for name in _refs(value)]
    if not isinstance(node, dict):
        return []
    ref = node.get("$ref")
    own = [ref[len(_DEFS) :]] if isinstance(ref, str) and ref.startswith(_DEFS) else []
    return own + [name for value in node.values() for name in _refs(value)]


def inline_single_use(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with every `$defs` entry referenced exactly once written where it is referenced:
    pydantic makes every model a definition, and a per-operation union has many models used once
    (each variant, its `fields`); a `$ref` to each costs bytes and tells a reader nothing. Shared
    definitions (a title, a target) stay shared; so does one that refers to itself. Meaning
    unchanged."""
    defs = dict(schema.get("$defs", {}))
    refs = _refs(schema)
    once = {n for n in defs if refs.count(n) == 1 and n not in _refs(defs[n])}

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(value) for value in node]
        if not isinstance(node, dict):
            return node
        name = str(node.get("$ref", ""))[len(_DEFS) :]
        if name in once and node["$ref"].startswith(_DEFS):
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return inline({**defs[name], **siblings})
        return {key: inline(value) for key, value in node.items()}

    out = inline({key: value for key, value in schema.items() if key != "$defs"})
    kept = {name: inline(value) for name, value in defs.items() if name not in once}
    return {**out, "$defs": kept} if kept else out


def _takes_a_union(schema: dict[str, Any]) -> bool:
    """Whether a top-level argument is a list of a union of shapes (the per-operation changes)."""
    return any("oneOf" in prop.get("items", {}) for prop in schema.get("properties", {}).values())


def compact_schema(schema: Any) -> Any:
    """The argument model's JSON Schema without pydantic's boilerplate, meaning unchanged: no
    per-property (or per-model) `title`, no `default: null`, and an optional value written as
    `type: [T, "null"]` (with `null` in its `enum`) instead of `anyOf: [{…T…}, {type: null}]`.
    `additionalProperties: true` (JSON Schema's default) goes; what every variant of a
    discriminated union says is said once on the union (`_hoist_from_variants`). Descriptions,
    constraints, `$defs` (each shared definition once per tool), `required`,
    `additionalProperties: false` and the unions' variants stay. Agents read every tool's schema
    in their context on every session (docs/performance.md, "tools/list after the compaction")."""
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            out[key] = {name: compact_schema(sub) for name, sub in value.items()}
        elif not ((key in _NOISE and isinstance(value, str)) or (key == "default" and value is None)):
            out[key] = compact_schema(value)
    options = out.get("anyOf")
    if isinstance(options, list) and all(_bare_type(option) for option in options):
        # `anyOf: [{type: integer}, {type: string}, {type: null}]` says `type: [integer, string, null]`.
        out = {k: v for k, v in out.items() if k != "anyOf"} | {"type": [o["type"] for o in options]}
    elif isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        (other,) = [option for option in options if option != {"type": "null"}]
        kind = other.get("type")
        if "$ref" not in other and (isinstance(kind, str) or (kind is None and "enum" in other)):
            out = {k: v for k, v in out.items() if k != "anyOf"} | other
            if kind is not None:
                out["type"] = [kind, "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
    if isinstance(out.get("enum"), list) and "type" in out and _enum_fits_type(out["enum"], out["type"]):
        # An enum names every value it accepts; a `type` beside it adds nothing.
        del out["type"]
    if out.get("additionalProperties") is True:
        del out["additionalProperties"]  # JSON Schema's default: any other property is allowed
    if "oneOf" in out and "discriminator" in out:
        _hoist_from_variants(out)
    return out


def _variants(union: dict[str, Any]) -> list[dict[str, Any]]:
    """The variants of a discriminated union, through nested unions (one by `entity`, then by `op`)."""
    out = []
    for option in union["oneOf"]:
        nested = isinstance(option, dict) and set(option) == {"discriminator", "oneOf"}
        out += _variants(option) if nested else [option]
    return out


def _tags(union: dict[str, Any]) -> list[str]:
    """The discriminating properties of a union and of the unions nested in it, outermost first."""
    out = [union["discriminator"]["propertyName"]]
    for option in union["oneOf"]:
        if isinstance(option, dict) and set(option) == {"discriminator", "oneOf"}:
            out += [tag for tag in _tags(option) if tag not in out]
    return out


def _hoist_from_variants(union: dict[str, Any]) -> None:
    """What every variant of a discriminated union says, said once on the union: `type: object`,
    and that the tags (entity, op) are required. Each variant keeps its own properties,
    `additionalProperties: false` and the rest of its `required`. Meaning unchanged: the union's
    own keywords apply to a value together with the variant's."""
    variants = _variants(union)
    tags = _tags(union)
    if not variants or not all(
        isinstance(v, dict)
        and v.get("type") == "object"
        and all(tag in v.get("required", []) and tag in v.get("properties", {}) for tag in tags)
        for v in variants
    ):
        return
    for variant in variants:
        del variant["type"]
        variant["required"] = [name for name in variant["required"] if name not in tags]
        if not variant["required"]:
            del variant["required"]
    union["type"] = "object"
    union["required"] = tags


def _bare_type(option: Any) -> bool:
    return isinstance(option, dict) and set(option) == {"type"} and isinstance(option["type"], str)


_JSON_TYPES = {"string": str, "null": type(None), "boolean": bool}


def _enum_fits_type(values: list[Any], kind: Any) -> bool:
    """Every enum value is of the declared type, so dropping the type changes nothing accepted."""
    kinds = kind if isinstance(kind, list) else [kind]
    allowed = tuple(_JSON_TYPES[k] for k in kinds if k in _JSON_TYPES)
    return len(allowed) == len(kinds) and all(type(value) in allowed for value in values)


def tool(
    name: str,
    *,
    tool_class: ToolClass,
    args: type[ToolArgs],
    title: str,
    examples: list[dict[str, Any]],
    snapshot: bool = False,
) -> Callable[[ToolFn], ToolFn]:
    """Declare a tool. The function's docstring is the description a model reads; `examples` are
    valid argument sets (exercised by the registry tests; the first is published in the input
    schema of a tool that takes a list of per-operation changes).
    `snapshot=True` (reads only): the read's queries see one snapshot of the database."""
    if name not in DECLARED_TOOLS:
        raise ValueError(f"{name} is not one of the 24 declared tools")
    if snapshot and tool_class is not ToolClass.READ:
        raise ValueError(f"{name}: only a read takes a snapshot (a write runs in its own transaction)")
    if not examples:
        raise ValueError(f"{name} needs at least one example argument set")
    for example in examples:
        args.model_validate(example)  # an example that does not validate is a bug, caught at import

    def register(fn: ToolFn) -> ToolFn:
        if name in _REGISTRY:
            raise ValueError(f"tool {name} is declared twice")
        description = " ".join((fn.__doc__ or "").split())
        # The tool's title is said once (on the tool, not again in its annotations). A hint equal to
        # MCP's default is left out (readOnlyHint: false on a write); destructiveHint and
        # openWorldHint default to true, so their false is always said.
        annotations = ToolAnnotations(
            read_only_hint=True if tool_class is ToolClass.READ else None,
            # Nothing here acts outside the operator: even the intent path only records.
            destructive_hint=False,
            open_world_hint=False,
        )
        input_schema = compact_schema(inline_single_use(args.model_json_schema(by_alias=True)))
        if _takes_a_union(input_schema):
            # One example is published (the first) where a call's shape is least plain from the
            # schema: a list of per-operation changes. Every example is validated above and
            # exercised by the registry tests.
            input_schema["examples"] = examples[:1]
        mcp_tool = Tool(
            name=name,
            title=title,
            description=description,
            input_schema=input_schema,
            annotations=annotations,
        )
        _REGISTRY[name] = ToolSpec(
            name,
            tool_class,
            args,
            fn,
            title,
            description,
            tuple(examples),
            mcp_tool,
            ArgumentReader(args),
            snapshot,
        )
        return fn

    return register


_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        # Each installed app's `tools` module (where it has one) declares its tools; importing it
        # registers them. Django's own discovery, as the admin finds `admin` modules.
        autodiscover_modules("tools")
        _loaded = True


def get(name: str) -> ToolSpec | None:
    _load()
    return _REGISTRY.get(name)


def all_tools() -> list[ToolSpec]:
    """Every registered tool, in the declared order."""
    _load()
    return [_REGISTRY[name] for name in DECLARED_TOOLS if name in _REGISTRY]


def names() -> list[str]:
    return [spec.name for spec in all_tools()]
