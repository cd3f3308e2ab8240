"""The one sandboxed Jinja environment, template compilation, and the template context.

Every template in a manifest (a query, a URL, an output format, a ``when`` expression) is
compiled here at load time, so a syntax error or an unknown name is a located ManifestError
before the first turn. Templates render in an ``ImmutableSandboxedEnvironment`` with
``StrictUndefined``: reaching for internals fails loudly instead of rendering an empty string.
User text only ever arrives as a variable; it is never compiled.

Jinja's sandbox stops attribute escapes but not resource exhaustion, so rendering is also
bounded (``RenderLimits``): every call, attribute lookup, filter and loop iteration costs one
operation against a budget and a wall-clock deadline; ``*``, ``**``, ``+`` and ``%`` refuse
results over the value cap before computing them; the growth-prone string methods and filters
(``center``, ``replace``, ``join``, ``format`` ...) are estimated before they run; everything
a template emits, inside ``{% set %}`` blocks and macros too, is counted; and the final text is
capped. Any violation is a ``TemplateError`` from ``render``: that provider fails that turn,
the turn goes on (ADR-0008 D2).
"""

from __future__ import annotations

import functools
import re
import string
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, cast
from urllib.parse import quote

import jinja2
import jinja2.meta
from jinja2 import nodes
from jinja2.environment import TemplateExpression
from jinja2.exceptions import SecurityError
from jinja2.parser import Parser
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace
from jinja2.visitor import NodeTransformer
from pydantic import AfterValidator

from composer.adapters import branch_view, instruction_view
from composer.errors import TemplateError

__all__ = [
    "CONTEXT_NAMES",
    "DEFAULT_LIMITS",
    "CompiledExpression",
    "CompiledTemplate",
    "Expression",
    "RenderLimits",
    "Template",
    "UrlTemplate",
    "compile_expression",
    "compile_template",
    "environment",
    "template_check",
    "template_context",
    "template_field",
]

# The names every template sees (see template_context).
CONTEXT_NAMES = frozenset({"instruction", "branch", "provider", "now"})

_TEMPLATE_MARKERS = ("{{", "{%", "{#")


@dataclass(frozen=True)
class RenderLimits:
    """Bounds on one render; exceeding any of them is a TemplateError.

    ``output_chars``: the rendered text. ``value_chars``: any one value a template builds
    (a string, or a container measured as its elements plus their string lengths).
    ``produced_chars``: everything emitted during the render, captured blocks included.
    ``ops``: calls, attribute lookups, filters and loop iterations. ``seconds``: wall clock.
    ``int_bits``: the size of an integer ``*`` or ``**`` may produce.
    """

    output_chars: int = 100_000
    value_chars: int = 4_000_000
    produced_chars: int = 8_000_000
    ops: int = 1_000_000
    seconds: float = 1.0
    int_bits: int = 65_536


DEFAULT_LIMITS = RenderLimits()


class RenderLimitExceeded(SecurityError):
    """A template hit one of its RenderLimits."""


class _Budget:
    """What one render has spent; lives in a ContextVar for the duration of the render."""

    __slots__ = ("deadline", "limits", "ops", "produced")

    def __init__(self, limits: RenderLimits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.seconds
        self.ops = 0
        self.produced = 0

    def tick(self) -> None:
        self.ops += 1
        if self.ops > self.limits.ops:
            raise RenderLimitExceeded(f"template exceeded {self.limits.ops} operations")
        if self.ops & 127 == 0 and time.monotonic() > self.deadline:
            raise RenderLimitExceeded(f"template exceeded {self.limits.seconds}s")


_budget: ContextVar[_Budget | None] = ContextVar("composer_template_budget", default=None)


def _limits() -> RenderLimits:
    budget = _budget.get()
    return budget.limits if budget is not None else DEFAULT_LIMITS


def _tick() -> None:
    budget = _budget.get()
    if budget is not None:
        budget.tick()


def _measure(value: Any, limit: int) -> int:
    """Size of ``value``: one per object plus string lengths, counted until over ``limit``.

    Shared references count every time they are reached, as ``str()`` would expand them.
    """
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        total += 1
        if isinstance(item, (str, bytes, bytearray)):
            total += len(item)
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        if total > limit:
            return total
    return total


def _check_size(value: Any, what: str = "value") -> Any:
    cap = _limits().value_chars
    if _measure(value, cap) > cap:
        raise RenderLimitExceeded(f"template {what} exceeds {cap} characters")
    return value


def _refuse_over(estimate: int, what: str) -> None:
    cap = _limits().value_chars
    if estimate > cap:
        raise RenderLimitExceeded(f"template {what} would exceed {cap} characters")


_PRINTF_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")


def _printf_estimate(fmt: str, args: Any) -> int:
    """Upper bound of ``fmt % args``; a ``*`` width (taken from the data) is refused."""
    widths = 0
    for match in _PRINTF_SPEC.finditer(fmt):
        for group in match.groups():
            if group == "*":
                raise RenderLimitExceeded("'*' widths are not allowed in templates")
            if group:
                widths += int(group)
    return len(fmt) + widths + _measure(args, _limits().value_chars)


def _format_estimate(fmt: str, args: Any) -> int:
    """Upper bound of ``fmt.format(...)``; nested ``{}`` in a format spec is refused."""
    widths = 0
    for _literal, _field, spec, _conversion in string.Formatter().parse(fmt):
        if spec and "{" in spec:
            raise RenderLimitExceeded("nested format specs are not allowed in templates")
        widths += sum(int(number) for number in re.findall(r"\d+", spec or ""))
    return len(fmt) + widths + _measure(args, _limits().value_chars)


def _width(args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int, name: str) -> int:
    value = args[index] if len(args) > index else kwargs.get(name, 0)
    return value if isinstance(value, int) else 0


def _materialize_first(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``args`` with a lazy first argument (``map``, ``select``) turned into a list, so that
    ``join`` can be estimated; the list is bounded by the loop and range limits upstream."""
    if args and not isinstance(args[0], (str, bytes, bytearray, list, tuple, Mapping)):
        items = []
        for item in args[0]:
            _tick()
            items.append(item)
        return (items, *args[1:])
    return args


def _precheck_str_method(
    method: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[Any, ...]:
    """Estimate the growth-prone methods of str and bytes before they allocate.

    Returns the arguments to call with (a lazy iterable given to ``join`` is materialized).
    """
    owner = getattr(method, "__self__", None)
    if not isinstance(owner, (str, bytes, bytearray)):
        return args
    name = getattr(method, "__name__", "")
    if name == "join":
        args = _materialize_first(args)
    size = len(owner)
    if name in ("center", "ljust", "rjust", "zfill"):
        _refuse_over(max(size, _width(args, kwargs, 0, "width")), f"str.{name}()")
    elif name == "expandtabs":
        tabsize = _width(args, kwargs, 0, "tabsize") or 8
        tabs = owner.count("\t") if isinstance(owner, str) else owner.count(b"\t")
        _refuse_over(size + tabs * tabsize, name)
    elif name == "replace" and len(args) >= 2:
        old, new = args[0], args[1]
        count = (size + 1) if not old else owner.count(old)
        _refuse_over(size + count * max(len(new) - len(old), 0), "str.replace()")
    elif name == "join" and args:
        items = args[0]
        _refuse_over(size * len(items) + _measure(items, _limits().value_chars), "str.join()")
    elif name == "translate" and args and isinstance(args[0], Mapping):
        longest = max((len(v) for v in args[0].values() if isinstance(v, (str, bytes))), default=1)
        _refuse_over(size * longest, "str.translate()")
    return args


def _precheck_filter(name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Estimate the growth-prone filters before they run (``args`` without the pass-arg)."""
    if not args:
        return
    value = args[0]
    size = len(value) if isinstance(value, (str, bytes)) else 0
    if name == "center":
        _refuse_over(max(size, _width(args, kwargs, 1, "width")), "center")
    elif name == "indent":
        width = args[1] if len(args) > 1 else kwargs.get("width", 4)
        pad = width if isinstance(width, int) else len(str(width))
        lines = str(value).count("\n") + 1
        _refuse_over(size + lines * pad, "indent")
    elif name == "replace" and len(args) >= 3:
        text, old, new = str(value), str(args[1]), str(args[2])
        count = (len(text) + 1) if not old else text.count(old)
        _refuse_over(len(text) + count * max(len(new) - len(old), 0), "replace")
    elif name == "wordwrap":
        width = max(_width(args, kwargs, 1, "width") or 79, 1)
        wrap = args[3] if len(args) > 3 else kwargs.get("wrapstring") or "\n"
        _refuse_over(size + (size // width + 1) * len(str(wrap)), "wordwrap")
    elif name == "format" and isinstance(value, str):
        _refuse_over(_printf_estimate(value, (args[1:], kwargs)), "format")
    elif name == "join":
        separator = args[1] if len(args) > 1 else kwargs.get("d", "")
        _refuse_over(len(str(separator)) * len(value), "join")


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """A filter that costs an operation, is estimated before it runs and checked after."""
    passes_arg = getattr(func, "jinja_pass_arg", None) is not None

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _tick()
        head, own = (args[:1], args[1:]) if passes_arg else ((), args)
        if name == "join":
            own = _materialize_first(own)
        if own:
            _check_size(own[0], f"input of filter {name!r}")
        _precheck_filter(name, own, kwargs)
        return _check_size(func(*head, *own, **kwargs), f"result of filter {name!r}")

    return bounded


def _urlsegment(value: Any) -> str:
    """Percent-encode for a URL, ``/`` included, so user text stays one path segment."""
    encoded = quote(str(value), safe="")
    return {".": "%2E", "..": "%2E%2E"}.get(encoded, encoded)


@jinja2.pass_context
def _literal(context: Context, text: str) -> str:
    """Template text routed through ``finalize`` so literals inside loops are counted too."""
    return text


@jinja2.pass_context
def _bounded_iter(context: Context, iterable: Any) -> Iterator[Any]:
    """The iterable of every ``{% for %}``: each iteration costs one operation."""
    for item in iterable:
        _tick()
        yield item


@jinja2.pass_context
def _concat(context: Context, parts: list[Any]) -> str:
    """``a ~ b``, measured before ``str()`` expands anything."""
    _check_size(parts, "concatenation")
    return "".join(str(part) for part in parts)


def _finalize(value: Any) -> Any:
    """Every ``{{ }}`` and every literal passes here: measured and counted before ``str()``."""
    budget = _budget.get()
    if budget is None:
        return value
    budget.tick()
    size = _measure(value, budget.limits.produced_chars)
    budget.produced += size
    if budget.produced > budget.limits.produced_chars:
        raise RenderLimitExceeded(
            f"template produced more than {budget.limits.produced_chars} characters"
        )
    return value


class _BoundedNamespace(Namespace):
    """``namespace()`` whose attributes cannot grow past the value cap across iterations."""

    def __setitem__(self, name: str, value: Any) -> None:
        _check_size(value, f"namespace attribute {name!r}")
        super().__setitem__(name, value)


def _intercepted_mul(left: Any, right: Any) -> Any:
    if isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > _limits().int_bits:
            raise RenderLimitExceeded("integer product too large")
    elif isinstance(right, int) or isinstance(left, int):
        sequence, count = (left, right) if isinstance(right, int) else (right, left)
        _refuse_over(_measure(sequence, _limits().value_chars) * max(count, 0), "repetition")
    return left * right


def _intercepted_pow(left: Any, right: Any) -> Any:
    if (
        isinstance(left, int)
        and isinstance(right, int)
        and right > 0
        and abs(left) > 1
        and left.bit_length() * right > _limits().int_bits
    ):
        raise RenderLimitExceeded("integer power too large")
    return left**right


def _intercepted_add(left: Any, right: Any) -> Any:
    if not (isinstance(left, (int, float)) and isinstance(right, (int, float))):
        cap = _limits().value_chars
        _refuse_over(_measure(left, cap) + _measure(right, cap), "concatenation")
    return left + right


def _intercepted_mod(left: Any, right: Any) -> Any:
    if isinstance(left, str):
        _refuse_over(_printf_estimate(left, right), "'%' formatting")
    return left % right


class _Sandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox plus the resource bounds described in the module docstring."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self) -> None:
        super().__init__(
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=True,
            finalize=_finalize,
        )
        self.binop_table.update(
            {
                "*": _intercepted_mul,
                "**": _intercepted_pow,
                "+": _intercepted_add,
                "%": _intercepted_mod,
            }
        )
        # lipsum generates text for a caller-chosen count: pure cost, no use in a manifest.
        self.globals.pop("lipsum", None)
        self.globals["namespace"] = _BoundedNamespace
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}
        self.filters.update(
            {
                "urlsegment": _bounded_filter("urlsegment", _urlsegment),
                "_literal": _literal,
                "_iter": _bounded_iter,
                "_concat": _concat,
            }
        )

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _tick()
        return _check_size(super().call_binop(context, operator, left, right), "result")

    def getattr(self, obj: Any, attribute: str) -> Any:
        _tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _tick()
        return super().getitem(obj, argument)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        formatter = super().wrap_str_format(value)
        if formatter is None:
            return None
        fmt = str(value.__self__)

        @functools.wraps(formatter)
        def bounded(*args: Any, **kwargs: Any) -> str:
            _refuse_over(_format_estimate(fmt, (args, kwargs)), "str.format()")
            return formatter(*args, **kwargs)

        return bounded

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _tick()
        args = _precheck_str_method(__obj, args, kwargs)
        return _check_size(super().call(__context, __obj, *args, **kwargs), "call result")


@functools.cache
def environment() -> ImmutableSandboxedEnvironment:
    """The shared sandbox: strict undefined names, no autoescape, no env vars, no loader."""
    return _Sandbox()


def _filter(node: nodes.Expr, name: str) -> nodes.Filter:
    return nodes.Filter(node, name, [], [], None, None, lineno=node.lineno)


class _Harden(NodeTransformer):
    """Route loops, literals and ``~`` through the bounded helpers; URL-encode URL outputs."""

    def __init__(self, url: bool) -> None:
        self.url = url

    def visit_Output(self, node: nodes.Output) -> nodes.Node:
        if self.url:
            node.nodes = [
                child
                if isinstance(child, nodes.TemplateData)
                or (isinstance(child, nodes.Filter) and child.name in ("urlencode", "urlsegment"))
                else _filter(child, "urlsegment")
                for child in node.nodes
            ]
        result: nodes.Node = self.generic_visit(node)
        return result

    def visit_TemplateData(self, node: nodes.TemplateData) -> nodes.Node:
        return _filter(nodes.Const(node.data, lineno=node.lineno), "_literal")

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = _filter(cast(nodes.Expr, node.iter), "_iter")
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return _filter(nodes.List(node.nodes, lineno=node.lineno), "_concat")


_FORBIDDEN_NODES: dict[type[nodes.Node], str] = {
    nodes.Extends: "extends",
    nodes.Include: "include",
    nodes.Import: "import",
    nodes.FromImport: "from ... import",
}


# Names Jinja defines itself inside loops, macros and call blocks.
_SPECIAL_NAMES = frozenset({"loop", "caller", "varargs", "kwargs"})


def _check_names(ast: nodes.Template, allowed: frozenset[str]) -> None:
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
    undeclared = jinja2.meta.find_undeclared_variables(ast) - assigned - _SPECIAL_NAMES
    unknown = sorted(undeclared - allowed - set(env.globals))
    if unknown:
        known = ", ".join(sorted(allowed))
        raise TemplateError(f"unknown name {unknown[0]!r} in template; available: {known}")


def _harden(ast: nodes.Template, url: bool = False) -> nodes.Template:
    hardened: nodes.Template = _Harden(url).visit(ast)
    hardened.set_environment(environment())
    return hardened


def _run_bounded(limits: RenderLimits | None, run: Callable[[], Any]) -> Any:
    token = _budget.set(_Budget(limits or DEFAULT_LIMITS))
    try:
        return run()
    finally:
        _budget.reset(token)


class CompiledTemplate:
    """A template checked at load time; ``render`` turns a context into text, bounded."""

    def __init__(self, source: str, names: frozenset[str], *, url: bool = False) -> None:
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
        self._template = env.from_string(_harden(ast, url))

    def render(self, context: Mapping[str, Any], *, limits: RenderLimits | None = None) -> str:
        """Render with ``context``; any failure, a sandbox refusal or a limit, is a TemplateError."""
        if self._template is None:
            return self.source
        template = self._template
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
            result: str = _run_bounded(limits, run)
        except TemplateError:
            raise
        except Exception as e:
            raise TemplateError(f"template failed: {type(e).__name__}: {e}") from e
        return result


class CompiledExpression:
    """A Jinja expression such as a provider's ``when``; ``evaluate`` returns its value."""

    def __init__(self, source: str, names: frozenset[str]) -> None:
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
        template = env.from_string(_harden(ast))
        self._expression = TemplateExpression(template, undefined_to_none=False)

    def evaluate(self, context: Mapping[str, Any], *, limits: RenderLimits | None = None) -> Any:
        try:
            return _run_bounded(limits, lambda: self._expression(**context))
        except Exception as e:
            raise TemplateError(f"expression failed: {type(e).__name__}: {e}") from e


@functools.lru_cache(maxsize=1024)
def compile_template(
    source: str, names: frozenset[str] = CONTEXT_NAMES, *, url: bool = False
) -> CompiledTemplate:
    """Compile ``source``, allowing only ``names`` (plus Jinja's safe globals) as variables.

    With ``url=True`` every ``{{ }}`` output is percent-encoded, ``/`` included, unless the
    template pipes it through ``urlencode`` itself.
    """
    return CompiledTemplate(source, names, url=url)


@functools.lru_cache(maxsize=1024)
def compile_expression(source: str, names: frozenset[str] = CONTEXT_NAMES) -> CompiledExpression:
    """Compile a Jinja expression, allowing only ``names`` as variables."""
    return CompiledExpression(source, names)


def _validator(names: frozenset[str], expression: bool, url: bool) -> Any:
    def check(value: str) -> str:
        try:
            if expression:
                compile_expression(value, names)
            else:
                compile_template(value, names, url=url)
        except TemplateError as e:
            raise ValueError(str(e)) from e
        return value

    return AfterValidator(check)


def template_check(*extra_names: str, expression: bool = False, url: bool = False) -> Any:
    """The validator behind ``template_field``, for ``Annotated[str, template_check(...)]``
    (which type checkers accept as a field type where a computed alias is not)."""
    return _validator(CONTEXT_NAMES | frozenset(extra_names), expression, url)


def template_field(*extra_names: str, expression: bool = False, url: bool = False) -> Any:
    """An ``Annotated[str, ...]`` field type whose value must compile with these extra names.

    Provider config models declare template fields with it, so that validating a manifest
    compiles every template and a mistake is reported at its line and column.
    """
    return Annotated[str, template_check(*extra_names, expression=expression, url=url)]


Template = template_field()
Expression = template_field(expression=True)
UrlTemplate = template_field(url=True)


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
