r"""Pydantic ``ValidationError`` -> located, human-worded ``ManifestError``\ s.

Pydantic reports a ``loc`` path and a machine ``type``; a user wants ``file:line:column`` and a
sentence. This module walks the located tree (``yamlnodes.py``) along ``loc`` to find the line,
words each error type in plain English, lists the allowed keys or the closest one for an
unknown key, and never echoes the input (it may be a secret). It knows nothing of files,
overlays or variables beyond the two facts the loader hands it about each value.
"""

from __future__ import annotations

import difflib
import types as pytypes
from collections.abc import Container, Iterable, Mapping
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from composer.errors import ManifestError
from composer.manifest.source import KeyPath
from composer.manifest.yamlnodes import Map, Mark, Node, Seq

__all__ = ["did_you_mean", "dotted", "locate", "translate"]


def translate(
    error: ValidationError,
    tree: Node,
    model: type[BaseModel],
    label: str,
    *,
    unresolved: Container[int],
    variables_of: Mapping[int, tuple[str, ...]],
    uncertain: Container[int] = (),
) -> list[ManifestError]:
    """One located, human-worded ManifestError per pydantic error (input never echoed).

    ``tree`` is what ``model`` validated; ``label`` prefixes every message. ``variables_of``
    maps ``id(scalar)`` to the variables its value came from, ``unresolved`` holds the ids of
    scalars with an unset variable.

    A validator's own words about a value that came from variables are not shown at all
    (they may quote part of the secret); the message names the variables instead. A value
    with an unset variable was already reported, so what pydantic says about it is dropped;
    so is a check over a mapping or list in ``uncertain`` (it holds a value not known).
    """
    results: list[ManifestError] = []
    seen: set[tuple[int, int, str]] = set()
    items = error.errors(include_url=False, include_input=False)
    # A value one member of a union refused for what it says (a template's syntax) is not
    # also "must be a list" because another member wants a list.
    said = {
        id(locate(tree, item["loc"], key_of_last=False)[2])
        for item in items
        if item["type"] not in _WORDS and item["type"] not in ("missing", "extra_forbidden")
    }
    for item in items:
        loc = item["loc"]
        kind = item["type"]
        mark, path, node = locate(tree, loc, key_of_last=kind == "extra_forbidden")
        if kind in _WORDS and id(node) in said:
            continue
        if id(node) in unresolved:
            continue
        if id(node) in uncertain and kind in ("value_error", "assertion_error"):
            continue
        where = dotted(path)
        used = variables_of.get(id(node), ())
        if kind == "extra_forbidden":
            key = str(loc[-1]) if loc else "?"
            message = f'unknown key "{key}"' + (f" in {where}" if where else "")
            message += _allowed_keys(model, path, key)
        elif kind == "missing":
            key = str(loc[-1]) if loc else "?"
            message = f'missing key "{key}"' + (f" in {where}" if where else "")
        elif used and not _is_generic(kind):
            names = ", ".join(f"${{{name}}}" for name in used)
            message = (f"{where}: " if where else "") + f"invalid value (from {names}; not shown)"
        else:
            message = (f"{where}: " if where else "") + _describe(item)
        if label:
            message = f"{label}: {message}"
        if (mark.line, mark.column, message) in seen:
            continue
        seen.add((mark.line, mark.column, message))
        results.append(mark.error(message))
    return results


def locate(
    tree: Node, loc: tuple[Any, ...], *, key_of_last: bool
) -> tuple[Mark, KeyPath, Node | None]:
    """The node a pydantic ``loc`` points at; union tags and missing keys are stepped over."""
    node = tree
    path: list[str | int] = []
    for i, part in enumerate(loc):
        if isinstance(node, Map) and isinstance(part, str) and part in node.items:
            key_mark, child = node.items[part]
            if key_of_last and i == len(loc) - 1:
                return key_mark, tuple(path), None
            node = child
            path.append(part)
        elif isinstance(node, Seq) and isinstance(part, int) and 0 <= part < len(node.items):
            node = node.items[part]
            path.append(part)
    return node.mark, tuple(path), node


def dotted(path: KeyPath) -> str:
    """``path`` as a reader writes it: ``request.params.q``, ``tests[0].name``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


_WORDS = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "set_type": "must be a list",
    "none_required": "must be empty (null)",
    "path_type": "must be a path",
}


_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
}


def _is_generic(kind: str) -> bool:
    """Whether the message for ``kind`` is fixed wording that cannot quote the input."""
    return kind in _WORDS or kind in _BOUNDS or kind in ("literal_error", "string_too_short")


def _describe(item: Mapping[str, Any]) -> str:
    kind = item["type"]
    ctx: Mapping[str, Any] = item.get("ctx") or {}
    if kind in _WORDS:
        return _WORDS[kind]
    if kind in _BOUNDS:
        sign, name = _BOUNDS[kind]
        return f"must be {sign} {ctx.get(name)}"
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}"
    if kind == "string_too_short":
        return "must not be empty" if ctx.get("min_length") == 1 else str(item["msg"])
    if kind in ("value_error", "assertion_error"):
        cause = ctx.get("error")
        message = str(cause) if cause is not None else str(item["msg"])
        origin = getattr(cause, "__cause__", None)
        lineno = getattr(origin, "lineno", None)
        if isinstance(lineno, int) and lineno > 1:
            message += f" (template line {lineno})"
        return message
    msg = str(item["msg"])
    return msg[:1].lower() + msg[1:]


def _allowed_keys(model: type[BaseModel], path: KeyPath, key: str) -> str:
    target = _model_at(model, path)
    if target is None:
        return ""
    names = [info.alias or name for name, info in target.model_fields.items()]
    hint = did_you_mean(key, names)
    return hint or f"; allowed keys: {', '.join(names)}"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean "x"?)`` for the closest of ``choices``, or "" when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _model_at(model: Any, path: KeyPath) -> type[BaseModel] | None:
    current: Any = model
    for part in path:
        current = _step(current, part)
        if current is None:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(tp: Any) -> Any:
    origin = get_origin(tp)
    if origin is Annotated:
        return _unwrap(get_args(tp)[0])
    if origin in (Union, pytypes.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        return _unwrap(members[0]) if len(members) == 1 else tp
    return tp


def _step(tp: Any, part: str | int) -> Any:
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        info = tp.model_fields.get(part) if isinstance(part, str) else None
        return info.annotation if info is not None else None
    origin, args = get_origin(tp), get_args(tp)
    if origin is list and args and isinstance(part, int):
        return args[0]
    if origin is dict and len(args) == 2 and isinstance(part, str):
        return args[1]
    return None
