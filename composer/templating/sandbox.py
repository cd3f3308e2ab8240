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
  ``import`` and ``extends`` have nothing to read. ``compiled`` also refuses unknown names,
  ``self`` and those tags at compile time.
- **No live objects.** Templates see plain data only: ``context.template_context`` and the
  providers build dicts, lists and scalars, never the Branch or Instruction themselves, and the
  only globals are ``range``, ``dict``, ``cycler``, ``joiner`` and ``namespace``.
- **No unbounded time or memory**, which Jinja's sandbox does not bound beyond capping
  ``range()`` at 100 000 items. Each render gets a budget (``RenderLimits``), and no single
  operation may escape it:

  - *Operations and time.* Every call, attribute lookup, filter and loop iteration costs one
    operation against an operation count and a wall-clock deadline. A filter or method whose
    work grows with its input is charged that work before it runs (``costs``): one operation
    per item it walks or builds (``sort``, ``select``, ``batch``, ``slice``, ``str.split``
    ...) and one per 32 characters it copies or scans more than once (``sum`` of lists, long
    words in ``wordwrap`` and ``urlize``, ``pprint`` of nested data). The clock is read every
    128 operations, right after a large charge, while large inputs stream through a filter
    and while a value is measured, so one expensive call overruns the deadline by a bounded
    slice of work. Calls nest at most ``call_depth`` deep (macro recursion, ``caller()``,
    recursive loops).
  - *Size.* ``*``, ``**``, ``+`` and ``%`` refuse results over the value cap before computing
    them (``'x' * 10**9``, ``9 ** 9 ** 9``, ``'%999999999s' % 1``); ``str.format`` and the
    growth-prone methods and filters (``center``, ``replace``, ``join``, ``batch``, ``urlize``,
    ``int.to_bytes``, ``str.encode`` ...) are estimated from their arguments before they
    allocate; every filter's input and result, every call's result and every ``namespace``
    attribute are measured (an integer by its digits, and refused over ``int_bits``);
    everything a template emits, inside ``{% set %}`` blocks and macros too, is counted.
    Codecs implemented in Python (``punycode``, ``idna``) are refused. What is left is growth
    by a constant factor, caught when the value is measured: ``repr()`` of escaped characters,
    ``tojson`` escapes (at most 12 times the input).

This module is the environment: Jinja's hooks (filters, calls, attribute lookups, operators,
``finalize``, ``namespace``) wired to those bounds, and ``harden``, which rewrites a parsed
template so that its loops, literals and ``~`` go through the bounded helpers. The bounds
themselves and the budget a render spends are in ``limits`` (``run_bounded`` runs a render
under a fresh one), sizes in ``measure``, estimates in ``costs``. A violation raises
``RenderLimitExceeded`` (a Jinja ``SecurityError``), which ``CompiledTemplate.render`` turns
into a ``TemplateError``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, cast
from urllib.parse import quote

import jinja2
from jinja2 import nodes
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace
from jinja2.visitor import NodeTransformer

from composer.templating.costs import (
    format_estimate,
    precheck_filter,
    precheck_method,
    printf_estimate,
)
from composer.templating.limits import (
    RenderLimitExceeded,
    current_budget,
    current_limits,
    refuse_over,
    tick,
)
from composer.templating.measure import check_size, measure, size_of

__all__ = ["environment", "harden"]


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """A filter that costs an operation, is estimated before it runs and checked after."""
    passes_arg = getattr(func, "jinja_pass_arg", None) is not None

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        tick()
        head, own = (args[:1], args[1:]) if passes_arg else ((), args)
        if own:
            own = precheck_filter(name, own, kwargs)
        return check_size(func(*head, *own, **kwargs), f"result of filter {name!r}")

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
        tick()
        yield item


@jinja2.pass_context
def _concat(context: Context, parts: list[Any]) -> str:
    """``a ~ b``, measured before ``str()`` expands anything."""
    check_size(parts, "concatenation")
    return "".join(str(part) for part in parts)


def _finalize(value: Any) -> Any:
    """Every ``{{ }}`` and every literal passes here: measured and counted before ``str()``."""
    budget = current_budget.get()
    if budget is None:
        return value
    budget.tick()
    size = measure(value, budget.limits.produced_chars)
    budget.produced += size
    if budget.produced > budget.limits.produced_chars:
        raise RenderLimitExceeded(
            f"template produced more than {budget.limits.produced_chars} characters"
        )
    return value


class _BoundedNamespace(Namespace):
    """``namespace()`` whose attributes cannot grow past the value cap across iterations."""

    def __setitem__(self, name: str, value: Any) -> None:
        check_size(value, f"namespace attribute {name!r}")
        super().__setitem__(name, value)


# What ``*`` repeats when the other operand is an integer; anything else is arithmetic.
_REPEATABLE = (str, bytes, bytearray, list, tuple)


def _intercepted_mul(left: Any, right: Any) -> Any:
    if isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > current_limits().int_bits:
            raise RenderLimitExceeded("integer product too large")
    else:
        count, sequence = (right, left) if isinstance(right, int) else (left, right)
        if isinstance(count, int) and isinstance(sequence, _REPEATABLE):
            refuse_over(size_of(sequence) * max(count, 0), "repetition")
    return left * right


def _intercepted_pow(left: Any, right: Any) -> Any:
    if (
        isinstance(left, int)
        and isinstance(right, int)
        and right > 0
        and abs(left) > 1
        and left.bit_length() * right > current_limits().int_bits
    ):
        raise RenderLimitExceeded("integer power too large")
    return left**right


def _intercepted_add(left: Any, right: Any) -> Any:
    if not (isinstance(left, (int, float)) and isinstance(right, (int, float))):
        refuse_over(size_of(left) + size_of(right), "concatenation")
    return left + right


def _intercepted_mod(left: Any, right: Any) -> Any:
    if isinstance(left, (str, bytes, bytearray)):
        fmt = left if isinstance(left, str) else left.decode("latin-1")
        refuse_over(printf_estimate(fmt, right), "'%' formatting")
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
        tick()
        return check_size(super().call_binop(context, operator, left, right), "result")

    def getattr(self, obj: Any, attribute: str) -> Any:
        tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        tick()
        return super().getitem(obj, argument)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        formatter = super().wrap_str_format(value)
        if formatter is None:
            return None
        fmt = str(value.__self__)

        @functools.wraps(formatter)
        def bounded(*args: Any, **kwargs: Any) -> str:
            refuse_over(format_estimate(fmt, (args, kwargs)), "str.format()")
            return formatter(*args, **kwargs)

        return bounded

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        """Every call: counted, estimated, and nested at most ``call_depth`` deep (a macro
        calling itself ends here, not at Python's recursion limit)."""
        tick()
        args = precheck_method(__obj, args, kwargs)
        budget = current_budget.get()
        if budget is None:
            return check_size(super().call(__context, __obj, *args, **kwargs), "call result")
        budget.enter_call()
        try:
            result = super().call(__context, __obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        return check_size(result, "call result")


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
