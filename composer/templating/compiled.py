"""Compiled templates and expressions: parsed and checked once, rendered bounded each turn.

A manifest's template is compiled when the manifest loads, so a syntax error, an unknown name,
``include``/``import``/``extends`` or ``self``, or an attribute its shapes say cannot exist
is a located error before the first turn; the Python code is generated only when it first
renders (a manifest is loaded to find mistakes far more often than all of it is rendered).
Compiled results are cached by their text, names and shapes, and shared by every copy of a
text however it was written. ``template_reads`` reads the same parse for what a template
depends on (the cache keys of ``caching`` and ``serve``).
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Generator, Mapping
from typing import Any, Protocol, Self, cast, runtime_checkable

import jinja2
from jinja2 import nodes
from jinja2.environment import TemplateExpression
from jinja2.parser import Parser

from composer.errors import TemplateError
from composer.templating.context import CONTEXT_NAMES
from composer.templating.limits import DEFAULT_LIMITS, RenderLimits, run_bounded
from composer.templating.sandbox import environment, harden
from composer.templating.shapes import TemplateShape, check_shapes

__all__ = [
    "CompiledExpression",
    "CompiledTemplate",
    "Located",
    "ReadPath",
    "Shapes",
    "cached_expression",
    "cached_template",
    "compile_expression",
    "compile_template",
    "frozen_shapes",
    "template_reads",
]

Shapes = tuple[tuple[str, TemplateShape], ...]
"""Shapes by name, hashable (compiled templates are cached by their arguments)."""


@runtime_checkable
class Located(Protocol):
    """A template source that knows where it was written (a manifest's strings do): run-time
    failures then name the provider, the field and ``file:line:col``."""

    @property
    def where(self) -> str: ...


def _template_line(error: BaseException) -> int | None:
    """The line of the template being rendered when ``error`` was raised, if Jinja says."""
    line = None
    traceback = error.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename == "<template>":
            line = traceback.tb_lineno
        traceback = traceback.tb_next
    return line


_TEMPLATE_MARKERS = ("{{", "{%", "{#")

_FORBIDDEN_NODES: dict[type[nodes.Node], str] = {
    nodes.Extends: "extends",
    nodes.Include: "include",
    nodes.Import: "import",
    nodes.FromImport: "from ... import",
}


# Names Jinja defines itself inside loops, macros and call blocks.
_SPECIAL_NAMES = frozenset({"loop", "caller", "varargs", "kwargs"})


def _check_names(ast: nodes.Template, allowed: frozenset[str]) -> None:
    """Refuse loading other templates, ``self``, and any free name outside ``allowed``."""
    env = environment()
    for node_type, tag in _FORBIDDEN_NODES.items():
        if next(ast.find_all(node_type), None) is not None:
            raise TemplateError(f"'{tag}' is not available in manifest templates")
    if any(name.name == "self" for name in ast.find_all(nodes.Name)):
        raise TemplateError("'self' is not available in manifest templates")
    # find_undeclared_variables also reports names set inside an ``{% if %}`` (they may be
    # unset on the other branch); a name the template assigns anywhere is not a typo.
    assigned = {
        name.name for name in ast.find_all(nodes.Name) if name.ctx in ("store", "param")
    } | {macro.name for macro in ast.find_all(nodes.Macro)}
    # The names it reads (what jinja2.meta.find_undeclared_variables reports, less the names
    # set anywhere, without generating code for it: a third of a template's load time).
    loaded = {name.name for name in ast.find_all(nodes.Name) if name.ctx == "load"}
    undeclared = loaded - assigned - _SPECIAL_NAMES
    unknown = sorted(undeclared - allowed - set(env.globals))
    if unknown:
        known = ", ".join(sorted(allowed))
        raise TemplateError(f"unknown name {unknown[0]!r} in template; available: {known}")


ReadPath = tuple[str | int, ...]
"""What a template reads of its context: a name, then constant attributes or keys
(``("branch", "metadata", "team")``)."""


@functools.lru_cache(maxsize=4096)
def template_reads(source: str, names: frozenset[str] = CONTEXT_NAMES) -> frozenset[ReadPath]:
    """The parts of the context names ``names`` that ``source`` can read, each as the
    longest constant path from the name (``{{ branch.metadata.team }}`` reads
    ``("branch", "metadata", "team")``; ``branch.metadata[key]`` reads all of
    ``("branch", "metadata")``).

    What a cached result depends on is found here: a path never under-states what is read (a
    name passed whole to a filter or assigned to another reads all of it). A text that is not
    a template, or does not parse, reads nothing.
    """
    if not any(marker in source for marker in _TEMPLATE_MARKERS):
        return frozenset()
    try:
        ast = environment().parse(source)
    except jinja2.TemplateSyntaxError:
        return frozenset()
    found: set[ReadPath] = set()
    _collect_reads(ast, names, found)
    return frozenset(found)


def _collect_reads(node: nodes.Node, names: frozenset[str], found: set[ReadPath]) -> None:
    path = _read_path(node)
    if path is not None:
        if path[0] in names:
            found.add(path)
        return
    for child in node.iter_child_nodes():
        _collect_reads(child, names, found)


def _read_path(node: nodes.Node) -> ReadPath | None:
    """The constant path ``node`` reads (``a.b["c"]``), or None when it is not one."""
    if isinstance(node, nodes.Name):
        return (node.name,) if node.ctx == "load" else None
    if isinstance(node, nodes.Getattr):
        base = _read_path(node.node)
        return None if base is None else (*base, node.attr)
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        key = node.arg.value
        if isinstance(key, str | int) and not isinstance(key, bool):
            base = _read_path(node.node)
            return None if base is None else (*base, key)
    return None


class _Code:
    """A checked, hardened template made into Python code when first rendered, once for all
    its copies: generating and compiling the code is most of a template's cost, and a
    manifest's templates are loaded (to find mistakes) far more often than all rendered."""

    def __init__(self, ast: nodes.Template) -> None:
        self._ast = ast
        self._template: jinja2.Template | None = None
        self._lock = threading.Lock()

    def template(self) -> jinja2.Template:
        template = self._template
        if template is None:
            with self._lock:
                if self._template is None:
                    self._template = environment().from_string(self._ast)
                template = self._template
        return template


_LOCATED_COPIES = 256
"""How many located copies one compiled text keeps (one per place it is written): beyond
that a copy is made per call, as it was before they were kept."""


class _Locatable:
    """What compiled templates and expressions share: ``at``, the copy that knows where its
    text was written, made once per place and shared by every caller from there."""

    source: str
    where: str | None = None
    _located: dict[tuple[type, str | None], Self] | None = None

    def at(self, source: str) -> Self:
        """This compiled text as compiled from ``source`` (the same text), which may know
        where it was written; the compiled code is shared.

        Every branch built from one manifest compiles the same located values, so the copy
        for each place is made once and handed to all of them (no copy per branch).
        """
        # ``Located`` by its attribute: a Protocol's isinstance took most of an attach
        where = getattr(source, "where", None)
        if not isinstance(where, str):
            where = None
        key = (type(source), where)  # a secret's copy stays one (its repr is masked)
        located = self._located
        if located is None:
            located = self._located = {}
        known = located.get(key)
        if known is not None:
            return known
        fresh = copy.copy(self)
        fresh.source = source
        fresh.where = where
        fresh._located = None
        if len(located) < _LOCATED_COPIES:
            fresh = located.setdefault(key, fresh)
        return fresh


class CompiledTemplate(_Locatable):
    """A template checked at load time; ``render`` turns a context into text, bounded.

    ``shapes`` (by name) are checked too: an attribute of one of them that cannot exist is a
    ``TemplateError`` here. ``where`` (set by ``compile_template`` for a located source)
    prefixes every run-time failure.
    """

    def __init__(
        self, source: str, names: frozenset[str], *, url: bool = False, shapes: Shapes = ()
    ) -> None:
        self.source = source
        self.is_constant = not any(marker in source for marker in _TEMPLATE_MARKERS)
        self._code: _Code | None = None
        if self.is_constant:
            return
        env = environment()
        try:
            ast = env.parse(source)
        except jinja2.TemplateSyntaxError as e:
            raise TemplateError(f"template syntax error: {e.message}", lineno=e.lineno) from e
        _check_names(ast, names)
        if shapes:
            check_shapes(ast, dict(shapes))
        self._code = _Code(harden(ast, url))

    def _failed(self, message: str, error: BaseException | None = None) -> TemplateError:
        """A run-time failure, prefixed with where the template was written and its line."""
        if self.where is None:
            return TemplateError(message)
        line = _template_line(error) if error is not None else None
        at = f"{self.where}, template line {line}" if line and line > 1 else self.where
        return TemplateError(f"{at}: {message}")

    def render(self, context: Mapping[str, Any], *, limits: RenderLimits | None = None) -> str:
        """Render with ``context``; any failure, a sandbox refusal or a limit, is a TemplateError."""
        if self._code is None:
            return self.source
        template = self._code.template()
        cap = (limits or DEFAULT_LIMITS).output_chars

        def run() -> str:
            chunks: list[str] = []
            size = 0
            # generate() is a generator: close it so an abandoned render unwinds at once
            stream = cast(Generator[str, None, None], template.generate(context))
            try:
                for chunk in stream:
                    size += len(chunk)
                    if size > cap:
                        raise TemplateError(f"rendered text exceeds {cap} characters")
                    chunks.append(chunk)
            finally:
                stream.close()
            return "".join(chunks)

        try:
            return run_bounded(limits, run)
        except TemplateError as e:
            if self.where is None:
                raise
            raise self._failed(str(e)) from e
        except Exception as e:
            raise self._failed(f"template failed: {type(e).__name__}: {e}", e) from e


class CompiledExpression(_Locatable):
    """A Jinja expression such as a provider's ``when``; ``evaluate`` returns its value."""

    def __init__(self, source: str, names: frozenset[str], *, shapes: Shapes = ()) -> None:
        self.source = source
        env = environment()
        try:
            parser = Parser(env, source, state="variable")
            expr = parser.parse_expression()
            if not parser.stream.eos:
                raise jinja2.TemplateSyntaxError(
                    "unexpected text after the expression", parser.stream.current.lineno
                )
        except jinja2.TemplateSyntaxError as e:
            raise TemplateError(f"expression syntax error: {e.message}") from e
        ast = nodes.Template([nodes.Assign(nodes.Name("result", "store"), expr)], lineno=1)
        ast.set_environment(env)
        _check_names(ast, names)
        if shapes:
            check_shapes(ast, dict(shapes))
        self._code = _Code(harden(ast))

    def evaluate(self, context: Mapping[str, Any], *, limits: RenderLimits | None = None) -> Any:
        try:
            expression = TemplateExpression(self._code.template(), undefined_to_none=False)
            return run_bounded(limits, lambda: expression(**context))
        except Exception as e:
            message = f"expression failed: {type(e).__name__}: {e}"
            raise TemplateError(f"{self.where}: {message}" if self.where else message) from e


def compile_template(
    source: str,
    names: frozenset[str] = CONTEXT_NAMES,
    *,
    url: bool = False,
    shapes: Mapping[str, TemplateShape] | None = None,
) -> CompiledTemplate:
    """Compile ``source``, allowing only ``names`` (plus Jinja's safe globals) as variables.

    With ``url=True`` every ``{{ }}`` output is percent-encoded, ``/`` included, unless the
    template pipes it through ``urlencode`` itself. With ``shapes``, reading an attribute of
    one of those variables that cannot exist is an error. A source read from a manifest
    (``Located``) makes its run-time failures say where it was written.
    """
    compiled = cached_template(str.__str__(source), names, url, frozen_shapes(shapes))
    return compiled if type(source) is str else compiled.at(source)


@functools.lru_cache(maxsize=1024)
def cached_template(
    source: str, names: frozenset[str], url: bool, shapes: Shapes
) -> CompiledTemplate:
    return CompiledTemplate(source, names, url=url, shapes=shapes)


def compile_expression(
    source: str,
    names: frozenset[str] = CONTEXT_NAMES,
    *,
    shapes: Mapping[str, TemplateShape] | None = None,
) -> CompiledExpression:
    """Compile a Jinja expression, allowing only ``names`` as variables (see
    ``compile_template`` for ``shapes`` and located sources)."""
    compiled = cached_expression(str.__str__(source), names, frozen_shapes(shapes))
    return compiled if type(source) is str else compiled.at(source)


@functools.lru_cache(maxsize=1024)
def cached_expression(source: str, names: frozenset[str], shapes: Shapes) -> CompiledExpression:
    return CompiledExpression(source, names, shapes=shapes)


def frozen_shapes(shapes: Mapping[str, TemplateShape] | None) -> Shapes:
    return tuple(sorted(shapes.items())) if shapes else ()
