"""Template fields for pydantic models: a value is compiled as it is validated.

Provider config models declare their templates with these types, so validating a manifest
compiles every template in it and a mistake is a validation error at its line and column.
The compiled result is cached (``compiled``), so the provider that renders it later pays no
second compile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator

from composer.errors import TemplateError
from composer.templating.compiled import cached_expression, cached_template, frozen_shapes
from composer.templating.context import CONTEXT_NAMES, CONTEXT_SHAPES
from composer.templating.shapes import TemplateShape

__all__ = [
    "Expression",
    "Template",
    "UrlTemplate",
    "template_check",
    "template_check_exact",
    "template_field",
]


def template_check(
    *extra_names: str,
    expression: bool = False,
    url: bool = False,
    shapes: Mapping[str, TemplateShape] | None = None,
) -> AfterValidator:
    """The validator behind ``template_field``, for ``Annotated[str, template_check(...)]``
    (which type checkers accept as a field type where a computed alias is not).

    The template sees ``CONTEXT_NAMES`` (their shapes checked), ``extra_names`` and the
    names of ``shapes`` (checked against them): ``template_check("query", shapes={"hits":
    TemplateShape.list_of(HIT)})`` makes ``{{ hit.pth }}`` in a loop over hits an error.
    """
    names = CONTEXT_NAMES | frozenset(extra_names) | frozenset(shapes or ())
    return template_check_exact(names, expression, url, {**CONTEXT_SHAPES, **(shapes or {})})


def template_check_exact(
    names: frozenset[str],
    expression: bool = False,
    url: bool = False,
    shapes: Mapping[str, TemplateShape] | None = None,
) -> AfterValidator:
    """A validator compiling the value with exactly ``names`` as its variables: for templates
    that render outside a turn's context (a block's ``wrap`` sees provider, text and nonce).
    Only the names given ``shapes`` have their attributes checked."""
    known = frozen_shapes({name: shape for name, shape in (shapes or {}).items() if name in names})

    def check(value: str) -> str:
        source = str.__str__(value)  # compiled once per text, wherever it was written
        try:
            if expression:
                cached_expression(source, names, known)
            else:
                cached_template(source, names, url, known)
        except TemplateError as e:
            raise ValueError(str(e)) from e
        return value

    return AfterValidator(check)


def template_field(
    *extra_names: str,
    expression: bool = False,
    url: bool = False,
    shapes: Mapping[str, TemplateShape] | None = None,
) -> Any:
    """An ``Annotated[str, ...]`` field type whose value must compile with these extra names.

    Provider config models declare template fields with it, so that validating a manifest
    compiles every template and a mistake is reported at its line and column.
    """
    check = template_check(*extra_names, expression=expression, url=url, shapes=shapes)
    return Annotated[str, check]


Template = template_field()
Expression = template_field(expression=True)
UrlTemplate = template_field(url=True)
