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
  ``range()`` at 100 000 items. Each render gets a budget (``RenderLimits``), and no single
  operation may escape it:

  - *Operations and time.* Every call, attribute lookup, filter and loop iteration costs one
    operation against an operation count and a wall-clock deadline. A filter or method whose
    work grows with its input is charged that work before it runs (``_FILTER_CHECKS``,
    ``_METHOD_CHECKS``): one operation per item it walks or builds (``sort``, ``select``,
    ``batch``, ``slice``, ``str.split`` ...) and one per ``_STEPS_PER_OP`` characters it copies
    or scans more than once (``sum`` of lists, long words in ``wordwrap`` and ``urlize``,
    ``pprint`` of nested data). The clock is read every 128 operations, right after a large
    charge, while large inputs stream through a filter and while a value is measured, so one
    expensive call overruns the deadline by a bounded slice of work. Calls nest at most
    ``call_depth`` deep (macro recursion, ``caller()``, recursive loops).
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

``harden`` rewrites a parsed template so that its loops, literals and ``~`` go through the
bounded helpers, and ``run_bounded`` runs a render under a fresh budget. A violation raises
``RenderLimitExceeded`` (a Jinja ``SecurityError``), which ``templating`` turns into a
``TemplateError``.
"""

from __future__ import annotations

import codecs
import functools
import itertools
import operator
import re
import string
import time
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
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

# Operations between two reads of the clock.
_OPS_PER_CLOCK = 128
# Units ``_measure`` counts between two reads of the clock (a few milliseconds of walking).
_UNITS_PER_CLOCK = 1 << 15
# Items a streamed filter input yields between two reads of the clock.
_ITEMS_PER_CLOCK = 1024
# Inputs at least this long stream through a clock check; shorter ones are quick anyway.
_STREAM_MIN = 4096
# C-level steps (a character copied, a regex step) that cost about one template operation.
_STEPS_PER_OP = 32
# The printed width of a float at most (``-2.2250738585072014e-308``).
_FLOAT_CHARS = 24
# What ``_measure`` walks into besides mappings (``dict.items()`` too: what it lists).
_COLLECTIONS = (list, tuple, set, frozenset, KeysView, ValuesView, ItemsView)
# The end of a container's children, in ``_measure``.
_DONE = object()
# The element types of lists ``_measure`` sizes in C, and how many elements at a time.
_FLAT_CHUNK = 1 << 16
_JUST_STR = frozenset({str})
_JUST_INT = frozenset({int, bool})
_JUST_FLOAT = frozenset({float})


@dataclass(frozen=True)
class RenderLimits:
    """Bounds on one render; exceeding any of them is a TemplateError.

    ``output_chars``: the rendered text. ``value_chars``: any one value a template builds
    (a string, or a container measured as its elements plus their printed lengths).
    ``produced_chars``: everything emitted during the render, captured blocks included.
    ``ops``: calls, attribute lookups, filters, loop iterations, and the work of filters and
    methods that walk their input. ``seconds``: wall clock. ``int_bits``: the size of any
    integer a template makes. ``call_depth``: macro, ``caller()`` and recursive-loop calls
    nested in one another, stopped well before Python's recursion limit.
    """

    output_chars: int = 100_000
    value_chars: int = 4_000_000
    produced_chars: int = 8_000_000
    ops: int = 1_000_000
    seconds: float = 1.0
    int_bits: int = 65_536
    call_depth: int = 64


DEFAULT_LIMITS = RenderLimits()


class RenderLimitExceeded(SecurityError):
    """A template hit one of its RenderLimits."""


class _Budget:
    """What one render has spent; lives in a ContextVar for the duration of the render."""

    __slots__ = ("check_at", "deadline", "depth", "limits", "ops", "produced")

    def __init__(self, limits: RenderLimits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.seconds
        self.ops = 0
        self.check_at = min(_OPS_PER_CLOCK, limits.ops + 1)
        self.produced = 0
        self.depth = 0

    def tick(self) -> None:
        self.ops += 1
        if self.ops >= self.check_at:
            self._checkpoint()

    def spend(self, ops: int, what: str) -> None:
        """Charge the work of one call before it runs; a large charge reads the clock next op."""
        if self.ops + ops > self.limits.ops:
            raise RenderLimitExceeded(f"template {what} would exceed {self.limits.ops} operations")
        self.ops += ops
        if ops >= _OPS_PER_CLOCK:
            self.check_at = self.ops + 1
        if self.ops >= self.check_at:
            self._checkpoint()

    def _checkpoint(self) -> None:
        if self.ops > self.limits.ops:
            raise RenderLimitExceeded(f"template exceeded {self.limits.ops} operations")
        self.check_at = min(self.ops + _OPS_PER_CLOCK, self.limits.ops + 1)
        self.check_deadline()

    def check_deadline(self) -> None:
        if time.monotonic() > self.deadline:
            raise RenderLimitExceeded(f"template exceeded {self.limits.seconds}s")

    def enter_call(self) -> None:
        self.depth += 1
        if self.depth > self.limits.call_depth:
            raise RenderLimitExceeded(f"template exceeded {self.limits.call_depth} nested calls")


_budget: ContextVar[_Budget | None] = ContextVar("composer_template_budget", default=None)


def _limits() -> RenderLimits:
    budget = _budget.get()
    return budget.limits if budget is not None else DEFAULT_LIMITS


def _tick() -> None:
    budget = _budget.get()
    if budget is not None:
        budget.tick()


def _charge(ops: int, what: str) -> None:
    """Charge ``ops`` operations of work that one filter or method call is about to do."""
    budget = _budget.get()
    if budget is not None and ops > 0:
        budget.spend(ops, what)


def _children(item: Any) -> Iterable[Any] | None:
    """What a container holds (a mapping: its keys and values); None for anything else."""
    cls = type(item)
    if cls is list or cls is tuple:
        return cast(Iterable[Any], item)
    if cls is dict or isinstance(item, Mapping):
        return itertools.chain(item.keys(), item.values())
    if isinstance(item, _COLLECTIONS):
        return cast(Iterable[Any], item)
    return None


def _flat_size(item: Any, budget: _Budget | None) -> int | None:
    """What ``_measure`` would count below a list or tuple of only strings, only integers or
    only floats, counted in C a chunk at a time (the clock read between chunks); None for
    anything else, to be walked."""
    if type(item) is not list and type(item) is not tuple:
        return None
    total = 0
    for start in range(0, len(item), _FLAT_CHUNK):
        if start and budget is not None:
            budget.check_deadline()
        part = item[start : start + _FLAT_CHUNK] if len(item) > _FLAT_CHUNK else item
        kinds = set(map(type, part))
        if kinds <= _JUST_STR:
            total += sum(map(len, part))
        elif kinds <= _JUST_INT:
            total += sum(map(operator.floordiv, map(int.bit_length, part), itertools.repeat(3)))
        elif kinds <= _JUST_FLOAT:
            total += len(part) * _FLOAT_CHARS
        else:
            return None
    return len(item) + total


def _measure(value: Any, limit: int) -> int:
    """Size of ``value``: one per object, plus a string's length and an integer's digits
    (bits / 3), counted until over ``limit``; reads the clock as it goes.

    Shared references count every time they are reached, as ``str()`` would expand them, but
    a container reached again is not walked again: ``[[1] * 1000] * 3000`` costs 3,002 steps.
    """
    if type(value) is str:
        return 1 + len(value)
    budget = _budget.get()
    check_at = limit if budget is None else min(limit, _UNITS_PER_CLOCK)
    known: dict[int, int] = {}  # id -> size, of the containers walked so far
    # the containers being walked: (container, its children left, the total before it)
    frames: list[tuple[Any, Iterator[Any], int]] = []
    total = 0
    item = value
    while True:
        total += 1
        cls = type(item)
        if cls is str or cls is bytes or isinstance(item, (str, bytes, bytearray)):
            total += len(item)
        elif cls is int or cls is bool or isinstance(item, int):
            total += item.bit_length() // 3
        elif cls is float:
            total += _FLOAT_CHARS
        elif (size := known.get(id(item))) is not None:
            total += size - 1
        elif (size := _flat_size(item, budget)) is not None:
            known[id(item)] = size + 1
            total += size
        elif (children := _children(item)) is not None:
            frames.append((item, iter(children), total - 1))
        if total > check_at:
            if total > limit or budget is None:
                break
            budget.check_deadline()
            check_at = min(limit, total + _UNITS_PER_CLOCK)
        while frames:
            container, rest, before = frames[-1]
            item = next(rest, _DONE)
            if item is not _DONE:
                break
            known[id(container)] = total - before
            frames.pop()
        else:
            break
    return total


def _nesting(value: Any, limit: int) -> int:
    """How deeply containers nest in ``value``, walking at most ``limit`` children; a
    container shared within one level is walked once."""
    depth = walked = 0
    level: dict[int, Any] = {id(value): value}
    while level and walked <= limit:
        below: dict[int, Any] = {}
        for item in level.values():
            children = _children(item)
            if children is not None:
                for child in children:
                    walked += 1
                    if _children(child) is not None:
                        below[id(child)] = child
        depth += bool(below)
        level = below
    return depth


def _size(value: Any) -> int:
    """``_measure`` against the value cap: exact up to the cap, something over it beyond."""
    return _measure(value, _limits().value_chars)


def _check_size(value: Any, what: str) -> Any:
    limits = _limits()
    if isinstance(value, int) and value.bit_length() > limits.int_bits:
        raise RenderLimitExceeded(f"template {what} exceeds {limits.int_bits} bits")
    if _measure(value, limits.value_chars) > limits.value_chars:
        raise RenderLimitExceeded(f"template {what} exceeds {limits.value_chars} characters")
    return value


def _refuse_over(estimate: int, what: str) -> None:
    cap = _limits().value_chars
    if estimate > cap:
        raise RenderLimitExceeded(f"template {what} would exceed {cap} characters")


def _refuse_bits(bits: int, what: str) -> None:
    cap = _limits().int_bits
    if bits > cap:
        raise RenderLimitExceeded(f"template {what} would exceed {cap} bits")


def _count(value: Any) -> int:
    """Items a filter walks in ``value``; 0 for a lazy iterable, charged where it was made."""
    return len(value) if hasattr(value, "__len__") else 0


def _arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int, name: str) -> Any:
    """A call's argument by position or by keyword; None when not given."""
    return args[index] if len(args) > index else kwargs.get(name)


def _width(args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int, name: str) -> int:
    value = _arg(args, kwargs, index, name)
    return value if isinstance(value, int) else 0


def _as_text(value: Any) -> str:
    """The text a text filter works on (it calls ``str()`` on anything else itself)."""
    return value if isinstance(value, str) else str(value)


def _words(text: str | bytes | bytearray) -> int:
    """At most how many words ``text`` splits into: one per two characters."""
    return len(text) // 2 + 1


_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def _lines(text: str | bytes | bytearray) -> int:
    """How many lines ``splitlines`` makes of ``text``, at most."""
    if isinstance(text, str):
        return sum(text.count(mark) for mark in _LINE_BREAKS) + 1
    return text.count(b"\n") + text.count(b"\r") + 1


# What markupsafe's escape adds per character: '&' becomes '&amp;', '<' '&lt;' ...
_ESCAPE_GROWTH = {"&": 4, "<": 3, ">": 3, '"': 4, "'": 4}


def _escaped_len(text: str) -> int:
    return len(text) + sum(text.count(char) * grow for char, grow in _ESCAPE_GROWTH.items())


def _long_runs(pattern: re.Pattern[str], text: str) -> Iterator[int]:
    """Lengths of the runs ``pattern`` finds (64 characters or more: the quadratic cases)."""
    return (match.end() - match.start() for match in pattern.finditer(text))


# Runs of non-whitespace, as textwrap (ASCII whitespace) and urlize (any whitespace) split.
_TEXTWRAP_WORD = re.compile(r"(?<![^\t\n\x0b\x0c\r ])[^\t\n\x0b\x0c\r ]{64,}")
_URLIZE_WORD = re.compile(r"(?<!\S)\S{64,}")

_PRINTF_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")


def _printf_estimate(fmt: str, args: Any) -> int:
    """Upper bound of ``fmt % args``; a ``*`` width (taken from the data) is refused.

    With a mapping, every ``%(name)s`` may repeat the largest value.
    """
    _charge(fmt.count("%"), "'%' formatting")
    widths = specs = 0
    for match in _PRINTF_SPEC.finditer(fmt):
        specs += 1
        for group in match.groups():
            if group == "*":
                raise RenderLimitExceeded("'*' widths are not allowed in templates")
            if group:
                widths += int(group)
    repeats = specs if isinstance(args, Mapping) else 1
    return len(fmt) + widths + repeats * _size(args)


def _format_estimate(fmt: str, args: Any) -> int:
    """Upper bound of ``fmt.format(...)``; nested ``{}`` in a format spec is refused.

    Every field may name the same (largest) argument, so each counts all of them.
    """
    _charge(fmt.count("{"), "str.format()")
    widths = fields = 0
    for _literal, field, spec, _conversion in string.Formatter().parse(fmt):
        if spec and "{" in spec:
            raise RenderLimitExceeded("nested format specs are not allowed in templates")
        fields += field is not None
        widths += sum(int(number) for number in re.findall(r"\d+", spec or ""))
    return len(fmt) + widths + fields * _size(args)


def _replace_estimate(text: str | bytes | bytearray, old: Any, new: Any) -> int:
    """Upper bound of ``text.replace(old, new)``; an empty ``old`` inserts at every position."""
    count = (len(text) + 1) if not old else text.count(old)
    return len(text) + count * max(len(new) - len(old), 0)


def _materialize_first(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``args`` with a lazy first argument (``map``, ``select``) turned into a list, so that
    ``join`` and ``sum`` can be estimated; each item costs an operation."""
    if args and not hasattr(args[0], "__len__"):
        items = []
        for item in args[0]:
            _tick()
            items.append(item)
        return (items, *args[1:])
    return args


def _clocked(items: Iterable[Any]) -> Iterator[Any]:
    """``items``, reading the clock every ``_ITEMS_PER_CLOCK``: a filter walking a large
    input in Python stops at the deadline instead of after the walk."""
    budget = _budget.get()
    for index, item in enumerate(items):
        if budget is not None and index % _ITEMS_PER_CLOCK == 0:
            budget.check_deadline()
        yield item


_Text = str | bytes | bytearray
_Args = tuple[Any, ...]
_MethodCheck = Callable[[Any, _Args, Mapping[str, Any]], None]
_FilterCheck = Callable[[_Args, Mapping[str, Any]], None]


def _padding_check(method: str) -> _MethodCheck:
    """The check of one padding method, so that a refusal names the method."""

    def check(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
        _refuse_over(max(len(owner), _width(args, kwargs, 0, "width")), f"str.{method}()")

    return check


def _check_expandtabs(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    tabsize = _width(args, kwargs, 0, "tabsize") or 8
    tabs = owner.count("\t") if isinstance(owner, str) else owner.count(b"\t")
    _refuse_over(len(owner) + tabs * tabsize, "str.expandtabs()")


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


def _split_check(method: str) -> _MethodCheck:
    """``split``/``rsplit`` build one string per piece: charge the pieces."""

    def check(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
        sep = _arg(args, kwargs, 0, "sep")
        pieces = owner.count(sep) + 1 if sep else _words(owner)
        maxsplit = _arg(args, kwargs, 1, "maxsplit")
        if isinstance(maxsplit, int) and maxsplit >= 0:
            pieces = min(pieces, maxsplit + 1)
        _charge(pieces, f"str.{method}()")

    return check


def _check_splitlines(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    _charge(_lines(owner), "str.splitlines()")


# Codecs implemented in C, with the most one character can become: (ASCII text, any text).
# Decoding never makes more than one character per byte, so the same bound holds.
_CODEC_GROWTH = {
    "ascii": (1, 1),
    "iso8859-1": (1, 1),
    "cp1252": (1, 1),
    "utf-8": (1, 4),
    "utf-16": (2, 4),
    "utf-16-le": (2, 4),
    "utf-16-be": (2, 4),
    "utf-32": (4, 4),
    "utf-32-le": (4, 4),
    "utf-32-be": (4, 4),
    "unicode-escape": (4, 10),
    "raw-unicode-escape": (1, 10),
}
# Error handlers, with what they write for one bad character (``namereplace``: its name).
_ERRORS_GROWTH = {
    "strict": 1,
    "ignore": 1,
    "replace": 1,
    "surrogateescape": 1,
    "surrogatepass": 4,
    "backslashreplace": 10,
    "xmlcharrefreplace": 10,
    "namereplace": 100,
}


def _codec_check(method: str) -> _MethodCheck:
    """``str.encode`` and ``bytes.decode``, estimated from the codec and the error handler;
    codecs written in Python (``punycode`` is quadratic, ``idna`` loops per label) and unknown
    handlers are refused."""

    def check(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
        try:
            codec = codecs.lookup(str(_arg(args, kwargs, 0, "encoding") or "utf-8")).name
        except LookupError:
            return  # the call fails the same way
        errors = str(_arg(args, kwargs, 1, "errors") or "strict")
        growth = _CODEC_GROWTH.get(codec)
        handler = _ERRORS_GROWTH.get(errors)
        if growth is None:
            raise RenderLimitExceeded(f"codec {codec!r} is not available in templates")
        if handler is None:
            raise RenderLimitExceeded(f"error handler {errors!r} is not available in templates")
        ascii_text = isinstance(owner, str) and owner.isascii()
        per_char = growth[0] if ascii_text else max(growth[1], handler)
        _refuse_over(len(owner) * per_char + 8, f"{method}()")

    return check


def _check_hex(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    sep = _arg(args, kwargs, 0, "sep")
    _refuse_over(len(owner) * (2 + len(sep or "")), "bytes.hex()")


def _markup_check(method: str) -> _MethodCheck:
    """``Markup.striptags``/``unescape`` loop in Python per tag and per entity."""

    def check(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
        if isinstance(owner, str):
            _charge(owner.count("<") + owner.count("&"), f"Markup.{method}()")

    return check


def _check_to_bytes(owner: int, args: _Args, kwargs: Mapping[str, Any]) -> None:
    length = _arg(args, kwargs, 0, "length")
    _refuse_over(length if isinstance(length, int) else 1, "int.to_bytes()")


# The str and bytes methods whose result can outgrow their inputs or whose work outgrows
# one operation, by method name (a str has no ``hex``, bytes no ``encode``).
_STR_METHOD_CHECKS: dict[str, _MethodCheck] = {
    **{name: _padding_check(name) for name in ("center", "ljust", "rjust", "zfill")},
    "expandtabs": _check_expandtabs,
    "replace": _check_str_replace,
    "join": _check_str_join,
    "translate": _check_translate,
    **{name: _split_check(name) for name in ("split", "rsplit")},
    "splitlines": _check_splitlines,
    "encode": _codec_check("str.encode"),
    "decode": _codec_check("bytes.decode"),
    "hex": _check_hex,
    **{name: _markup_check(name) for name in ("striptags", "unescape")},
}

# The same for integers: ``to_bytes`` allocates what its first argument says.
_INT_METHOD_CHECKS: dict[str, _MethodCheck] = {"to_bytes": _check_to_bytes}

# Which table applies to a bound method, by the type of the object it is bound to.
_METHOD_CHECKS: tuple[tuple[type | tuple[type, ...], dict[str, _MethodCheck]], ...] = (
    ((str, bytes, bytearray), _STR_METHOD_CHECKS),
    (int, _INT_METHOD_CHECKS),
)


def _precheck_method(method: Any, args: _Args, kwargs: Mapping[str, Any]) -> _Args:
    """Estimate the growth-prone methods of str, bytes and int before they allocate.

    Returns the arguments to call with (a lazy iterable given to ``join`` is materialized).
    """
    owner = getattr(method, "__self__", None)
    name = getattr(method, "__name__", "")
    for owners, table in _METHOD_CHECKS:
        check = table.get(name) if isinstance(owner, owners) else None
        if check is not None:
            if name == "join":
                args = _materialize_first(args)
            check(owner, args, kwargs)
            break
    return args


def _text_len(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes)) else 0


def _check_center(args: _Args, kwargs: Mapping[str, Any]) -> None:
    _refuse_over(max(_text_len(args[0]), _width(args, kwargs, 1, "width")), "center")


def _check_indent(args: _Args, kwargs: Mapping[str, Any]) -> None:
    width = _arg(args, kwargs, 1, "width")
    width = 4 if width is None else width
    pad = width if isinstance(width, int) else len(str(width))
    text = _as_text(args[0])
    lines = _lines(text)
    _charge(lines, "indent")
    _refuse_over(len(text) + lines * pad, "indent")


def _check_replace(args: _Args, kwargs: Mapping[str, Any]) -> None:
    if len(args) >= 3:
        _refuse_over(_replace_estimate(str(args[0]), str(args[1]), str(args[2])), "replace")


def _check_wordwrap(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """textwrap walks words in Python (about two operations' work each) and re-copies the rest
    of a word longer than the width for every line it breaks off: quadratic in its length."""
    text = _as_text(args[0])
    width = max(_width(args, kwargs, 1, "width") or 79, 1)
    wrap = _arg(args, kwargs, 3, "wrapstring") or "\n"
    _refuse_over(len(text) + (len(text) // width + 1) * len(str(wrap)), "wordwrap")
    copies = sum(run * run // (2 * width) for run in _long_runs(_TEXTWRAP_WORD, text))
    _charge(2 * _words(text) + copies // _STEPS_PER_OP, "wordwrap")


def _check_format(args: _Args, kwargs: Mapping[str, Any]) -> None:
    if isinstance(args[0], str):
        _refuse_over(_printf_estimate(args[0], kwargs or args[1:]), "format")


def _check_join(args: _Args, kwargs: Mapping[str, Any]) -> None:
    separator = _arg(args, kwargs, 1, "d") or ""
    _refuse_over(len(str(separator)) * len(args[0]), "join")
    _charge(len(args[0]), "join")


def _check_batch(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """``batch`` builds a list per group and pads the last one with ``[fill] * missing``."""
    items, lazy = _count(args[0]), not hasattr(args[0], "__len__")
    linecount = _width(args, kwargs, 1, "linecount")
    fill = _arg(args, kwargs, 2, "fill_with")
    groups = -(-items // linecount) if linecount > 0 else 1
    missing = 0
    if fill is not None and linecount > 0 and (items or lazy):
        missing = linecount - 1 if lazy else groups * linecount - items
    _refuse_over(items + groups + missing * _size(fill), "batch")
    _charge(items + groups + missing, "batch")


def _check_slice(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """``slice`` builds ``slices`` lists whatever the input, each maybe padded with the fill."""
    items = _count(args[0])
    slices = max(_width(args, kwargs, 1, "slices"), 0)
    fill = _arg(args, kwargs, 2, "fill_with")
    each = 1 + (_size(fill) if fill is not None else 0)
    _refuse_over(items + slices * each, "slice")
    _charge(items + slices, "slice")


def _check_sum(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """Summing lists or tuples copies every partial sum: quadratic in the item count."""
    items = args[0]
    _charge(len(items), "sum")
    start = _arg(args, kwargs, 2, "start")
    if start is None or isinstance(start, (int, float)):
        return
    most = _limits().ops * _STEPS_PER_OP
    length = copies = _count(start)
    for item in items:
        length += _count(item)
        copies += length
        if copies > most:
            break
    _charge(copies // _STEPS_PER_OP, "sum")


def _check_pprint(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """pprint works in Python and reprs each level of nested data again: its work is the
    value's size times its depth (a long string, it wraps word by word)."""
    size = _size(args[0])
    _charge(size // 2, "pprint")
    _charge(size * _nesting(args[0], size) // 2, "pprint")


def _check_tojson(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """With ``indent``, json encodes in Python and indents each line by its depth."""
    indent = _arg(args, kwargs, 1, "indent")
    if indent is None:
        return
    width = len(indent) if isinstance(indent, str) else max(indent, 0)
    size = _size(args[0])
    _charge(size, "tojson")
    _refuse_over(size * (2 + width * (_nesting(args[0], size) + 1)), "tojson")


def _check_urlize(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """Every link repeats its text and carries ``rel`` and ``target``; each word costs about
    eight operations (an escape and several regexes), which are quadratic in its length."""
    text = _as_text(args[0])
    attributes = " ".join(
        str(_arg(args, kwargs, i, n) or "") for i, n in ((3, "target"), (4, "rel"))
    )
    links = text.count(":") + text.count("@") + text.count("www.")
    _refuse_over(2 * _escaped_len(text) + links * (64 + _escaped_len(attributes)), "urlize")
    steps = sum(run * run for run in _long_runs(_URLIZE_WORD, text))
    _charge(8 * _words(text) + steps // _STEPS_PER_OP, "urlize")


def _check_escape(args: _Args, kwargs: Mapping[str, Any]) -> None:
    if isinstance(args[0], str):
        _refuse_over(_escaped_len(args[0]), "escape")


def _check_urlencode(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """Percent-encoding writes three characters per UTF-8 byte, four bytes per character."""
    value = args[0]
    if isinstance(value, str):
        _refuse_over(3 * len(value) * (1 if value.isascii() else 4), "urlencode")


def _check_round(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """``round`` computes ``10 ** precision`` (an integer for a negative precision)."""
    precision = _arg(args, kwargs, 1, "precision")
    if isinstance(precision, int):
        _refuse_bits(abs(precision) * 10 // 3, "round")


def _text_check(name: str, work: Callable[[str], int]) -> _FilterCheck:
    """A text filter that loops in Python per piece, word, tag or entity, building a string or
    two for each: charge ``work(text)``."""

    def check(args: _Args, kwargs: Mapping[str, Any]) -> None:
        _charge(work(_as_text(args[0])), name)

    return check


def _walk_check(name: str, per_item: int) -> _FilterCheck:
    """A filter that walks its input in Python (a key function, a test, a generator)."""

    def check(args: _Args, kwargs: Mapping[str, Any]) -> None:
        _charge(_count(args[0]) * per_item, name)

    return check


# The filters that walk their input in Python, with what one item costs: two where a key
# function builds a list or tuple per item before sorting.
_WALKS = {
    "sort": 2,
    "groupby": 2,
    "dictsort": 2,
    "unique": 1,
    "min": 1,
    "max": 1,
    "map": 1,
    "select": 1,
    "reject": 1,
    "selectattr": 1,
    "rejectattr": 1,
    "list": 1,
    "items": 1,
    "xmlattr": 1,
}

# The filters whose result can outgrow their input, or whose work outgrows one operation, by
# filter name; each gets the filter's own arguments, the value first.
_FILTER_CHECKS: dict[str, _FilterCheck] = {
    "center": _check_center,
    "indent": _check_indent,
    "replace": _check_replace,
    "wordwrap": _check_wordwrap,
    "format": _check_format,
    "join": _check_join,
    "batch": _check_batch,
    "slice": _check_slice,
    "sum": _check_sum,
    "pprint": _check_pprint,
    "tojson": _check_tojson,
    "urlize": _check_urlize,
    **dict.fromkeys(("e", "escape", "forceescape"), _check_escape),
    **dict.fromkeys(("urlencode", "urlsegment"), _check_urlencode),
    "round": _check_round,
    "title": _text_check("title", lambda text: 2 * len(text)),
    "wordcount": _text_check("wordcount", lambda text: 2 * _words(text)),
    "striptags": _text_check("striptags", lambda text: text.count("<") + text.count("&")),
    **{name: _walk_check(name, cost) for name, cost in _WALKS.items()},
}

# Filters that need a lazy input as a list to be estimated.
_MATERIALIZED = frozenset({"join", "sum"})
# Filters that only iterate their input: a large one streams through ``_clocked``.
_STREAMED = frozenset(
    {
        "batch",
        "groupby",
        "join",
        "list",
        "map",
        "max",
        "min",
        "reject",
        "rejectattr",
        "select",
        "selectattr",
        "slice",
        "sort",
        "sum",
        "unique",
    }
)


def _precheck_filter(name: str, args: _Args, kwargs: Mapping[str, Any]) -> _Args:
    """Estimate a filter before it runs (``args`` without the pass-arg, the value first);
    returns the arguments to call it with."""
    if name in _MATERIALIZED:
        args = _materialize_first(args)
    _check_size(args[0], f"input of filter {name!r}")
    check = _FILTER_CHECKS.get(name)
    if check is not None:
        check(args, kwargs)
    if name in _STREAMED and _count(args[0]) >= _STREAM_MIN:
        args = (_clocked(args[0]), *args[1:])
    return args


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """A filter that costs an operation, is estimated before it runs and checked after."""
    passes_arg = getattr(func, "jinja_pass_arg", None) is not None

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _tick()
        head, own = (args[:1], args[1:]) if passes_arg else ((), args)
        if own:
            own = _precheck_filter(name, own, kwargs)
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


# What ``*`` repeats when the other operand is an integer; anything else is arithmetic.
_REPEATABLE = (str, bytes, bytearray, list, tuple)


def _intercepted_mul(left: Any, right: Any) -> Any:
    if isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > _limits().int_bits:
            raise RenderLimitExceeded("integer product too large")
    else:
        count, sequence = (right, left) if isinstance(right, int) else (left, right)
        if isinstance(count, int) and isinstance(sequence, _REPEATABLE):
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
    if isinstance(left, (str, bytes, bytearray)):
        fmt = left if isinstance(left, str) else left.decode("latin-1")
        _refuse_over(_printf_estimate(fmt, right), "'%' formatting")
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
        """Every call: counted, estimated, and nested at most ``call_depth`` deep (a macro
        calling itself ends here, not at Python's recursion limit)."""
        _tick()
        args = _precheck_method(__obj, args, kwargs)
        budget = _budget.get()
        if budget is None:
            return _check_size(super().call(__context, __obj, *args, **kwargs), "call result")
        budget.enter_call()
        try:
            result = super().call(__context, __obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        return _check_size(result, "call result")


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
