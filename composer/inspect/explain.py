"""The effective manifest, value by value with where each came from; and what two differ in.

``composer diff`` is a view over ``effective_values``: every leaf of the validated manifest
(after ``extends``, overlays and ``${VAR}``), keyed by the manifest's own key names like
``("providers", "status", "request", "url")``, with its origin. A value that came from a
variable is shown as written (``Bearer ${STATUS_TOKEN}``), never as its value; so is a
provider whose name came from one (``provider ${TEAM}``). ``composer explain`` and
``composer render`` print the same manifest as YAML (``render.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from composer.inspect.render import manifest_folder, provider_name, relative_path, render_lines
from composer.manifest import KeyPath, Manifest, Origin

__all__ = [
    "Change",
    "Value",
    "diff_manifests",
    "effective_values",
    "explain_lines",
    "provider_name",
]


@dataclass(frozen=True)
class Value:
    """One leaf of the effective manifest."""

    keys: KeyPath
    shown: str  # JSON text of the value, or the raw text with ${VAR} when it is a secret
    origin: Origin | None  # None: the model's default
    path: str  # the keys dotted, a provider named as written: providers.${TEAM}.priority
    data: Any = None  # the value shown, as JSON data (not yet masked: mask its strings)

    @property
    def where(self) -> str:
        return self.origin.location if self.origin is not None else "default"


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _path(manifest: Manifest, keys: KeyPath) -> str:
    if keys[:1] == ("providers",) and len(keys) > 1:
        keys = ("providers", provider_name(manifest, keys[1]), *keys[2:])
    return ".".join(str(k) for k in keys)


def _is_scalar_list(data: Any) -> bool:
    return isinstance(data, list) and not any(isinstance(item, (dict, list)) for item in data)


def _leaves(data: Any, keys: KeyPath, whole_lists: bool) -> list[tuple[KeyPath, Any]]:
    if isinstance(data, dict) and data:
        return [
            leaf
            for key, value in data.items()
            for leaf in _leaves(value, (*keys, key), whole_lists)
        ]
    nested = isinstance(data, list) and data and keys != ("providers",)
    if nested and not (whole_lists and _is_scalar_list(data)):
        return [
            leaf
            for index, value in enumerate(data)
            for leaf in _leaves(value, (*keys, index), whole_lists)
        ]
    return [(keys, data)]


def effective_values(manifest: Manifest, *, whole_lists: bool = False) -> list[Value]:
    """Every leaf value in manifest order, providers addressed by name, secrets as written.

    ``whole_lists`` keeps a list of scalars as one value (``["a", "b"]``, located where the
    list starts) instead of one value per item; a diff reads better that way.
    """
    folder = manifest_folder(manifest)
    top = manifest.model_dump(by_alias=True, exclude={"providers"})
    pairs = _leaves(_plain(top, folder), (), whole_lists)
    for config in manifest.providers:
        dumped = _plain(config.model_dump(by_alias=True), folder)
        pairs += _leaves(dumped, ("providers", config.name), whole_lists)
    values: list[Value] = []
    for keys, value in pairs:
        origin = _origin_of(manifest, keys)
        data: Any
        if isinstance(value, list) and value:
            items = [_shown(manifest, (*keys, i), item) for i, item in enumerate(value)]
            shown = f"[{', '.join(items)}]"
            data = [_as_written(manifest, (*keys, i), item) for i, item in enumerate(value)]
        else:
            shown = _shown(manifest, keys, value)
            data = _as_written(manifest, keys, value)
        values.append(Value(keys, shown, origin, _path(manifest, keys), data))
    return values


def _plain(data: Any, folder: Path | None) -> Any:
    """A model dump with each path relative to the manifest's folder (as written, mostly),
    so that two checkouts of one folder do not differ in every path."""
    if isinstance(data, Path):
        return relative_path(data, folder)
    if isinstance(data, dict):
        return {key: _plain(value, folder) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_plain(value, folder) for value in data]
    return data


def _shown(manifest: Manifest, keys: KeyPath, value: Any) -> str:
    """JSON of ``value``; a value that came from a variable as written (``${NAME}``)."""
    origin = _origin_of(manifest, keys)
    if origin is not None and origin.is_secret and origin.raw is not None:
        return _show(origin.raw)
    return manifest.redact(_show(value))


def _as_written(manifest: Manifest, keys: KeyPath, value: Any) -> Any:
    """``value``, or as written (``${NAME}``) when it came from a variable."""
    origin = _origin_of(manifest, keys)
    if origin is not None and origin.is_secret and origin.raw is not None:
        return origin.raw
    return value


def _origin_of(manifest: Manifest, keys: KeyPath) -> Origin | None:
    """The origin of ``keys``; a list item without its own falls back to its list's."""
    while keys:
        origin = manifest.origin(*keys)
        if origin is not None or not isinstance(keys[-1], int):
            return origin
        keys = keys[:-1]
    return None


def explain_lines(manifest: Manifest) -> list[str]:
    """The effective manifest as YAML lines, each value followed by ``# file:line:col``."""
    return render_lines(manifest)


@dataclass(frozen=True)
class Change:
    """One difference between two effective manifests."""

    keys: KeyPath
    before: Value | None  # None: only in the second
    after: Value | None  # None: only in the first

    @property
    def kind(self) -> Literal["changed", "added", "removed"]:
        """``added`` only in the second, ``removed`` only in the first, else ``changed``."""
        if self.before is None:
            return "added"
        return "removed" if self.after is None else "changed"

    @property
    def path(self) -> str:
        """The changed value's keys dotted, a provider named as written."""
        side = self.after or self.before
        assert side is not None
        return side.path

    def describe(self) -> str:
        if self.before is not None and self.after is not None and self.keys == _ORDER:
            return f"~ {self.before.path}: {self.before.shown} -> {self.after.shown}"
        if self.before is None:
            assert self.after is not None
            return f"+ {self.after.path}: {self.after.shown}  # {self.after.where}"
        if self.after is None:
            return f"- {self.before.path}: {self.before.shown}  # {self.before.where}"
        return (
            f"~ {self.before.path}: {self.before.shown} -> {self.after.shown}"
            f"  # {self.before.where} -> {self.after.where}"
        )


def diff_manifests(first: Manifest, second: Manifest) -> list[Change]:
    """Leaf-by-leaf differences; a provider only on one side is one change, not one per field."""
    a = {v.keys: v for v in effective_values(first, whole_lists=True)}
    b = {v.keys: v for v in effective_values(second, whole_lists=True)}
    names_a = {c.name for c in first.providers}
    names_b = {c.name for c in second.providers}
    changes: list[Change] = []
    for name in [c.name for c in first.providers if c.name not in names_b]:
        changes.append(Change(("providers", name), _whole(first, name), None))
    for keys in [*a, *(k for k in b if k not in a)]:
        provider = keys[1] if keys[:1] == ("providers",) else None
        if provider is not None and (provider not in names_a or provider not in names_b):
            continue
        before, after = a.get(keys), b.get(keys)
        if before is None or after is None or before.shown != after.shown:
            changes.append(Change(keys, before, after))
    for name in [c.name for c in second.providers if c.name not in names_a]:
        changes.append(Change(("providers", name), None, _whole(second, name)))
    order_a = [c.name for c in first.providers if c.name in names_b]
    order_b = [c.name for c in second.providers if c.name in names_a]
    if order_a != order_b:  # blocks render in declaration order: a move changes the text
        changes.append(Change(_ORDER, _order(first, order_a), _order(second, order_b)))
    return changes


_ORDER: KeyPath = ("providers", "(order)")


def _order(manifest: Manifest, names: list[str]) -> Value:
    shown = [provider_name(manifest, name) for name in names]
    return Value(_ORDER, ", ".join(shown), None, "providers (order)", shown)


def _whole(manifest: Manifest, name: str) -> Value:
    config = next(c for c in manifest.providers if c.name == name)
    shown = f"type {config.type}, priority {config.priority}"
    keys = ("providers", name)
    data = {"type": config.type, "priority": config.priority}
    return Value(keys, shown, manifest.origin(*keys), _path(manifest, keys), data)
