"""The shape of a world-model change, as `operator_update_world_model` takes it and a
`world_model_change` proposal carries it (one schema for both): one model per operation,
discriminated by `op`. The wire shape is `{op, kind, key, value, confidence}`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Discriminator, Field, StringConstraints, field_validator, model_validator
from typing_extensions import TypeAliasType

from operator_site.changes import NOT_BOOL, ChangeList, ChangeModel, Untagged, identifier_type
from operator_site.display import check_identifier

MAX_KEY_CHARS = 120
MAX_VALUE_CHARS = 4000
MAX_CHANGES = 50

BeliefKind = Literal[
    "identity", "goal", "behavior_policy", "constraint", "preference", "note", "project", "risk"
]
# Named types are one shared `$defs` entry in the published schema (each op's model names them).
Kind = TypeAliasType(
    "Kind",
    Annotated[BeliefKind, Field(description="Belief kind.")],
)
# A key names a new belief on add and an existing one on update and retire: the type refuses hidden
# characters (a page could show another key than the stored one), and an add also refuses a key that
# is not in its plain form or mixes scripts in a word (`BeliefAdd`), which would be a second belief
# reading as another. Update and retire take any stored key exactly as it is stored, so a belief
# written before that rule can still be corrected and retired (operator_site.display, "identifiers").
Key = identifier_type(
    "Key",
    max_length=MAX_KEY_CHARS,
    description="Unique among active beliefs of its kind, e.g. name, home_city.",
    target=True,
)
Value = TypeAliasType(
    "Value",
    Annotated[
        str,
        StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_VALUE_CHARS),
        Field(description="What it says."),
    ],
)
Confidence = TypeAliasType(
    "Confidence", Annotated[float, Field(ge=0, le=1, description="How sure."), NOT_BOOL]
)


# pydantic reads a model's docstring as its description: these have none (the op says it).
class BeliefAdd(ChangeModel):
    op: Literal["add"]
    kind: Kind
    key: Key
    value: Value
    confidence: Confidence = None  # type: ignore[assignment]  # absent, not null

    @field_validator("key", mode="before")
    @classmethod
    def _new_key(cls, value: Any) -> Any:
        # A new key: the whole identifier rule (a validator adds nothing to the published schema).
        return check_identifier(value)


def _value_or_confidence(schema: dict[str, Any], model: type) -> None:
    schema["anyOf"] = [{"required": ["value"]}, {"required": ["confidence"]}]


class BeliefUpdate(ChangeModel):
    model_config = ConfigDict(json_schema_extra=_value_or_confidence)

    op: Literal["update"]
    kind: Kind
    key: Key
    value: Value = None  # type: ignore[assignment]
    confidence: Confidence = None  # type: ignore[assignment]

    @model_validator(mode="after")
    def _changes_something(self) -> BeliefUpdate:
        if not {"value", "confidence"} & self.model_fields_set:
            raise ValueError("an update gives a new value, a new confidence, or both")
        return self


class BeliefRetire(ChangeModel):
    op: Literal["retire"]
    kind: Kind
    key: Key


BeliefChange = Annotated[BeliefAdd | BeliefUpdate | BeliefRetire, Discriminator("op"), Untagged("op")]
CHANGES = ChangeList(BeliefChange, MAX_CHANGES, tags=("op", "kind"))
