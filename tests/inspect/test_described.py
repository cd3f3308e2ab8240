"""DescribedModel: field descriptions from attribute docstrings, as pydantic's own
``use_attribute_docstrings`` gives them, without its per-class source search."""

from __future__ import annotations

import inspect

import pytest
from pydantic import BaseModel, ConfigDict, Field

from composer.inspect import documents, preview
from composer.inspect.described import DescribedModel, attribute_docstrings


class Described(DescribedModel):
    plain: int
    """An integer.

        Indented on its second line, which the description loses."""
    given: str = Field(default="x", description="its own description wins")
    """Not this one."""
    bare: bool = False
    undocumented: float = 0.0

    def method(self) -> None:
        """A method's docstring describes no field."""


class Child(Described):
    extra: list[int] = Field(default=[])
    """Added by the subclass."""


class ByPydantic(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    plain: int
    """An integer.

        Indented on its second line, which the description loses."""
    given: str = Field(default="x", description="its own description wins")
    """Not this one."""
    bare: bool = False
    undocumented: float = 0.0

    def method(self) -> None:
        """A method's docstring describes no field."""


def test_the_schema_equals_pydantics_attribute_docstrings() -> None:
    ours = Described.model_json_schema()
    theirs = ByPydantic.model_json_schema()
    ours.pop("title"), theirs.pop("title")
    assert ours == theirs
    assert ours["properties"]["plain"]["description"].endswith("which the description loses.")
    assert "description" not in ours["properties"]["undocumented"]


def test_a_subclass_keeps_its_parents_descriptions_and_adds_its_own() -> None:
    fields = Child.model_fields
    assert fields["plain"].description == Described.model_fields["plain"].description
    assert fields["extra"].description == "Added by the subclass."
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        Child.model_validate({"plain": 1, "unknown": 2})


def test_a_module_without_source_describes_nothing() -> None:
    assert attribute_docstrings("builtins") == {}
    assert attribute_docstrings("no.such.module") == {}


@pytest.mark.parametrize(
    "model",
    [
        value
        for module in (documents, preview)
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, DescribedModel)
        and value.__module__ == module.__name__
        and value.model_fields
    ],
    ids=lambda model: model.__name__,
)
def test_every_document_field_is_described(model: type[DescribedModel]) -> None:
    """Each field of the ``--json`` documents has the description the reference prints."""
    assert all(field.description for field in model.model_fields.values())
