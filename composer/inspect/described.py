"""A pydantic model whose fields are described by the docstring under each of them, read from
one parse of its module rather than pydantic's ``use_attribute_docstrings``.

On Python before 3.13 pydantic finds each class's source by walking the call stack and
tokenizing the class body in pure Python, about 1.5 ms a class: 45 ms of every command that
imports the ``--json`` documents, which a preview without ``--json`` does not even print. Here
a module is parsed once, by the C parser, the first time one of its models is defined, and the
models build when first used (``defer_build``), so the descriptions are in their schemas as
pydantic's would be (the reference page's test compares them).
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["DescribedModel", "attribute_docstrings"]


class DescribedModel(BaseModel):
    """A model that forbids unknown keys and takes each field's description from the string
    literal right below its annotation, where the field has none of its own."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        described = attribute_docstrings(cls.__module__).get(cls.__qualname__, {})
        for name, field in cls.model_fields.items():
            if field.description is None and name in described:
                field.description = described[name]


@functools.cache
def attribute_docstrings(module: str) -> dict[str, dict[str, str]]:
    """Each top-level class of ``module`` by name, with its attributes' docstrings (an
    annotated assignment directly followed by a string, as pydantic reads them)."""
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module]))
    except (KeyError, OSError, TypeError, SyntaxError):
        return {}  # no source to read (a frozen or interactive module): no descriptions
    classes: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = _docstrings_of(node)
    return classes


def _docstrings_of(node: ast.ClassDef) -> dict[str, str]:
    found: dict[str, str] = {}
    for previous, statement in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(previous, ast.AnnAssign)
            and isinstance(previous.target, ast.Name)
            and isinstance(statement, ast.Expr)
            and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str)
        ):
            found[previous.target.id] = inspect.cleandoc(statement.value.value)
    return found
