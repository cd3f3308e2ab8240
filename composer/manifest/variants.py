"""The forms a union field takes, and which one a mapping written in a file means.

A field such as memory's ``source`` is one of several mappings (``{sqlite: path}``,
``{postgres: {dsn: ...}}``), each a pydantic model whose required keys differ, or whose
one-value ``Literal`` key (a discriminator) says which. Two readers need to know which form a
mapping means: an overlay, which replaces a base value of another form instead of merging the
two into neither (``overlay.py``), and the error wording, which names that form and what it
lacks instead of every form's complaint (``validation_errors.py``). Both look at located trees
before validation, so only keys and literal values count: a model is found by walking field
annotations along a path of keys, never by validating.
"""

from __future__ import annotations

import functools
import types as pytypes
from collections.abc import Sequence
from pathlib import PurePath
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from composer.manifest.source import KeyPath
from composer.manifest.yamlnodes import Map, Node, Scalar, Seq

__all__ = [
    "field_type",
    "form",
    "form_name",
    "members",
    "model_at",
    "selected",
    "union_models",
    "unwrap",
]


def unwrap(tp: Any) -> Any:
    """``tp`` without ``Annotated`` and without ``None`` when one type is left."""
    origin = get_origin(tp)
    if origin is Annotated:
        return unwrap(get_args(tp)[0])
    if origin in (Union, pytypes.UnionType):
        others = [a for a in get_args(tp) if a is not type(None)]
        return unwrap(others[0]) if len(others) == 1 else tp
    return tp


def members(tp: Any) -> tuple[Any, ...]:
    """The types of a union field (``None`` left out, each unwrapped); () for any other."""
    tp = unwrap(tp)
    if get_origin(tp) not in (Union, pytypes.UnionType):
        return ()
    return tuple(unwrap(a) for a in get_args(tp) if a is not type(None))


def union_models(tp: Any) -> tuple[type[BaseModel], ...]:
    """The model members of a union field: its mapping forms (() when it is no union)."""
    try:
        return _union_models(tp)  # asked for every mapping an overlay merges
    except TypeError:  # an annotation that cannot be hashed
        return tuple(m for m in members(tp) if _is_model(m))


@functools.lru_cache(maxsize=1024)
def _union_models(tp: Any) -> tuple[type[BaseModel], ...]:
    return tuple(m for m in members(tp) if _is_model(m))


def field_type(tp: Any, part: str | int) -> Any:
    """The annotation one key (or list index) below ``tp``; None when there is none."""
    tp = unwrap(tp)
    if _is_model(tp):
        info = _fields(tp).get(part) if isinstance(part, str) else None
        return info.annotation if info is not None else None
    origin, args = get_origin(tp), get_args(tp)
    if origin is list and args and isinstance(part, int):
        return args[0]
    if origin is dict and len(args) == 2 and isinstance(part, str):
        return args[1]
    return None


def model_at(model: Any, path: KeyPath, tree: Node | None = None) -> type[BaseModel] | None:
    """The model that validates the mapping at ``path``, if one does.

    With ``tree`` (what ``model`` validates), a union on the way is followed into the form the
    mapping written there selects.
    """
    current: Any = model
    node = tree
    for part in (*path, None):
        forms = union_models(current)
        if forms:
            chosen = selected(forms, node) if isinstance(node, Map) else ()
            if len(chosen) != 1 and len(forms) > 1:
                return None
            current = chosen[0] if chosen else forms[0]
        if part is None:
            break
        current = field_type(current, part)
        node = _child(node, part)
        if current is None:
            return None
    current = unwrap(current)
    return current if _is_model(current) else None


def selected(forms: Sequence[type[BaseModel]], node: Map) -> tuple[type[BaseModel], ...]:
    """The forms ``node``'s keys point at most: one (the form it means), several (it mixes
    them) or none (no key of any form's).

    A one-value literal key with that value (``kind: redis``) decides above all, and one with
    another value rules its form out; else each required key present counts one. A union
    with one mapping form (``bool | Writeback``) means it by any mapping it does not rule out.
    """
    scores: list[tuple[tuple[int, int], type[BaseModel]]] = []
    for model in forms:
        score = _score(model, node)
        if score is not None:
            scores.append((score, model))
    if len(forms) == 1:
        return tuple(model for _, model in scores)
    best = max((score for score, _ in scores), default=(0, 0))
    if best == (0, 0):
        return ()
    return tuple(model for score, model in scores if score == best)


def form(model: type[BaseModel]) -> str:
    """A model as its mapping reads in a manifest: ``{sqlite: path, seed?, shared?}``."""
    parts = []
    for key, literal, required in _keys(model):
        if literal is not None:
            parts.append(f"{key}: {literal[0]}")
        elif required:
            parts.append(f"{key}: {_placeholder(_fields(model)[key].annotation)}")
        else:
            parts.append(f"{key}?")
    return "{" + ", ".join(parts) + "}"


def form_name(model: type[BaseModel], forms: Sequence[type[BaseModel]]) -> str:
    """What to call a form among ``forms``: its literal (``redis``), else its first required
    key no other form requires (``sqlite``), else its first required key."""
    required: list[str] = []
    for key, literal, is_required in _keys(model):
        if literal is not None:
            return str(literal[0])
        if is_required:
            required.append(key)
    others = {k for m in forms if m is not model for k in _required(m)}
    unique = [key for key in required if key not in others]
    return (unique or required or [model.__name__])[0]


# --------------------------------------------------------------------------- helpers


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


@functools.cache
def _fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A model's fields by the key a manifest writes (the alias, else the name)."""
    return {info.alias or name: info for name, info in model.model_fields.items()}


@functools.cache
def _keys(model: type[BaseModel]) -> tuple[tuple[str, tuple[Any] | None, bool], ...]:
    """Each key of a model with its one-value literal (None if it has none) and whether it
    is required: what tells forms apart."""
    found = []
    for key, info in _fields(model).items():
        tp = unwrap(info.annotation)
        literal = get_args(tp) if get_origin(tp) is Literal else ()
        found.append((key, literal if len(literal) == 1 else None, info.is_required()))
    return tuple(found)


@functools.cache
def _required(model: type[BaseModel]) -> frozenset[str]:
    return frozenset(key for key, _, required in _keys(model) if required)


def _score(model: type[BaseModel], node: Map) -> tuple[int, int] | None:
    """(literal keys matched, required keys present), or None when a literal rules it out."""
    literals = required = 0
    items = node.items
    for key, literal, is_required in _keys(model):
        entry = items.get(key)
        if entry is None:
            continue
        if literal is not None:
            value = entry[1]
            if not isinstance(value, Scalar) or "${" in str(value.value):
                continue  # a variable's value is not known here
            if value.value not in literal:
                return None
            literals += 1
        elif is_required:
            required += 1
    return literals, required


def _placeholder(tp: Any) -> str:
    """A required value as a form shows it: ``path``, ``{dsn: ...}``, ``...``."""
    tp = unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, PurePath):
        return "path"
    if _is_model(tp):
        keys = [key for key in _fields(tp) if key in _required(tp)]
        return "{" + ", ".join(f"{key}: ..." for key in keys) + "}" if keys else "{...}"
    return "..."


def _child(node: Node | None, part: str | int) -> Node | None:
    if isinstance(node, Map) and isinstance(part, str) and part in node.items:
        return node.items[part][1]
    if isinstance(node, Seq) and isinstance(part, int) and 0 <= part < len(node.items):
        return node.items[part]
    return None
