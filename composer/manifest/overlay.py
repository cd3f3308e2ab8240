"""The merge rules of ``extends``: how an overlay changes the manifest it extends.

Mappings merge deeply (the overlay wins), lists and scalars are replaced whole, and the
top-level ``providers`` list merges by provider ``name``. The rules work on located trees
(``yamlnodes.py``), before ``${VAR}`` is substituted, so every merged value still points at
the file and line it came from; they are kept here, apart from reading and validation, as the
one place that says what an overlay means.
"""

from __future__ import annotations

from collections.abc import Sequence

from composer.manifest.yamlnodes import Map, Node, Seq, scalar_at

__all__ = ["merge_chain"]


def merge_chain(trees: Sequence[Map]) -> Map:
    """One tree from a file and the files it extends, ``trees[0]`` the file, the last the base."""
    merged = trees[-1]
    for overlay in reversed(trees[:-1]):
        merged = _merge_maps(merged, overlay, top=True)
    return merged


def _merge(base: Node, over: Node) -> Node:
    """Mappings merge deeply (the overlay wins); lists and scalars are replaced whole."""
    if isinstance(base, Map) and isinstance(over, Map):
        return _merge_maps(base, over)
    return over


def _merge_maps(base: Map, over: Map, *, top: bool = False) -> Map:
    """``_merge`` for mappings; at the top level ``providers`` merge by name."""
    items = dict(base.items)
    for key, (key_mark, child) in over.items.items():
        if key not in items:
            items[key] = (key_mark, child)
        elif top and key == "providers" and isinstance(child, Seq):
            old = items[key][1]
            items[key] = (
                key_mark,
                _merge_providers(old, child) if isinstance(old, Seq) else child,
            )
        else:
            items[key] = (key_mark, _merge(items[key][1], child))
    return Map(base.mark, items)


def _merge_providers(base: Seq, over: Seq) -> Seq:
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
            items[index[key]] = _merge(old, entry)
    return Seq(base.mark, items)


def _name(entry: Node) -> str | None:
    """A provider entry's ``name`` as written (before ``${VAR}``), if it is a string."""
    name = scalar_at(entry, "name")
    return name.value if name is not None and isinstance(name.value, str) else None
