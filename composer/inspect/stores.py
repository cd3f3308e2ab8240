"""The memory stores ``composer memory`` opens, found by kind through entry points.

A store spec names its kind: ``KIND:LOCATION``, a ``KIND://`` URL, or a path whose suffix
says (``.jsonl`` is ``jsonl``; ``.sqlite``, ``.sqlite3`` and ``.db`` are ``sqlite``). Each
kind is an entry point of the ``composer.stores`` group: an opener called as
``opener(spec, schema=SCHEMA)`` (the spec as written) that returns a store with ``add``,
``export``, ``counts``, ``exists`` and ``aclose`` (``builtin_providers.stores.ItemStore``);
opening creates nothing, ``exists`` says whether the store is there without creating it, and
the items ``export`` gives carry ``written_back`` and ``created_at``, which ``add`` keeps. composer's own
kinds (``jsonl``, ``sqlite``, ``postgresql``, ``postgres``) are declared in its
``pyproject.toml`` like any other package's, so the command line names no store type and a
package can add one.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Protocol

from composer.errors import PluginError

__all__ = ["STORE_GROUP", "SUFFIX_KINDS", "Store", "kind_of", "open_store", "store_kinds"]

STORE_GROUP = "composer.stores"

SUFFIX_KINDS = {".jsonl": "jsonl", ".sqlite": "sqlite", ".sqlite3": "sqlite", ".db": "sqlite"}
"""The kind of a spec that is a bare path, by its suffix."""


class Store(Protocol):
    """What ``composer memory`` calls on a store (``ItemStore`` of ``builtin_providers``)."""

    async def add(self, items: Sequence[Any]) -> int: ...

    async def export(self, namespace: str | None = None) -> list[Any]: ...

    async def counts(self) -> dict[str, int]: ...

    async def exists(self) -> bool: ...

    async def aclose(self) -> None: ...


def store_kinds() -> dict[str, EntryPoint]:
    """Every installed store kind, by name (the first distribution's, if two declare one)."""
    kinds: dict[str, EntryPoint] = {}
    for ep in entry_points(group=STORE_GROUP):
        kinds.setdefault(ep.name, ep)
    return kinds


def kind_of(spec: str, kinds: Collection[str]) -> str | None:
    """The kind among ``kinds`` that ``spec`` names, or None."""
    scheme, separator, rest = spec.partition(":")
    if separator and rest and scheme in kinds:  # KIND:LOCATION, or KIND://...
        return scheme
    kind = SUFFIX_KINDS.get(Path(spec).suffix.lower())
    return kind if kind in kinds else None


def open_store(spec: str, *, schema: str) -> Store:
    """The store ``spec`` names, opened by its kind's entry point.

    ``ValueError`` when no installed kind matches ``spec``; ``PluginError`` when the kind's
    entry point cannot be loaded, or composer's own kinds are not installed at all (its
    package metadata predates them: reinstall it).
    """
    kinds = store_kinds()
    if not kinds:
        raise PluginError(
            f"no memory store kind is installed (entry points {STORE_GROUP!r}): reinstall "
            "context-composer (pip install context-composer, or pip install -e . in a checkout)"
        )
    kind = kind_of(spec, kinds)
    if kind is None:
        raise ValueError(
            f"{spec!r} names no store: give postgresql://..., sqlite:PATH, jsonl:PATH, "
            "or a path ending in .jsonl, .sqlite, .sqlite3 or .db"
        )
    ep = kinds[kind]
    try:
        opener = ep.load()
    except Exception as e:
        raise PluginError(
            f"cannot load memory store {kind!r} from entry point {ep.value}: "
            f"{type(e).__name__}: {e}",
            entry_point=ep.value,
        ) from e
    store: Store = opener(spec, schema=schema)
    return store
