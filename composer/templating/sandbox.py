"""The bounded Jinja sandbox every manifest template renders in.

Threat model. Three parties put text into a render:

- **The ops team** writes manifests, hence the templates. Trusted to configure composer, but a
  template may be a mistake or come from a compromised account, so it is treated as hostile
  code: it is compiled and run on every turn.
- **End users** write instructions: untrusted. Their text only ever arrives as a variable value
  (``instruction.text``) and is never compiled, so a payload in it renders as literal text.
- **Remote servers and files** supply the content providers render (an HTTP response's
  ``json`` and ``text``, corpus ``hits``, memory ``item``): untrusted data, never compiled
  either, and possibly huge or deeply nested.

A template may compute on the data it is given and reach nothing else:

- **No internals.** ``ImmutableSandboxedEnvironment`` refuses underscore attributes and unsafe
  callables (``''.__class__.__mro__``, ``cycler.__init__.__globals__``, ``dict.mro``,
  ``str.format`` reaching attributes) and calls that mutate lists, dicts and sets.
- **No other names, templates or modules.** ``StrictUndefined`` makes a missing name an error
  instead of an empty string; ``lipsum`` is removed; there is no loader, so ``include``,
  ``import`` and ``extends`` have nothing to read. ``templating`` also refuses unknown names,
  ``self`` and those tags at compile time.
- **No live objects.** Templates see plain data only: ``templating.template_context`` and the
  providers build dicts, lists and scalars, never the Branch or Instruction themselves, and the
  only globals are ``range``, ``dict``, ``cycler``, ``joiner`` and ``namespace``.
- **No unbounded time or memory**, which Jinja's sandbox does not bound beyond capping
  ``range()`` at 100 000 items (macro recursion ends at Python's recursion limit). Each render
  gets a budget (``RenderLimits``): every call, attribute lookup, filter and loop iteration
  costs one operation against an operation count and a wall-clock deadline (read every 128
  operations); ``*``, ``**``, ``+`` and ``%`` refuse results over the value cap before
  computing them (``'x' * 10**9``, ``9 ** 9 ** 9``, ``'%999999999s' % 1``); ``str.format``
  and the growth-prone str methods and filters (``center``, ``replace``, ``join``,
  ``indent``, ``wordwrap`` ...) are estimated before they run; every filter's input and
  result, every call's result and every ``namespace`` attribute are measured; everything a
  template emits, inside ``{% set %}`` blocks and macros too, is counted. Filters and methods
  not estimated (``batch`` with a fill value, ``slice``, ``urlize``, ``int.to_bytes``) are
  measured only after they return.

``harden`` rewrites a parsed template so that its loops, literals and ``~`` go through the
bounded helpers, and ``run_bounded`` runs a render under a fresh budget. A violation raises
``RenderLimitExceeded`` (a Jinja ``SecurityError``), which ``templating`` turns into a
``TemplateError``.
"""

from __future__ import annotations

import functools
import re
import string
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from urllib.parse import quote

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace
from jinja2.visitor import NodeTransformer

__all__ = [
    "DEFAULT_LIMITS",
    "RenderLimitExceeded",
    "RenderLimits",
    "environment",
    "harden",
    "run_bounded",
]

_T = TypeVar("_T")


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


def _size(value: Any) -> int:
    """``_measure`` against the value cap: exact up to the cap, something over it beyond."""
    return _measure(value, _limits().value_chars)


def _check_size(value: Any, what: str) -> Any:
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
    return len(fmt) + widths + _size(args)


def _format_estimate(fmt: str, args: Any) -> int:
    """Upper bound of ``fmt.format(...)``; nested ``{}`` in a format spec is refused."""
    widths = 0
    for _literal, _field, spec, _conversion in string.Formatter().parse(fmt):
        if spec and "{" in spec:
            raise RenderLimitExceeded("nested format specs are not allowed in templates")
        widths += sum(int(number) for number in re.findall(r"\d+", spec or ""))
    return len(fmt) + widths + _size(args)


def _replace_estimate(text: str | bytes | bytearray, old: Any, new: Any) -> int:
    """Upper bound of ``text.replace(old, new)``; an empty ``old`` inserts at every position."""
    count = (len(text) + 1) if not old else text.count(old)
    return len(text) + count * max(len(new) - len(old), 0)


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


_Text = str | bytes | bytearray
_Args = tuple[Any, ...]
_MethodCheck = Callable[[_Text, _Args, Mapping[str, Any]], None]
_FilterCheck = Callable[[_Args, Mapping[str, Any]], None]


def _padding_check(method: str) -> _MethodCheck:
    """The check of one padding method, so that a refusal names the method."""

    def check(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
        _refuse_over(max(len(owner), _width(args, kwargs, 0, "width")), f"str.{method}()")

    return check


def _check_expandtabs(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    tabsize = _width(args, kwargs, 0, "tabsize") or 8
    tabs = owner.count("\t") if isinstance(owner, str) else owner.count(b"\t")
    _refuse_over(len(owner) + tabs * tabsize, "expandtabs")


def _check_str_replace(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    if len(args) >= 2:
        _refuse_over(_replace_estimate(owner, args[0], args[1]), "str.replace()")


def _check_str_join(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    if args:
        items = args[0]
        _refuse_over(len(owner) * len(items) + _size(items), "str.join()")


def _check_translate(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    if args and isinstance(args[0], Mapping):
        longest = max((len(v) for v in args[0].values() if isinstance(v, (str, bytes))), default=1)
        _refuse_over(len(owner) * longest, "str.translate()")


# The str and bytes methods whose result can outgrow their inputs, by method name.
_STR_METHOD_CHECKS: dict[str, _MethodCheck] = {
    **{name: _padding_check(name) for name in ("center", "ljust", "rjust", "zfill")},
    "expandtabs": _check_expandtabs,
    "replace": _check_str_replace,
    "join": _check_str_join,
    "translate": _check_translate,
}


def _precheck_str_method(method: Any, args: _Args, kwargs: Mapping[str, Any]) -> _Args:
    """Estimate the growth-prone methods of str and bytes before they allocate.

    Returns the arguments to call with (a lazy iterable given to ``join`` is materialized).
    """
    owner = getattr(method, "__self__", None)
    if not isinstance(owner, (str, bytes, bytearray)):
        return args
    name = getattr(method, "__name__", "")
    if name == "join":
        args = _materialize_first(args)
    check = _STR_METHOD_CHECKS.get(name)
    if check is not None:
        check(owner, args, kwargs)
    return args


def _text_len(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes)) else 0


def _check_center(args: _Args, kwargs: Mapping[str, Any]) -> None:
    _refuse_over(max(_text_len(args[0]), _width(args, kwargs, 1, "width")), "center")


def _check_indent(args: _Args, kwargs: Mapping[str, Any]) -> None:
    width = args[1] if len(args) > 1 else kwargs.get("width", 4)
    pad = width if isinstance(width, int) else len(str(width))
    lines = str(args[0]).count("\n") + 1
    _refuse_over(_text_len(args[0]) + lines * pad, "indent")


def _check_replace(args: _Args, kwargs: Mapping[str, Any]) -> None:
    if len(args) >= 3:
        _refuse_over(_replace_estimate(str(args[0]), str(args[1]), str(args[2])), "replace")


def _check_wordwrap(args: _Args, kwargs: Mapping[str, Any]) -> None:
    size = _text_len(args[0])
    width = max(_width(args, kwargs, 1, "width") or 79, 1)
    wrap = args[3] if len(args) > 3 else kwargs.get("wrapstring") or "\n"
    _refuse_over(size + (size // width + 1) * len(str(wrap)), "wordwrap")


def _check_format(args: _Args, kwargs: Mapping[str, Any]) -> None:
    if isinstance(args[0], str):
        _refuse_over(_printf_estimate(args[0], (args[1:], kwargs)), "format")


def _check_join(args: _Args, kwargs: Mapping[str, Any]) -> None:
    separator = args[1] if len(args) > 1 else kwargs.get("d", "")
    _refuse_over(len(str(separator)) * len(args[0]), "join")


# The filters whose result can outgrow their input, by filter name; each gets the filter's
# own arguments, the value first.
_FILTER_CHECKS: dict[str, _FilterCheck] = {
    "center": _check_center,
    "indent": _check_indent,
    "replace": _check_replace,
    "wordwrap": _check_wordwrap,
    "format": _check_format,
    "join": _check_join,
}


def _precheck_filter(name: str, args: _Args, kwargs: Mapping[str, Any]) -> None:
    """Estimate the growth-prone filters before they run (``args`` without the pass-arg)."""
    check = _FILTER_CHECKS.get(name)
    if check is not None and args:
        check(args, kwargs)


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


# The three helpers below take the context only so that Jinja's optimizer cannot fold them
# into constants at compile time: they must run, and be counted, on every render.


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
        _refuse_over(_size(sequence) * max(count, 0), "repetition")
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
        _refuse_over(_size(left) + _size(right), "concatenation")
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


def harden(ast: nodes.Template, url: bool = False) -> nodes.Template:
    """``ast`` rewritten by ``_Harden`` and bound to the shared sandbox, ready to compile."""
    hardened: nodes.Template = _Harden(url).visit(ast)
    hardened.set_environment(environment())
    return hardened


def run_bounded(limits: RenderLimits | None, run: Callable[[], _T]) -> _T:
    """Call ``run`` under a fresh budget of ``limits`` (default ``DEFAULT_LIMITS``)."""
    token = _budget.set(_Budget(limits or DEFAULT_LIMITS))
    try:
        return run()
    finally:
        _budget.reset(token)
