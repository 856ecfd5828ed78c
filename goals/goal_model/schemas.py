"""The shape of a goal-model change, as `operator_reconcile_goal_model` takes it and a
`goal_model_change` proposal carries it (one schema for both): one model per operation, a union
discriminated by `entity` and then by `op`, each op's `fields` exactly the fields it takes.

The wire shape is `{entity, op, target, fields: {...}}`: `target` on every op but add, never on
add. What depends on the model's state (does the target exist, is a rank within the order) is
checked when the write is planned (goals/goal_model/planning.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)
from typing_extensions import TypeAliasType

from goals.goal_model.kinds import MAX_CHANGES, MAX_DETAIL_CHARS, MAX_TITLE_CHARS
from operator_site.changes import ChangeList, ChangeModel, Untagged, identifier_type
from operator_site.display import check_target


def _target(value: Any) -> int | str:
    # One check, one error (a union of int and str would report a failure per branch).
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("an id (a whole number) or a title")
    if value == "":
        raise ValueError("say which item: its id or its exact title")
    return check_target(value)


def _link(value: Any) -> int | str | None:
    return None if value is None or value == "" else _target(value)


# Titles and names are what later changes target (and a project's goal link targets one now): they
# refuse hidden characters at the door, like every identifier (operator_site.display). A title or
# name given on add or update is a new name: it also refuses a character not in its plain form (NFKC)
# and a word mixing scripts, which would make a second item reading as another — save the typographic
# signs of ordinary writing ("½", "m²", "™", "…": `operator_site.display.typographic`). A target or
# link only finds what exists: hidden characters alone, so an item titled before that rule can still
# be named (and by id always). Named types are one shared `$defs` entry in the published schema.
Title = identifier_type(
    "Title",
    max_length=MAX_TITLE_CHARS,
    description="A goal's or project's title; a priority's name.",
    title=True,
)
Detail = TypeAliasType(
    "Detail",
    Annotated[
        str,
        StringConstraints(strip_whitespace=True, max_length=MAX_DETAIL_CHARS),
        Field(description="What it means."),
    ],
)
Target = TypeAliasType(
    "Target",
    Annotated[
        int | str,
        PlainValidator(_target),
        WithJsonSchema(
            {
                "type": ["integer", "string"],
                "minLength": 1,
                "description": "Its id, or exact title (a priority: name) matching one item.",
            }
        ),
    ],
)
GoalLink = TypeAliasType(
    "GoalLink",
    Annotated[
        int | str | None,
        PlainValidator(_link),
        WithJsonSchema(
            {
                "type": ["integer", "string", "null"],
                "description": "The goal it serves: id or exact title; null unlinks.",
            }
        ),
    ],
)
Importance = TypeAliasType(
    "Importance",
    Annotated[int, Field(strict=True, ge=1, description="1 = most important (add: default last).")],
)
Position = TypeAliasType(
    "Position",
    Annotated[int, Field(strict=True, ge=1, description="1 = first priority (add: default last).")],
)
ProjectStatus = TypeAliasType(
    "ProjectStatus",
    Annotated[Literal["active", "paused", "done"], Field(description="To remove it: op remove.")],
)


def _at_least_one(schema: dict[str, Any], model: type) -> None:
    schema["minProperties"] = 1


class _Update(ChangeModel):
    # An update's fields: at least one (said in the schema too).
    model_config = ConfigDict(json_schema_extra=_at_least_one)

    @model_validator(mode="after")
    def _not_empty(self) -> _Update:
        if not self.model_fields_set:
            raise ValueError(f"an update changes at least one of {', '.join(type(self).model_fields)}")
        return self


# --- fields (pydantic reads a model's docstring as its description: the published `fields` says it) --
class GoalAddFields(ChangeModel):
    """The new goal."""

    title: Title
    detail: Detail = None  # type: ignore[assignment]  # absent, not null
    importance: Importance = None  # type: ignore[assignment]


class GoalUpdateFields(_Update):
    """What changes."""

    title: Title = None  # type: ignore[assignment]
    detail: Detail = None  # type: ignore[assignment]


class GoalRerankFields(ChangeModel):
    """The new rank."""

    importance: Importance


class PriorityAddFields(ChangeModel):
    """The new priority."""

    name: Title
    detail: Detail = None  # type: ignore[assignment]
    position: Position = None  # type: ignore[assignment]


class PriorityUpdateFields(_Update):
    """What changes."""

    name: Title = None  # type: ignore[assignment]
    detail: Detail = None  # type: ignore[assignment]


class PriorityMoveFields(ChangeModel):
    """The new place."""

    position: Position


class ProjectAddFields(ChangeModel):
    """The new project."""

    title: Title
    detail: Detail = None  # type: ignore[assignment]
    status: ProjectStatus = None  # type: ignore[assignment]
    goal: GoalLink = None


class ProjectUpdateFields(_Update):
    """What changes."""

    title: Title = None  # type: ignore[assignment]
    detail: Detail = None  # type: ignore[assignment]
    status: ProjectStatus = None  # type: ignore[assignment]
    goal: GoalLink = None


class NoFields(ChangeModel):
    """This op takes no fields."""


NO_FIELDS = Field(default_factory=NoFields)


# --- one model per operation (ops of the same shape share one: their `op` is an enum) -------------
class GoalAdd(ChangeModel):
    entity: Literal["goal"]
    op: Literal["add"]
    fields: GoalAddFields


class GoalUpdate(ChangeModel):
    entity: Literal["goal"]
    op: Literal["update"]
    target: Target
    fields: GoalUpdateFields


class GoalRerank(ChangeModel):
    entity: Literal["goal"]
    op: Literal["rerank"]
    target: Target
    fields: GoalRerankFields


class GoalTransition(ChangeModel):
    entity: Literal["goal"]
    op: Literal["pause", "resume", "mark_under_review", "remove"] = Field(
        description="pause → paused, resume → active, mark_under_review, remove."
    )
    target: Target
    fields: NoFields = NO_FIELDS


class PriorityAdd(ChangeModel):
    entity: Literal["priority"]
    op: Literal["add"]
    fields: PriorityAddFields


class PriorityUpdate(ChangeModel):
    entity: Literal["priority"]
    op: Literal["update"]
    target: Target
    fields: PriorityUpdateFields


class PriorityMove(ChangeModel):
    entity: Literal["priority"]
    op: Literal["move"]
    target: Target
    fields: PriorityMoveFields


class PriorityRemove(ChangeModel):
    entity: Literal["priority"]
    op: Literal["remove"]
    target: Target
    fields: NoFields = NO_FIELDS


class ProjectAdd(ChangeModel):
    entity: Literal["project"]
    op: Literal["add"]
    fields: ProjectAddFields


class ProjectUpdate(ChangeModel):
    entity: Literal["project"]
    op: Literal["update"]
    target: Target
    fields: ProjectUpdateFields


class ProjectRemove(ChangeModel):
    entity: Literal["project"]
    op: Literal["remove"]
    target: Target
    fields: NoFields = NO_FIELDS


GoalChange = TypeAliasType(
    "GoalChange",
    Annotated[GoalAdd | GoalUpdate | GoalRerank | GoalTransition, Discriminator("op"), Untagged()],
)
PriorityChange = TypeAliasType(
    "PriorityChange",
    Annotated[PriorityAdd | PriorityUpdate | PriorityMove | PriorityRemove, Discriminator("op"), Untagged()],
)
ProjectChange = TypeAliasType(
    "ProjectChange",
    Annotated[ProjectAdd | ProjectUpdate | ProjectRemove, Discriminator("op"), Untagged()],
)
GoalModelChange = Annotated[
    GoalChange | PriorityChange | ProjectChange, Discriminator("entity"), Untagged("entity", "op")
]
CHANGES = ChangeList(GoalModelChange, MAX_CHANGES, tags=("entity", "op"))
