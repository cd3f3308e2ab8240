"""Provider types: a config model plus a factory, found through entry points.

The built-in types register through the ``composer.providers`` entry-point group in this
project's ``pyproject.toml``, exactly as a third-party package adds one::

    [project.entry-points."composer.providers"]
    my_type = "my_package.module:provider_type"     # a ProviderType instance

Nothing is loaded at import time; a ``ProviderTypes`` object loads entry points when asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from composer.errors import ComposerError
from composer.manifest import Manifest, ProviderConfig

__all__ = [
    "ENTRY_POINT_GROUP",
    "BuildContext",
    "ProviderFactory",
    "ProviderType",
    "ProviderTypes",
    "UnknownProviderType",
]

ENTRY_POINT_GROUP = "composer.providers"


@dataclass(frozen=True)
class BuildContext:
    """What a factory may use besides its config: the loaded manifest and its shared state."""

    manifest: Manifest

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        """State shared by every registry built from the same loaded manifest (made once)."""
        cache = self.manifest.shared
        if key not in cache:
            cache[key] = make()
        return cache[key]


ProviderFactory = Callable[[Any, BuildContext], Any]


@dataclass(frozen=True)
class ProviderType:
    """One provider type: its ``name`` (the manifest's ``type:``), config model and factory."""

    name: str
    config: type[ProviderConfig]
    factory: ProviderFactory
    summary: str = ""


class UnknownProviderType(ComposerError, KeyError):
    """A manifest names a type no installed package provides."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown provider type {name!r}; known types: {', '.join(known)}")

    def __str__(self) -> str:
        return str(self.args[0])


class ProviderTypes:
    """A registry of provider types (an object, not a module global)."""

    def __init__(self, types: list[ProviderType] | None = None) -> None:
        self._types: dict[str, ProviderType] = {}
        for ptype in types or []:
            self.add(ptype)

    def add(self, ptype: ProviderType) -> None:
        if not isinstance(ptype, ProviderType):
            raise ComposerError(f"not a ProviderType: {ptype!r}")
        existing = self._types.get(ptype.name)
        if existing is not None and existing is not ptype:
            raise ComposerError(f"provider type {ptype.name!r} is registered twice")
        self._types[ptype.name] = ptype

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> ProviderTypes:
        """Add every type advertised in ``group``; a broken plugin names its entry point."""
        for ep in entry_points(group=group):
            try:
                ptype = ep.load()
            except Exception as e:
                raise ComposerError(
                    f"cannot load provider type {ep.name!r} ({ep.value}): {e}"
                ) from e
            if isinstance(ptype, ProviderType) and ptype.name != ep.name:
                raise ComposerError(
                    f"entry point {ep.name!r} ({ep.value}) provides type {ptype.name!r}"
                )
            self.add(ptype)
        return self

    @classmethod
    def installed(cls) -> ProviderTypes:
        """A new registry with every type installed in this environment."""
        return cls().load_entry_points()

    def get(self, name: str) -> ProviderType:
        try:
            return self._types[name]
        except KeyError:
            raise UnknownProviderType(name, self.names) from None

    @property
    def names(self) -> list[str]:
        return sorted(self._types)

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def __iter__(self) -> Iterator[ProviderType]:
        return iter(self._types[name] for name in self.names)

    def __len__(self) -> int:
        return len(self._types)
