r"""Pydantic ``ValidationError`` -> located, human-worded ``ManifestError``\ s.

Pydantic reports a ``loc`` path and a machine ``type``; a user wants ``file:line:column`` and a
sentence. This module walks the located tree (``yamlnodes.py``) along ``loc`` to find the line,
words each error type in plain English, lists the allowed keys or the closest one for an
unknown key, and never echoes the input (it may be a secret). For a union field with mapping
forms (memory's ``source``) it keeps the errors of the form the value means and says in one
line which form that is and what the value lacks, or which forms there are (``variants.py``
tells them apart), instead of every member's complaint. It knows nothing of files, overlays
or variables beyond the two facts the loader hands it about each value.
"""

from __future__ import annotations

import difflib
from collections.abc import Container, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from composer.errors import ManifestError
from composer.manifest.source import KeyPath
from composer.manifest.variants import (
    field_type,
    form,
    form_name,
    model_at,
    selected,
    union_models,
)
from composer.manifest.yamlnodes import Map, Mark, Node, Scalar, Seq, plain, read_yaml

__all__ = ["did_you_mean", "dotted", "locate", "translate", "validate_file"]

M = TypeVar("M", bound=BaseModel)


def validate_file(path: str, model: type[M]) -> tuple[Node, Any, M]:
    """The YAML file at ``path`` (a file beside the manifests: tests, questions) read as a
    located tree, its plain data and ``model`` validated from it; every mistake a located
    ``ManifestError`` (the input never echoed)."""
    tree, errors = read_yaml(path, Path(path).absolute())
    if errors:
        raise ManifestError.collect(errors)
    data = plain(tree)
    try:
        return tree, data, model.model_validate(data)
    except ValidationError as e:
        raise ManifestError.collect(
            translate(e, tree, model, "", unresolved=(), variables_of={})
        ) from e


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

    def add(mark: Mark, message: str) -> None:
        if label:
            message = f"{label}: {message}"
        if (mark.line, mark.column, message) not in seen:
            seen.add((mark.line, mark.column, message))
            results.append(mark.error(message))

    items, lines = _by_form(error.errors(include_url=False, include_input=False), tree, model)
    for mark, node, message in lines:
        if id(node) not in unresolved:
            add(mark, message)
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
            message += _allowed_keys(model, path, key, tree)
        elif kind == "missing":
            key = str(loc[-1]) if loc else "?"
            message = f'missing key "{key}"' + (f" in {where}" if where else "")
        elif used and not _is_generic(kind):
            names = ", ".join(f"${{{name}}}" for name in used)
            message = (f"{where}: " if where else "") + f"invalid value (from {names}; not shown)"
        else:
            message = (f"{where}: " if where else "") + _describe(item)
        add(mark, message)
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


def _allowed_keys(model: type[BaseModel], path: KeyPath, key: str, tree: Node) -> str:
    target = model_at(model, path, tree)
    if target is None:
        return ""
    names = [info.alias or name for name, info in target.model_fields.items()]
    hint = did_you_mean(key, names)
    return hint or f"; allowed keys: {', '.join(names)}"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean "x"?)`` for the closest of ``choices``, or "" when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


# --------------------------------------------------------------------------- union fields

_Line = tuple[Mark, Node | None, str]
"""One message of ours about a union value: where, the value it is about, what it says."""

_REFUSED_AS_MAPPING = frozenset(
    {"model_type", "model_attributes_type", "dict_type", "union_tag_invalid", "union_tag_not_found"}
)
"""What a mapping form (or a discriminated union) says of a value that is no such mapping."""


def _by_form(items: list[Any], tree: Node, model: type[BaseModel]) -> tuple[list[Any], list[_Line]]:
    """The errors of union fields with mapping forms, as the form the value means sees them.

    Pydantic tries every member of a union and reports what each refused, so one mistake in a
    ``source`` reads as five ("must be 'branch'", a key missing for one form, unknown for
    another). A mapping that means one form (``variants.selected``) keeps that form's errors
    only, its unknown and missing keys said in one line naming the form; a mapping that mixes
    forms or means none, and a scalar where a mapping form was expected, get one line that
    lists the forms. Everything else passes unchanged.
    """
    kept: list[Any] = []
    groups: dict[tuple[Any, ...], tuple[tuple[type[BaseModel], ...], list[Any]]] = {}
    for item in items:
        found = _union_in(model, item["loc"])
        if found is None:
            kept.append(item)
        else:
            depth, forms = found
            groups.setdefault(item["loc"][:depth], (forms, []))[1].append(item)
    lines: list[_Line] = []
    for union_loc, (forms, group) in groups.items():
        mark, path, node = locate(tree, union_loc, key_of_last=False)
        if node is None or len(path) != len(union_loc):  # not where the tree says: as it is
            kept += group
            continue
        where = dotted(path)
        depth = len(union_loc)
        if isinstance(node, Map):
            chosen = selected(forms, node)
            if len(chosen) == 1:
                mine, lacking = _of_form(group, depth, chosen[0])
                if len(forms) > 1 and lacking:
                    lines.append(_looks_like(tree, node, where, lacking, chosen[0], forms))
                    mine = [item for item in mine if not any(item is x for x in lacking)]
                kept += mine
            elif chosen:
                named = [f"the {form_name(m, forms)} form {form(m)}" for m in chosen]
                text = f"mixes {_and(named)}; keep the keys of one"
                lines.append((node.mark, node, _at(where, text)))
            else:
                text = f"matches none of the forms {', '.join(form(m) for m in forms)}"
                lines.append((node.mark, node, _at(where, text)))
            continue
        refused = [i for i in group if len(i["loc"]) > depth]
        refused = [i for i in refused if i["type"] not in _REFUSED_AS_MAPPING]
        if any(len(i["loc"]) > depth + 1 or not _is_generic(i["type"]) for i in refused):
            kept += refused  # another member has more to say (a list's items, a template)
            continue
        wanted = list(dict.fromkeys(_describe(i) for i in refused))
        head = " or ".join(wanted) if wanted else "must be a mapping"
        if wanted and isinstance(node, Scalar) and node.is_str:
            head = f"a string {head}"
        forms_text = ", ".join(form(m) for m in forms)
        these = "the mapping form is" if len(forms) == 1 else "the mapping forms are"
        lines.append((mark, node, _at(where, f"{head}; {these} {forms_text}")))
    return kept, lines


def _union_in(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[int, Any] | None:
    """How deep in ``loc`` the first union with mapping forms is, and those forms."""
    current: Any = model
    for depth in range(len(loc) + 1):
        forms = union_models(current)
        if forms:
            return depth, forms
        if depth == len(loc):
            return None
        current = field_type(current, loc[depth])
        if current is None:
            return None
    return None


def _of_form(group: list[Any], depth: int, chosen: type[BaseModel]) -> tuple[list[Any], list[Any]]:
    """The errors ``chosen`` made (pydantic names no member in ``loc``: the keys tell), and
    among them its unknown and missing keys."""
    keys = {info.alias or name for name, info in chosen.model_fields.items()}
    mine: list[Any] = []
    lacking: list[Any] = []
    for item in group:
        loc, kind = item["loc"], item["type"]
        if len(loc) <= depth + 1:  # the whole value: only a model's own check is the form's
            if len(loc) == depth + 1 and kind in ("value_error", "assertion_error"):
                mine.append(item)
            continue
        key = loc[depth + 1]
        top = len(loc) == depth + 2
        if top and kind == "extra_forbidden":
            if key not in keys:
                mine.append(item)
                lacking.append(item)
        elif key in keys:
            mine.append(item)
            if top and kind == "missing":
                lacking.append(item)
    return mine, lacking


def _looks_like(
    tree: Node,
    node: Map,
    where: str,
    lacking: list[Any],
    chosen: type[BaseModel],
    forms: tuple[type[BaseModel], ...],
) -> _Line:
    """``source: looks like the sqlite form {sqlite: path, ...}, which has no key "x"``."""
    unknown = list(dict.fromkeys(str(i["loc"][-1]) for i in lacking if i["type"] != "missing"))
    missing = list(dict.fromkeys(str(i["loc"][-1]) for i in lacking if i["type"] == "missing"))
    keys = [info.alias or name for name, info in chosen.model_fields.items()]
    parts = []
    if len(unknown) == 1:
        parts.append(f'has no key "{unknown[0]}"{did_you_mean(unknown[0], keys)}')
    elif unknown:
        parts.append("has no keys " + ", ".join(f'"{key}"' for key in unknown))
    if missing:
        parts.append("needs " + ", ".join(f'"{key}"' for key in missing))
    mark = node.mark
    if unknown:
        first = next(i for i in lacking if i["type"] != "missing")
        mark = locate(tree, first["loc"], key_of_last=True)[0]
    text = f"looks like the {form_name(chosen, forms)} form {form(chosen)}, which "
    return mark, node, _at(where, text + " and ".join(parts))


def _at(where: str, text: str) -> str:
    return f"{where}: {text}" if where else text


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
