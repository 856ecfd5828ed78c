"""operator_site/changes.py on its own, and the registry's `inline_single_use`: single-use
definitions written in place (meaning unchanged, shared and self-referring ones kept), error paths
without pydantic's tags, one Refusal per bad list naming the change and the field."""

from __future__ import annotations

from typing import Annotated, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Discriminator, ValidationError

from operator_site.changes import ChangeList, ChangeModel, Untagged
from operator_site.face.registry import inline_single_use
from operator_site.refusals import Refusal


class _Inner(ChangeModel):
    size: int


class _Add(ChangeModel):
    op: Literal["add"]
    inner: _Inner
    other: _Inner | None = None


class _Drop(ChangeModel):
    op: Literal["drop"]
    name: str


class _Node(BaseModel):
    child: _Node | None = None


_Change = Annotated[_Add | _Drop, Discriminator("op"), Untagged("op")]
_CHANGES = ChangeList(_Change, 3, tags=("op",))


class _Args(BaseModel):
    changes: list[_Change]
    tree: _Node | None = None


def test_single_use_definitions_are_written_in_place_and_mean_the_same() -> None:
    full = _Args.model_json_schema()
    inlined = inline_single_use(full)
    # _Inner is referenced twice (shared), _Node refers to itself: both stay definitions.
    assert set(inlined["$defs"]) == {"_Inner", "_Node"}
    samples = [
        {"changes": [{"op": "add", "inner": {"size": 1}}]},
        {"changes": [{"op": "drop", "name": "x"}], "tree": {"child": {"child": None}}},
        {"changes": [{"op": "drop"}]},
        {"changes": [{"op": "add", "inner": {"size": "x"}}]},
        {"changes": [{"op": "zap"}]},
        {"changes": [{"op": "add", "inner": {"size": 1}, "extra": 1}]},
    ]
    for sample in samples:
        one = jsonschema.Draft202012Validator(full).is_valid(sample)
        two = jsonschema.Draft202012Validator(inlined).is_valid(sample)
        assert one == two, sample
    assert "mapping" not in str(inlined)  # the tags' `const` says it


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        ({"op": "add", "inner": {"size": "x"}}, ("changes", 0, "inner", "size")),
        ({"op": "add", "inner": {"size": 1}, "zz": 1}, ("changes", 0, "zz")),
        ({"op": "zap"}, ("changes", 0, "op")),
        ({"name": "x"}, ("changes", 0, "op")),
    ],
)
def test_error_paths_name_the_field_not_the_tag(change: dict, loc: tuple) -> None:
    with pytest.raises(ValidationError) as error:
        _Args.model_validate({"changes": [change]})
    assert error.value.errors()[0]["loc"] == loc


def test_a_change_list_refuses_naming_the_change_and_the_field() -> None:
    with pytest.raises(Refusal) as refused:
        _CHANGES.validate([{"op": "drop", "name": "x"}, {"op": "add", "inner": {"size": "x"}}])
    assert refused.value.code == "invalid_change"
    assert refused.value.extra == {"index": 1, "field": "inner.size"}
    assert refused.value.reason.startswith("Change 2 (add): inner.size: ")
    for bad, code in (
        ([], "changes_required"),
        ("x", "changes_required"),
        ([{"op": "drop", "name": "x"}] * 4, "too_many_changes"),
    ):
        with pytest.raises(Refusal) as refused:
            _CHANGES.validate(bad)
        assert refused.value.code == code
    (parsed,) = _CHANGES.validate([{"op": "drop", "name": "x"}])
    assert _CHANGES.dump([parsed]) == [{"op": "drop", "name": "x"}]


def test_no_field_of_a_change_model_reads_true_or_false_as_a_number() -> None:
    """pydantic's lax mode reads `true` as 1: every numeric field of the real change models is
    strict or refuses booleans (`NOT_BOOL`), as `ToolArgs` does at the top level."""
    from pydantic import TypeAdapter

    import beliefs.schemas
    import goals.goal_model.schemas

    checked = []
    for module in (beliefs.schemas, goals.goal_model.schemas):
        for model in vars(module).values():
            if not (isinstance(model, type) and issubclass(model, ChangeModel)):
                continue
            for name, info in model.model_fields.items():
                adapter = TypeAdapter(Annotated[info.annotation, info])
                for flag in (True, False):
                    try:
                        value = adapter.validate_python(flag)
                    except ValidationError:
                        continue
                    checked.append(name)
                    assert isinstance(value, bool), f"{model.__name__}.{name} read {flag} as {value!r}"
    assert checked == []  # no change model has a boolean field today
