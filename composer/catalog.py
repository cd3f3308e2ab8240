"""The provider types a manifest may name: added directly, or advertised by entry points.

Entry points of the ``composer.providers`` group are listed once per process (per
``sys.path``) and each is loaded by name the first time a manifest uses its type, so a broken
plugin fails only the manifests that name it, and attaching a manifest to a branch never
rescans the installed packages (the loader binds its catalog to the manifest it makes, read
back with ``catalog_of``). A type's config model is checked when the type is added or loaded:
its hooks (``composer.hooks.CONFIG_HOOKS``) must take the calls the engine makes.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Iterable, Iterator
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from composer.errors import PluginError, UnknownProviderType
from composer.hooks import CONFIG_HOOKS, check_hooks
from composer.manifest.models import Manifest
from composer.plugin import ProviderType

__all__ = ["ENTRY_POINT_GROUP", "ProviderTypes", "catalog_of"]

ENTRY_POINT_GROUP = "composer.providers"


class ProviderTypes:
    """A catalog of provider types (an object, not a module global), loaded lazily by name."""

    def __init__(self, types: Iterable[ProviderType[Any]] = ()) -> None:
        self._types: dict[str, ProviderType[Any]] = {}
        self._advertised: dict[str, EntryPoint] = {}
        self._broken: dict[str, PluginError] = {}
        self._lock = threading.Lock()
        for ptype in types:
            self.add(ptype)

    def add(self, ptype: ProviderType[Any]) -> None:
        """Add ``ptype``; a ``PluginError`` when it is not a ``ProviderType``, when its config's
        hooks cannot take the engine's calls, or when another type has its name."""
        if not isinstance(ptype, ProviderType):
            raise PluginError(f"not a ProviderType: {type(ptype).__name__}")
        check_hooks(ptype.config, CONFIG_HOOKS)
        existing = self._types.get(ptype.name)
        if existing is not None and existing is not ptype:
            raise PluginError(f"provider type {ptype.name!r} is registered twice")
        self._types[ptype.name] = ptype

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> ProviderTypes:
        """Advertise every entry point of ``group`` by name; none is imported until used."""
        for ep in entry_points(group=group):
            if ep.name not in self._types:
                self._advertised.setdefault(ep.name, ep)
        return self

    @classmethod
    def installed(cls) -> ProviderTypes:
        """The catalog of every type installed here: one per process and ``sys.path``."""
        return _installed(tuple(sys.path))

    def get(self, name: str) -> ProviderType[Any]:
        """The type called ``name``, loading its entry point the first time.

        Raises ``UnknownProviderType`` (listing the known names) or, for a plugin that cannot
        be loaded, a ``PluginError`` naming its entry point (again on every later call).
        """
        ptype = self._types.get(name)
        if ptype is not None:
            return ptype
        with self._lock:
            if name in self._types:
                return self._types[name]
            if name in self._broken:
                raise self._broken[name]
            ep = self._advertised.get(name)
            if ep is None:
                raise UnknownProviderType(name, self.names)
            try:
                ptype = _load(ep)
            except PluginError as e:
                self._broken[name] = e
                raise
            self._types[name] = ptype
            del self._advertised[name]
            return ptype

    def load_all(self) -> list[PluginError]:
        """Load every advertised type now; the errors of those that cannot be loaded."""
        errors = []
        for name in self.names:
            try:
                self.get(name)
            except PluginError as e:
                errors.append(e)
        return errors

    @property
    def names(self) -> list[str]:
        """Every type name known, loaded or not (a broken plugin's name included)."""
        return sorted({*self._types, *self._advertised, *self._broken})

    def __contains__(self, name: object) -> bool:
        return name in self._types or name in self._advertised or name in self._broken

    def __iter__(self) -> Iterator[ProviderType[Any]]:
        """Every type that loads, by name (see ``load_all`` for the ones that do not)."""
        self.load_all()
        return iter([self._types[name] for name in sorted(self._types)])

    def __len__(self) -> int:
        return len(self.names)


def _load(ep: EntryPoint) -> ProviderType[Any]:
    where = f"entry point {ep.name!r} ({ep.value})"
    try:
        ptype = ep.load()
    except Exception as e:
        raise PluginError(
            f"cannot load provider type from {where}: {type(e).__name__}: {e}",
            entry_point=ep.value,
        ) from e
    if not isinstance(ptype, ProviderType):
        raise PluginError(
            f"{where} is a {type(ptype).__name__}, not a composer.plugin.ProviderType",
            entry_point=ep.value,
        )
    if ptype.name != ep.name:
        raise PluginError(f"{where} provides type {ptype.name!r}", entry_point=ep.value)
    try:
        check_hooks(ptype.config, CONFIG_HOOKS)
    except PluginError as e:
        raise PluginError(f"{where}: {e}", entry_point=ep.value) from e
    return ptype


@functools.lru_cache(maxsize=8)
def _installed(search_path: tuple[str, ...]) -> ProviderTypes:
    """A memo, not a registry: what ``sys.path`` advertises does not change while it is equal."""
    return ProviderTypes().load_entry_points()


def catalog_of(manifest: Manifest) -> ProviderTypes | None:
    """The provider types that validated ``manifest`` (None when it was not loaded from a file).

    ``build_registry`` builds from these, so attaching a manifest never rescans the installed
    entry points, and a manifest loaded with ``types=`` builds with the same types. The
    catalog is kept on the manifest, which knows nothing of it: a data model that imported
    the catalog would import the plugin contract, which imports the models.
    """
    types = manifest.types
    return types if isinstance(types, ProviderTypes) else None
