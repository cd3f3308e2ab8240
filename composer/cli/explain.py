"""The effective manifest, value by value with where each came from; and what two differ in.

``composer explain`` and ``composer diff`` are both views over ``effective_values``: every
leaf of the validated manifest (after ``extends``, overlays and ``${VAR}``), keyed like
``("providers", "status", "request", "url")``, with its origin. A value that came from a
variable is shown as written (``Bearer ${STATUS_TOKEN}``), never as its value; so is a
provider whose name came from one (``provider ${TEAM}``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

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

    @property
    def where(self) -> str:
        return self.origin.location if self.origin is not None else "default"


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def provider_name(manifest: Manifest, name: str | int) -> str:
    """The provider's name as shown: as written (``${TEAM}``) when a variable went into it.

    Providers are addressed by their substituted name, which is the variable's value: a secret.
    """
    origin = manifest.origin("providers", name, "name")
    if origin is not None and origin.is_secret and origin.raw is not None:
        return origin.raw
    return str(name)


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
    top = manifest.model_dump(mode="json", exclude={"providers"})
    pairs = _leaves(top, (), whole_lists)
    for config in manifest.providers:
        data = config.model_dump(mode="json")
        pairs += _leaves(data, ("providers", config.name), whole_lists)
    values: list[Value] = []
    for keys, value in pairs:
        origin = _origin_of(manifest, keys)
        if isinstance(value, list) and value:
            items = [_shown(manifest, (*keys, i), item) for i, item in enumerate(value)]
            shown = f"[{', '.join(items)}]"
        else:
            shown = _shown(manifest, keys, value)
        values.append(Value(keys, shown, origin, _path(manifest, keys)))
    return values


def _shown(manifest: Manifest, keys: KeyPath, value: Any) -> str:
    """JSON of ``value``; a value that came from a variable as written (``${NAME}``)."""
    origin = _origin_of(manifest, keys)
    if origin is not None and origin.is_secret and origin.raw is not None:
        return _show(origin.raw)
    return manifest.redact(_show(value))


def _origin_of(manifest: Manifest, keys: KeyPath) -> Origin | None:
    """The origin of ``keys``; a list item without its own falls back to its list's."""
    while keys:
        origin = manifest.origin(*keys)
        if origin is not None or not isinstance(keys[-1], int):
            return origin
        keys = keys[:-1]
    return None


_ALIGN_AT_MOST = 60


def explain_lines(manifest: Manifest) -> list[str]:
    """The effective manifest as YAML-like lines, each value followed by ``# file:line:col``."""
    values = effective_values(manifest)
    # Comments line up, except after a value too long to wait for (a template): one long
    # line must not push every comment off an ordinary terminal.
    width = max((n for v in values if (n := len(_label(v))) <= _ALIGN_AT_MOST), default=0)
    lines: list[str] = []
    current: str | int | None = None
    for value in values:
        if value.keys[:1] == ("providers",) and value.keys[1] != current:
            current = value.keys[1]
            where = manifest.origin("providers", current)
            shown = provider_name(manifest, current)
            lines.append(f"provider {shown}" + (f"  # {where.location}" if where else ""))
        lines.append(f"{_label(value).ljust(width)}  # {value.where}")
    return lines


def _label(value: Value) -> str:
    keys = value.keys[2:] if value.keys[:1] == ("providers",) else value.keys
    indent = "  " if value.keys[:1] == ("providers",) else ""
    return f"{indent}{'.'.join(str(k) for k in keys)}: {value.shown}"


@dataclass(frozen=True)
class Change:
    """One difference between two effective manifests."""

    keys: KeyPath
    before: Value | None  # None: only in the second
    after: Value | None  # None: only in the first

    def describe(self) -> str:
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
    return changes


def _whole(manifest: Manifest, name: str) -> Value:
    config = next(c for c in manifest.providers if c.name == name)
    shown = f"type {config.type}, priority {config.priority}"
    keys = ("providers", name)
    return Value(keys, shown, manifest.origin(*keys), _path(manifest, keys))
