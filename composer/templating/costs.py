"""What a filter or a method is about to cost, estimated from its arguments before it runs.

A single call can do work or allocate far beyond one template operation (``sort`` of a
million items, ``'x'.center(10**9)``, ``str.format`` repeating a huge argument), and by the
time its result is measured the memory is spent. So the sandbox asks here first:
``precheck_filter`` and ``precheck_method`` charge the render one operation per item a call
walks or builds and one per ``_STEPS_PER_OP`` characters it copies more than once, and refuse
a result over the value cap before it is made; ``printf_estimate`` and ``format_estimate``
bound ``%`` and ``str.format``. Each table entry names the filter or method it estimates.
"""

from __future__ import annotations

import codecs
import re
import string
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from composer.templating.limits import (
    RenderLimitExceeded,
    charge,
    current_budget,
    current_limits,
    refuse_bits,
    refuse_over,
    tick,
)
from composer.templating.measure import check_size, nesting, size_of

__all__ = ["format_estimate", "precheck_filter", "precheck_method", "printf_estimate"]

# Items a streamed filter input yields between two reads of the clock.
_ITEMS_PER_CLOCK = 1024
# Inputs at least this long stream through a clock check; shorter ones are quick anyway.
_STREAM_MIN = 4096
# C-level steps (a character copied, a regex step) that cost about one template operation.
_STEPS_PER_OP = 32


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


def printf_estimate(fmt: str, args: Any) -> int:
    """Upper bound of ``fmt % args``; a ``*`` width (taken from the data) is refused.

    With a mapping, every ``%(name)s`` may repeat the largest value.
    """
    charge(fmt.count("%"), "'%' formatting")
    widths = specs = 0
    for match in _PRINTF_SPEC.finditer(fmt):
        specs += 1
        for group in match.groups():
            if group == "*":
                raise RenderLimitExceeded("'*' widths are not allowed in templates")
            if group:
                widths += int(group)
    repeats = specs if isinstance(args, Mapping) else 1
    return len(fmt) + widths + repeats * size_of(args)


def format_estimate(fmt: str, args: Any) -> int:
    """Upper bound of ``fmt.format(...)``; nested ``{}`` in a format spec is refused.

    Every field may name the same (largest) argument, so each counts all of them.
    """
    charge(fmt.count("{"), "str.format()")
    widths = fields = 0
    for _literal, field, spec, _conversion in string.Formatter().parse(fmt):
        if spec and "{" in spec:
            raise RenderLimitExceeded("nested format specs are not allowed in templates")
        fields += field is not None
        widths += sum(int(number) for number in re.findall(r"\d+", spec or ""))
    return len(fmt) + widths + fields * size_of(args)


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
            tick()
            items.append(item)
        return (items, *args[1:])
    return args


def _clocked(items: Iterable[Any]) -> Iterator[Any]:
    """``items``, reading the clock every ``_ITEMS_PER_CLOCK``: a filter walking a large
    input in Python stops at the deadline instead of after the walk."""
    budget = current_budget.get()
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
        refuse_over(max(len(owner), _width(args, kwargs, 0, "width")), f"str.{method}()")

    return check


def _check_expandtabs(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    tabsize = _width(args, kwargs, 0, "tabsize") or 8
    tabs = owner.count("\t") if isinstance(owner, str) else owner.count(b"\t")
    refuse_over(len(owner) + tabs * tabsize, "str.expandtabs()")


def _check_str_replace(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    if len(args) >= 2:
        refuse_over(_replace_estimate(owner, args[0], args[1]), "str.replace()")


def _check_str_join(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    if args:
        items = args[0]
        refuse_over(len(owner) * len(items) + size_of(items), "str.join()")


def _check_translate(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    if args and isinstance(args[0], Mapping):
        longest = max((len(v) for v in args[0].values() if isinstance(v, (str, bytes))), default=1)
        refuse_over(len(owner) * longest, "str.translate()")


def _split_check(method: str) -> _MethodCheck:
    """``split``/``rsplit`` build one string per piece: charge the pieces."""

    def check(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
        sep = _arg(args, kwargs, 0, "sep")
        pieces = owner.count(sep) + 1 if sep else _words(owner)
        maxsplit = _arg(args, kwargs, 1, "maxsplit")
        if isinstance(maxsplit, int) and maxsplit >= 0:
            pieces = min(pieces, maxsplit + 1)
        charge(pieces, f"str.{method}()")

    return check


def _check_splitlines(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    charge(_lines(owner), "str.splitlines()")


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
        refuse_over(len(owner) * per_char + 8, f"{method}()")

    return check


def _check_hex(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
    sep = _arg(args, kwargs, 0, "sep")
    refuse_over(len(owner) * (2 + len(sep or "")), "bytes.hex()")


def _markup_check(method: str) -> _MethodCheck:
    """``Markup.striptags``/``unescape`` loop in Python per tag and per entity."""

    def check(owner: _Text, args: _Args, kwargs: Mapping[str, Any]) -> None:
        if isinstance(owner, str):
            charge(owner.count("<") + owner.count("&"), f"Markup.{method}()")

    return check


def _check_to_bytes(owner: int, args: _Args, kwargs: Mapping[str, Any]) -> None:
    length = _arg(args, kwargs, 0, "length")
    refuse_over(length if isinstance(length, int) else 1, "int.to_bytes()")


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


def precheck_method(method: Any, args: _Args, kwargs: Mapping[str, Any]) -> _Args:
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
    refuse_over(max(_text_len(args[0]), _width(args, kwargs, 1, "width")), "center")


def _check_indent(args: _Args, kwargs: Mapping[str, Any]) -> None:
    width = _arg(args, kwargs, 1, "width")
    width = 4 if width is None else width
    pad = width if isinstance(width, int) else len(str(width))
    text = _as_text(args[0])
    lines = _lines(text)
    charge(lines, "indent")
    refuse_over(len(text) + lines * pad, "indent")


def _check_replace(args: _Args, kwargs: Mapping[str, Any]) -> None:
    if len(args) >= 3:
        refuse_over(_replace_estimate(str(args[0]), str(args[1]), str(args[2])), "replace")


def _check_wordwrap(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """textwrap walks words in Python (about two operations' work each) and re-copies the rest
    of a word longer than the width for every line it breaks off: quadratic in its length."""
    text = _as_text(args[0])
    width = max(_width(args, kwargs, 1, "width") or 79, 1)
    wrap = _arg(args, kwargs, 3, "wrapstring") or "\n"
    refuse_over(len(text) + (len(text) // width + 1) * len(str(wrap)), "wordwrap")
    copies = sum(run * run // (2 * width) for run in _long_runs(_TEXTWRAP_WORD, text))
    charge(2 * _words(text) + copies // _STEPS_PER_OP, "wordwrap")


def _check_format(args: _Args, kwargs: Mapping[str, Any]) -> None:
    if isinstance(args[0], str):
        refuse_over(printf_estimate(args[0], kwargs or args[1:]), "format")


def _check_join(args: _Args, kwargs: Mapping[str, Any]) -> None:
    separator = _arg(args, kwargs, 1, "d") or ""
    refuse_over(len(str(separator)) * len(args[0]), "join")
    charge(len(args[0]), "join")


def _check_batch(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """``batch`` builds a list per group and pads the last one with ``[fill] * missing``."""
    items, lazy = _count(args[0]), not hasattr(args[0], "__len__")
    linecount = _width(args, kwargs, 1, "linecount")
    fill = _arg(args, kwargs, 2, "fill_with")
    groups = -(-items // linecount) if linecount > 0 else 1
    missing = 0
    if fill is not None and linecount > 0 and (items or lazy):
        missing = linecount - 1 if lazy else groups * linecount - items
    refuse_over(items + groups + missing * size_of(fill), "batch")
    charge(items + groups + missing, "batch")


def _check_slice(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """``slice`` builds ``slices`` lists whatever the input, each maybe padded with the fill."""
    items = _count(args[0])
    slices = max(_width(args, kwargs, 1, "slices"), 0)
    fill = _arg(args, kwargs, 2, "fill_with")
    each = 1 + (size_of(fill) if fill is not None else 0)
    refuse_over(items + slices * each, "slice")
    charge(items + slices, "slice")


def _check_sum(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """Summing lists or tuples copies every partial sum: quadratic in the item count."""
    items = args[0]
    charge(len(items), "sum")
    start = _arg(args, kwargs, 2, "start")
    if start is None or isinstance(start, (int, float)):
        return
    most = current_limits().ops * _STEPS_PER_OP
    length = copies = _count(start)
    for item in items:
        length += _count(item)
        copies += length
        if copies > most:
            break
    charge(copies // _STEPS_PER_OP, "sum")


def _check_pprint(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """pprint works in Python and reprs each level of nested data again: its work is the
    value's size times its depth (a long string, it wraps word by word)."""
    size = size_of(args[0])
    charge(size // 2, "pprint")
    charge(size * nesting(args[0], size) // 2, "pprint")


def _check_tojson(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """With ``indent``, json encodes in Python and indents each line by its depth."""
    indent = _arg(args, kwargs, 1, "indent")
    if indent is None:
        return
    width = len(indent) if isinstance(indent, str) else max(indent, 0)
    size = size_of(args[0])
    charge(size, "tojson")
    refuse_over(size * (2 + width * (nesting(args[0], size) + 1)), "tojson")


def _check_urlize(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """Every link repeats its text and carries ``rel`` and ``target``; each word costs about
    eight operations (an escape and several regexes), which are quadratic in its length."""
    text = _as_text(args[0])
    attributes = " ".join(
        str(_arg(args, kwargs, i, n) or "") for i, n in ((3, "target"), (4, "rel"))
    )
    links = text.count(":") + text.count("@") + text.count("www.")
    refuse_over(2 * _escaped_len(text) + links * (64 + _escaped_len(attributes)), "urlize")
    steps = sum(run * run for run in _long_runs(_URLIZE_WORD, text))
    charge(8 * _words(text) + steps // _STEPS_PER_OP, "urlize")


def _check_escape(args: _Args, kwargs: Mapping[str, Any]) -> None:
    if isinstance(args[0], str):
        refuse_over(_escaped_len(args[0]), "escape")


def _check_urlencode(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """Percent-encoding writes three characters per UTF-8 byte, four bytes per character."""
    value = args[0]
    if isinstance(value, str):
        refuse_over(3 * len(value) * (1 if value.isascii() else 4), "urlencode")


def _check_round(args: _Args, kwargs: Mapping[str, Any]) -> None:
    """``round`` computes ``10 ** precision`` (an integer for a negative precision)."""
    precision = _arg(args, kwargs, 1, "precision")
    if isinstance(precision, int):
        refuse_bits(abs(precision) * 10 // 3, "round")


def _text_check(name: str, work: Callable[[str], int]) -> _FilterCheck:
    """A text filter that loops in Python per piece, word, tag or entity, building a string or
    two for each: charge ``work(text)``."""

    def check(args: _Args, kwargs: Mapping[str, Any]) -> None:
        charge(work(_as_text(args[0])), name)

    return check


def _walk_check(name: str, per_item: int) -> _FilterCheck:
    """A filter that walks its input in Python (a key function, a test, a generator)."""

    def check(args: _Args, kwargs: Mapping[str, Any]) -> None:
        charge(_count(args[0]) * per_item, name)

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


def precheck_filter(name: str, args: _Args, kwargs: Mapping[str, Any]) -> _Args:
    """Estimate a filter before it runs (``args`` without the pass-arg, the value first);
    returns the arguments to call it with."""
    if name in _MATERIALIZED:
        args = _materialize_first(args)
    check_size(args[0], f"input of filter {name!r}")
    check = _FILTER_CHECKS.get(name)
    if check is not None:
        check(args, kwargs)
    if name in _STREAMED and _count(args[0]) >= _STREAM_MIN:
        args = (_clocked(args[0]), *args[1:])
    return args
