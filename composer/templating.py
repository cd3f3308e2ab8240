"""The one sandboxed Jinja environment, template compilation, and the template context.

Every template in a manifest (a query, a URL, an output format, a ``when`` expression) is
compiled here at load time, so a syntax error or an unknown name is a located ManifestError
before the first turn. Templates render in an ``ImmutableSandboxedEnvironment`` with
``StrictUndefined``: reaching for internals fails loudly instead of rendering an empty string.
User text only ever arrives as a variable; it is never compiled.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

import jinja2
import jinja2.meta
from jinja2.sandbox import ImmutableSandboxedEnvironment
from pydantic import AfterValidator

from composer.adapters import branch_view, instruction_view
from composer.errors import TemplateError

__all__ = [
    "CONTEXT_NAMES",
    "CompiledExpression",
    "CompiledTemplate",
    "Expression",
    "Template",
    "compile_expression",
    "compile_template",
    "environment",
    "template_context",
    "template_field",
]

# The names every template sees (see template_context).
CONTEXT_NAMES = frozenset({"instruction", "branch", "provider", "now"})

_TEMPLATE_MARKERS = ("{{", "{%", "{#")


@functools.cache
def environment() -> ImmutableSandboxedEnvironment:
    """The shared sandbox: strict undefined names, no autoescape, no env vars, no file loader."""
    return ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )


def _check_names(ast: jinja2.nodes.Template, allowed: frozenset[str]) -> None:
    env = environment()
    unknown = sorted(jinja2.meta.find_undeclared_variables(ast) - allowed - set(env.globals))
    if unknown:
        known = ", ".join(sorted(allowed))
        raise TemplateError(f"unknown name {unknown[0]!r} in template; available: {known}")


class CompiledTemplate:
    """A template checked at load time; ``render`` turns a context into text."""

    def __init__(self, source: str, names: frozenset[str]) -> None:
        self.source = source
        self.is_constant = not any(marker in source for marker in _TEMPLATE_MARKERS)
        self._template: jinja2.Template | None = None
        if self.is_constant:
            return
        env = environment()
        try:
            ast = env.parse(source)
        except jinja2.TemplateSyntaxError as e:
            raise TemplateError(f"template syntax error: {e.message}", lineno=e.lineno) from e
        _check_names(ast, names)
        self._template = env.from_string(ast)

    def render(self, context: Mapping[str, Any]) -> str:
        """Render with ``context``; any failure, a sandbox refusal included, is a TemplateError."""
        if self._template is None:
            return self.source
        try:
            return self._template.render(context)
        except Exception as e:
            raise TemplateError(f"template failed: {type(e).__name__}: {e}") from e


class CompiledExpression:
    """A Jinja expression such as a provider's ``when``; ``evaluate`` returns its value."""

    def __init__(self, source: str, names: frozenset[str]) -> None:
        self.source = source
        env = environment()
        try:
            ast = env.parse("{{ (" + source + ") }}")
        except jinja2.TemplateSyntaxError as e:
            raise TemplateError(f"expression syntax error: {e.message}") from e
        _check_names(ast, names)
        self._expression = env.compile_expression(source, undefined_to_none=False)

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        try:
            return self._expression(**context)
        except Exception as e:
            raise TemplateError(f"expression failed: {type(e).__name__}: {e}") from e


@functools.lru_cache(maxsize=1024)
def compile_template(source: str, names: frozenset[str] = CONTEXT_NAMES) -> CompiledTemplate:
    """Compile ``source``, allowing only ``names`` (plus Jinja's safe globals) as variables."""
    return CompiledTemplate(source, names)


@functools.lru_cache(maxsize=1024)
def compile_expression(source: str, names: frozenset[str] = CONTEXT_NAMES) -> CompiledExpression:
    """Compile a Jinja expression, allowing only ``names`` as variables."""
    return CompiledExpression(source, names)


def _validator(names: frozenset[str], expression: bool) -> Any:
    def check(value: str) -> str:
        try:
            if expression:
                compile_expression(value, names)
            else:
                compile_template(value, names)
        except TemplateError as e:
            raise ValueError(str(e)) from e
        return value

    return AfterValidator(check)


def template_field(*extra_names: str, expression: bool = False) -> Any:
    """An ``Annotated[str, ...]`` field type whose value must compile with these extra names.

    Provider config models declare template fields with it, so that validating a manifest
    compiles every template and a mistake is reported at its line and column.
    """
    names = CONTEXT_NAMES | frozenset(extra_names)
    return Annotated[str, _validator(names, expression)]


Template = template_field()
Expression = template_field(expression=True)


def template_context(
    branch: Any, instruction: Any, *, provider: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The variables a template sees, built the same way for composer and lionagi objects.

    ``instruction`` (text, guidance, context), ``branch`` (id, name, metadata), ``provider``
    (name) and ``now`` (UTC); plain data, so templates cannot reach the live objects.
    """
    context: dict[str, Any] = {
        "instruction": instruction_view(instruction),
        "branch": branch_view(branch),
        "provider": {"name": provider},
        "now": datetime.now(UTC),
    }
    if extra:
        context.update(extra)
    return context
