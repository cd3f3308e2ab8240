"""The merge rules of ``extends``: how an overlay changes the manifest it extends.

Mappings merge deeply (the overlay wins), lists and scalars are replaced whole, and the
top-level ``providers`` list merges by provider ``name``. A mapping that selects another form
of a union field than the base's (``source: {postgres: ...}`` over ``{sqlite: ...}``, see
``variants.py``) replaces it: merged, the two would be neither form. Two tags say the rest
(docker compose's names): ``!override`` replaces the base value whatever it is, ``!reset``
removes the key, so that the field gets its default (the reader leaves a reset key out of
its own file too, see ``Map.resets``).

The rules work on located trees (``yamlnodes.py``), before ``${VAR}`` is substituted, so every
merged value still points at the file and line it came from; they are kept here, apart from
reading and validation, as the one place that says what an overlay means.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from composer.catalog import ProviderTypes
from composer.errors import PluginError
from composer.manifest.models import Manifest
from composer.manifest.variants import field_type, selected, union_models
from composer.manifest.yamlnodes import Map, Node, Scalar, Seq, scalar_at

__all__ = ["merge_chain"]


def merge_chain(trees: Sequence[Map], types: ProviderTypes | None = None) -> Map:
    """One tree from a file and the files it extends, ``trees[0]`` the file, the last the base.

    ``types`` gives each provider entry's model, so that a union field in one (memory's
    ``source``) can switch forms; without it provider entries only merge.
    """
    merged = trees[-1]
    for overlay in reversed(trees[:-1]):
        merged = _merge_maps(merged, overlay, Manifest, top=True, types=types)
    return merged


def _merge(base: Node, over: Node, model: Any) -> Node:
    """Mappings merge deeply (the overlay wins) unless the overlay selects another form of a
    union; lists and scalars are replaced whole. ``model`` is the annotation at this key."""
    if isinstance(base, Map) and isinstance(over, Map) and not _switches(model, base, over):
        return _merge_maps(base, over, model)
    return over


def _merge_maps(
    base: Map, over: Map, model: Any, *, top: bool = False, types: ProviderTypes | None = None
) -> Map:
    """``_merge`` for mappings; at the top level ``providers`` merge by name."""
    items = dict(base.items)
    for key in over.resets:
        items.pop(key, None)
    for key, (key_mark, child) in over.items.items():
        if key not in items or child.override:
            items[key] = (key_mark, child)
        elif top and key == "providers" and isinstance(child, Seq):
            old = items[key][1]
            items[key] = (
                key_mark,
                _merge_providers(old, child, types) if isinstance(old, Seq) else child,
            )
        else:
            items[key] = (key_mark, _merge(items[key][1], child, field_type(model, key)))
    return Map(base.mark, items)


def _merge_providers(base: Seq, over: Seq, types: ProviderTypes | None) -> Seq:
    """By ``name``: an overlay entry updates the base entry (deeply), a new name is appended.

    An entry that names a different ``type`` replaces the base entry whole, in its place.
    """
    items = list(base.items)
    index: dict[str, int] = {}
    for i, entry in enumerate(items):
        name = _name(entry)
        if name is not None:
            index.setdefault(name, i)
    for entry in over.items:
        key = _name(entry)
        if key is None or key not in index:
            if key is not None:
                index[key] = len(items)
            items.append(entry)
            continue
        old = items[index[key]]
        new_type, old_type = scalar_at(entry, "type"), scalar_at(old, "type")
        if new_type is not None and (old_type is None or new_type.value != old_type.value):
            items[index[key]] = entry
        else:
            items[index[key]] = _merge(old, entry, _config(types, old_type))
    return Seq(base.mark, items)


def _switches(model: Any, base: Map, over: Map) -> bool:
    """Whether ``over`` selects another form of the union ``model`` than ``base`` does (each
    selecting one: an overlay of optional keys only, ``{seed: x}``, updates the base's)."""
    forms = union_models(model)
    if len(forms) < 2:
        return False
    chosen = selected(forms, over)
    if len(chosen) != 1:
        return False
    before = selected(forms, base)
    return len(before) == 1 and before[0] is not chosen[0]


def _config(types: ProviderTypes | None, type_node: Scalar | None) -> Any:
    """The config model of a provider entry's ``type``, if it names one that loads."""
    if types is None or type_node is None or not isinstance(type_node.value, str):
        return None
    if type_node.value not in types:
        return None
    try:
        return types.get(type_node.value).config
    except PluginError:  # reported when the entry is validated
        return None


def _name(entry: Node) -> str | None:
    """A provider entry's ``name`` as written (before ``${VAR}``), if it is a string."""
    name = scalar_at(entry, "name")
    return name.value if name is not None and isinstance(name.value, str) else None
