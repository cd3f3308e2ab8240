"""How big a value a template holds or builds is, counted the way ``str()`` would print it.

Jinja bounds none of this: a template can make a list of a million strings, or a string shared
a million times, in one short expression. ``measure`` counts one per object plus a string's
length and an integer's digits, stops as soon as it is over its limit, and reads the render's
clock while it walks, so measuring a huge value costs no more than the cap allows.
``check_size`` refuses a value over the render's cap; ``nesting`` is what the estimators of
the filters that work per level (``pprint``, ``tojson``) multiply by.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any, cast

from composer.templating.limits import Budget, RenderLimitExceeded, current_budget, current_limits

__all__ = ["check_size", "measure", "nesting", "size_of"]

# Units ``measure`` counts between two reads of the clock (a few milliseconds of walking).
_UNITS_PER_CLOCK = 1 << 15
# The printed width of a float at most (``-2.2250738585072014e-308``).
_FLOAT_CHARS = 24
# What ``measure`` walks into besides mappings (``dict.items()`` too: what it lists).
_COLLECTIONS = (list, tuple, set, frozenset, KeysView, ValuesView, ItemsView)
# The end of a container's children, in ``measure``.
_DONE = object()
# The element types of lists ``measure`` sizes in C, and how many elements at a time.
_FLAT_CHUNK = 1 << 16
_JUST_STR = frozenset({str})
_JUST_INT = frozenset({int, bool})
_JUST_FLOAT = frozenset({float})


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


def _flat_size(item: Any, budget: Budget | None) -> int | None:
    """What ``measure`` would count below a list or tuple of only strings, only integers or
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


def measure(value: Any, limit: int) -> int:
    """Size of ``value``: one per object, plus a string's length and an integer's digits
    (bits / 3), counted until over ``limit``; reads the clock as it goes.

    Shared references count every time they are reached, as ``str()`` would expand them, but
    a container reached again is not walked again: ``[[1] * 1000] * 3000`` costs 3,002 steps.
    """
    if type(value) is str:
        return 1 + len(value)
    budget = current_budget.get()
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


def nesting(value: Any, limit: int) -> int:
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


def size_of(value: Any) -> int:
    """``measure`` against the value cap: exact up to the cap, something over it beyond."""
    return measure(value, current_limits().value_chars)


def check_size(value: Any, what: str) -> Any:
    """``value``, refused when it is over the render's value cap or its integer bits."""
    limits = current_limits()
    if isinstance(value, int) and value.bit_length() > limits.int_bits:
        raise RenderLimitExceeded(f"template {what} exceeds {limits.int_bits} bits")
    if measure(value, limits.value_chars) > limits.value_chars:
        raise RenderLimitExceeded(f"template {what} exceeds {limits.value_chars} characters")
    return value
