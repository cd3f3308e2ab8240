"""The template API: compiled templates and expressions, their field types, their context.

Every template in a manifest (a query, a URL, an output format, a ``when`` expression) is
compiled at load time, so a syntax error or an unknown name is a located ManifestError before
the first turn. ``StrictUndefined`` makes reaching for internals fail loudly instead of
rendering an empty string. User text only ever arrives as a variable (``template_context``);
it is never compiled. Any failure while rendering, a sandbox refusal or a limit, is a
``TemplateError`` from ``render`` or ``evaluate``: that provider fails that turn, the turn goes
on (ADR-0008 D2).

This package's modules, each one concern, the lower never importing the higher:

* ``limits``: what one render may spend (``RenderLimits``) and the budget it spends;
* ``measure``: the size of a value, as ``str()`` would print it;
* ``costs``: what a filter or method will cost, estimated before it runs;
* ``sandbox``: the bounded Jinja environment, and ``harden`` for a parsed template;
* ``shapes``: what a template variable holds, and the load-time check of attributes;
* ``views``: composer's and lionagi's branches and instructions as plain data;
* ``context``: the names every template sees, their shapes, ``template_context``;
* ``compiled``: compiled templates and expressions, and what a template reads;
* ``fields``: the pydantic field types that compile a value as it is validated.

The names below are the API; import them from here.
"""

from __future__ import annotations

from composer.templating.compiled import (
    CompiledExpression,
    CompiledTemplate,
    Located,
    ReadPath,
    compile_expression,
    compile_template,
    template_reads,
)
from composer.templating.context import CONTEXT_NAMES, CONTEXT_SHAPES, template_context
from composer.templating.fields import (
    Expression,
    Template,
    UrlTemplate,
    template_check,
    template_check_exact,
    template_field,
)
from composer.templating.limits import DEFAULT_LIMITS, RenderLimits
from composer.templating.sandbox import environment
from composer.templating.shapes import TemplateShape

__all__ = [
    "CONTEXT_NAMES",
    "CONTEXT_SHAPES",
    "DEFAULT_LIMITS",
    "CompiledExpression",
    "CompiledTemplate",
    "Expression",
    "Located",
    "ReadPath",
    "RenderLimits",
    "Template",
    "TemplateShape",
    "UrlTemplate",
    "compile_expression",
    "compile_template",
    "environment",
    "template_check",
    "template_check_exact",
    "template_context",
    "template_field",
    "template_reads",
]
