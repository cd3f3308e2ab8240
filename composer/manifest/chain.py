"""A manifest file and every file it ``extends``, as located trees, confined to its folder.

``extends`` stays within the folder of the manifest loaded, symlinks followed, unless
``COMPOSER_EXTENDS_ROOTS`` lists the folder it leads to, and the file it names must be a
manifest: otherwise whoever may edit a manifest could have composer read any file of the
machine and quote it back key by key. Cycles, gaps and files that cannot be read are errors
at the ``extends`` value that leads to them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from composer.errors import ManifestError
from composer.manifest.models import Manifest, field_names_by_key
from composer.manifest.yamlnodes import Map, Mark, Scalar, Seq, read_yaml, scalar_at

__all__ = ["read_chain"]

_MANIFEST_KEYS = tuple(field_names_by_key(Manifest))
"""The top-level keys of a manifest: a file reached by extends holds at least one."""


def read_chain(
    display: str,
    file: Path,
    *,
    roots: tuple[Path, ...],
    resolve: Callable[[Scalar], str],
    errors: list[ManifestError],
) -> list[Map]:
    """The file and everything it extends, the file first.

    ``roots`` are the resolved folders an extends may lead into, the manifest's first;
    ``resolve`` gives an ``extends`` value its text (variables substituted). Fatal problems
    raise; the others are added to ``errors``.
    """
    trees: list[Map] = []
    visited: list[tuple[Path, str]] = []
    via: tuple[Scalar, str] | None = None
    while True:
        tree = _read(display, file, via, errors)  # first: it reports a path that cannot be read
        visited.append((file.resolve(), display))
        trees.append(tree)
        entry = tree.items.get("extends")
        if entry is None:
            return trees
        node = entry[1]
        if not isinstance(node, Scalar) or not node.is_str or not node.value:
            raise node.mark.error("extends: must be the file name of a base manifest")
        target = resolve(node)
        step = Path(target)
        next_display = (
            target if step.is_absolute() else os.path.join(os.path.dirname(display), target)
        )
        next_file = step if step.is_absolute() else file.parent / step
        try:
            outside = not _within(next_file, roots)
            looped = any(seen == next_file.resolve() for seen, _ in visited)
            reason = None if outside else _unusable(next_file)
        except (OSError, ValueError) as e:  # a name too long, a NUL byte, a lone surrogate
            outside, looped, reason = False, False, getattr(e, "strerror", None) or str(e)
        if outside:
            raise node.mark.error(
                f'extends: "{target}" is outside "{roots[0]}", the folder of the '
                "manifest loaded (symlinks followed); a base elsewhere must be in a folder "
                f'listed in COMPOSER_EXTENDS_ROOTS (separated by "{os.pathsep}")'
            )
        if looped:
            cycle = " -> ".join([shown for _, shown in visited] + [next_display])
            raise node.mark.error(f"extends cycle: {cycle}")
        if reason is not None:
            raise node.mark.error(f'extends: cannot read "{target}": {reason}')
        display, file, via = next_display, next_file, (node, target)


def _read(
    display: str, file: Path, via: tuple[Scalar, str] | None, errors: list[ManifestError]
) -> Map:
    """One file as a located tree; fatal problems raise, others are added to ``errors``.

    A file reached by ``extends`` (``via``: its value and target) that is no mapping with a
    manifest key is reported at that value as not a manifest, and nothing of what it holds is
    shown: a base manifest is checked key by key, which would quote any file.
    """
    tree, found = read_yaml(display, file, overlay_tags=True)
    if via is not None and not (
        isinstance(tree, Map) and any(key in _MANIFEST_KEYS for key in tree.items)
    ):
        node, target = via
        raise node.mark.error(
            f'extends: "{target}" is not a manifest (a base manifest is a mapping with '
            f"{', '.join(_MANIFEST_KEYS[:-1])} or {_MANIFEST_KEYS[-1]})"
        )
    errors.extend(found)
    if not isinstance(tree, Map):
        kind = "a list" if isinstance(tree, Seq) else "a single value"
        raise tree.mark.error(
            f"the top level must be a mapping (version, budget, providers), not {kind}"
        )
    _check_names(tree, errors)
    return tree


def _check_names(tree: Map, errors: list[ManifestError]) -> None:
    """Provider names are unique within one file (overlays update by name across files)."""
    providers = tree.items.get("providers")
    if providers is None or not isinstance(providers[1], Seq):
        return
    seen: dict[str, Mark] = {}
    for entry in providers[1].items:
        name = scalar_at(entry, "name")
        if name is None or not isinstance(name.value, str):
            continue
        if name.value in seen:
            errors.append(
                name.mark.error(
                    f'duplicate provider name "{name.value}" (first at line '
                    f"{seen[name.value].line})"
                )
            )
        else:
            seen[name.value] = name.mark


def _within(file: Path, roots: tuple[Path, ...]) -> bool:
    """Whether ``file``, its symlinks followed, is inside one of ``roots``."""
    real = file.resolve()
    return any(real.is_relative_to(root) for root in roots)


def _unusable(file: Path) -> str | None:
    """Why ``file`` cannot be a manifest, or None when it is a regular file."""
    if file.is_file():
        return None
    if file.is_dir():
        return "is a directory"
    return "not a regular file" if file.exists() else "no such file"
