"""Typed changes: what a versioned model's gated tool takes, one pydantic model per operation.

The world model and the goal model each declare their changes as a discriminated union
(`beliefs/schemas.py`, `goals/goal_model/schemas.py`), so the `inputSchema` an agent reads in
tools/list is the real schema. A `ChangeList` is that union validated once, the same way wherever
changes come from: the tool's arguments (the dispatcher refuses a bad shape as
`invalid_arguments`), a proposal, the admin, a test passing plain dicts (a `Refusal` naming the
change and the field).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
)
from pydantic.json_schema import GetJsonSchemaHandler, JsonSchemaValue
from pydantic_core import core_schema
from typing_extensions import TypeAliasType

from operator_site.display import check_identifier, check_target, check_title
from operator_site.refusals import Refusal


class ChangeModel(BaseModel):
    """Base of a change's models (the change, its `fields`): unknown fields are refused. Numbers
    are refused as true/false as `ToolArgs` refuses them at the top level (pydantic's lax mode reads
    `"importance": true` as 1): an int field is strict, a float one takes `NOT_BOOL`. (Not by a
    validator on every field, as `ToolArgs` does: pydantic allows none on a discriminator.)"""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # A tag's `const` says its type: the `"type": "string"` pydantic adds next to it says
        # nothing. Here rather than in `json_schema_extra`, which a subclass may set for itself.
        out = handler(schema)
        for prop in handler.resolve_ref_schema(out).get("properties", {}).values():
            if "const" in prop:
                prop.pop("type", None)
        return out


def identifier_type(
    name: str, *, max_length: int, description: str, target: bool = False, title: bool = False
) -> Any:
    """A named text type (one shared `$defs` entry) for what later changes target by name — a
    belief's key, a goal's title: stripped, not empty, at most `max_length` characters, and checked
    at the door like every identifier (operator_site.display): a new name refuses hidden characters,
    a character not in its plain form (NFKC) and a word mixing scripts; `target`, a type that may also
    name what exists (a belief's key on update and retire), refuses hidden characters alone — the
    model of an op that makes a new name then checks it as one (`check_identifier`); `title`, a title
    a person reads, which may also hold typographic signs ("½", "m²", "™": `check_title`)."""
    check = check_target if target else check_title if title else check_identifier
    return TypeAliasType(
        name,
        Annotated[
            str,
            StringConstraints(strip_whitespace=True, min_length=1, max_length=max_length),
            BeforeValidator(check),  # after the constraints: pydantic runs it first
            Field(description=description),
        ],
    )


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("expected a number, not true/false")
    return value


NOT_BOOL = BeforeValidator(_not_bool)


class Untagged:
    """Annotated metadata for a discriminated union of changes.

    pydantic puts each tag it dispatched on into an error's location (`changes.0.goal.add.fields.title`)
    and describes a bad tag at the union itself; this names the real path (`changes.0.fields.title`,
    `changes.0.op`). In the JSON Schema it drops the discriminator's `mapping`: every variant's tag is
    a `const` (or an `enum`), which says the same to any validator, in fewer bytes."""

    def __init__(self, *tags: str) -> None:
        # The discriminating properties, outermost first (none on an inner union: the outer one
        # relocates the errors that pass through it).
        self.tags = tags

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        inner = handler(source)
        return core_schema.no_info_wrap_validator_function(self._validate, inner) if self.tags else inner

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        handler.resolve_ref_schema(out).get("discriminator", {}).pop("mapping", None)
        return out

    def _validate(self, value: Any, handler: Any) -> Any:
        try:
            return handler(value)
        except ValidationError as exc:
            raise ValidationError.from_exception_data(
                exc.title, [self._relocated(value, error) for error in exc.errors(include_url=False)]
            ) from None

    def _relocated(self, value: Any, error: Any) -> Any:
        loc, stripped = tuple(error["loc"]), 0
        for tag in self.tags:
            given = value.get(tag) if isinstance(value, dict) else getattr(value, tag, None)
            if loc[:1] == (given,) and isinstance(given, str):
                loc, stripped = loc[1:], stripped + 1
            else:
                break
        kind = error["type"]
        if kind in ("union_tag_invalid", "union_tag_not_found") and stripped < len(self.tags):
            loc = (self.tags[stripped], *loc)
            if kind == "union_tag_not_found":  # the tag is missing: say so as for any field
                return {"type": "missing", "loc": loc, "input": value}
        details = {"type": kind, "loc": loc, "input": error.get("input")}
        if error.get("ctx"):
            details["ctx"] = error["ctx"]
        return details


@dataclass(frozen=True)
class ChangeList:
    """The changes a versioned model takes, validated by ONE TypeAdapter over the model's union.

    `validate` takes plain dicts (or already validated models) and returns the models, or raises
    `Refusal(code)` naming the change (its 1-based number, its entity and op) and the field."""

    union: Any
    max_changes: int
    tags: tuple[str, ...]  # what describes a change in a refusal: ("entity", "op") or ("op", "kind")
    adapter: TypeAdapter[list[Any]] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "adapter", TypeAdapter(list[self.union]))  # type: ignore[name-defined]

    def validate(self, changes: Any, *, code: str = "invalid_change") -> list[Any]:
        if not isinstance(changes, Sequence) or isinstance(changes, str | bytes) or not changes:
            raise Refusal("changes_required", "Give at least one change.")
        if len(changes) > self.max_changes:
            raise Refusal("too_many_changes", f"At most {self.max_changes} changes per call.")
        try:
            return self.adapter.validate_python(list(changes))
        except ValidationError as exc:
            error = exc.errors(include_url=False, include_input=False)[0]
            index, *path = error["loc"]
            where = ".".join(str(part) for part in path) or None  # None: the change as a whole
            raw = changes[index] if isinstance(index, int) else None
            said = [raw.get(t) for t in self.tags] if isinstance(raw, dict) else []
            what = " ".join(s for s in said if isinstance(s, str))
            number = f"Change {index + 1}" if isinstance(index, int) else "A change"
            message = error["msg"].removeprefix("Value error, ")
            raise Refusal(
                code,
                f"{number}{f' ({what})' if what else ''}: {f'{where}: ' if where else ''}{message}.",
                index=index,
                field=where,
            ) from None

    @staticmethod
    def dump(changes: Sequence[BaseModel]) -> list[dict[str, Any]]:
        """The canonical form of validated changes: what was given, stripped and typed (an explicit
        null that means something, a project's `goal: null`, is kept)."""
        return [change.model_dump(exclude_unset=True) for change in changes]
