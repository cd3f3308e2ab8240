"""The effective manifest, value by value with where each came from; and what two differ in.

``composer explain`` and ``composer diff`` are both views over ``effective_values``: every
leaf of the validated manifest (after ``extends``, overlays and ``${VAR}``), keyed like
``("providers", "status", "request", "url")``, with its origin. A value that came from a
variable is shown as written (``Bearer ${STATUS_TOKEN}``), never as its value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from composer.manifest import KeyPath, Manifest, Origin

__all__ = ["Change", "Value", "diff_manifests", "effective_values", "explain_lines"]


@dataclass(frozen=True)
class Value:
    """One leaf of the effective manifest."""

    keys: KeyPath
    shown: str  # JSON text of the value, or the raw text with ${VAR} when it is a secret
    origin: Origin | None  # None: the model's default

    @property
    def where(self) -> str:
        return self.origin.location if self.origin is not None else "default"


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _leaves(data: Any, keys: KeyPath) -> list[tuple[KeyPath, Any]]:
    if isinstance(data, dict) and data:
        return [leaf for key, value in data.items() for leaf in _leaves(value, (*keys, key))]
    if isinstance(data, list) and data and keys != ("providers",):
        return [leaf for index, value in enumerate(data) for leaf in _leaves(value, (*keys, index))]
    return [(keys, data)]


def effective_values(manifest: Manifest) -> list[Value]:
    """Every leaf value in manifest order, providers addressed by name, secrets as written."""
    top = manifest.model_dump(mode="json", exclude={"providers"})
    pairs = _leaves(top, ())
    for config in manifest.providers:
        data = config.model_dump(mode="json")
        pairs += _leaves(data, ("providers", config.name))
    values: list[Value] = []
    for keys, value in pairs:
        origin = _origin_of(manifest, keys)
        if origin is not None and origin.is_secret and origin.raw is not None:
            shown = _show(origin.raw)
        else:
            shown = manifest.redact(_show(value))
        values.append(Value(keys, shown, origin))
    return values


def _origin_of(manifest: Manifest, keys: KeyPath) -> Origin | None:
    """The origin of ``keys``; a list item without its own falls back to its list's."""
    while keys:
        origin = manifest.origin(*keys)
        if origin is not None or not isinstance(keys[-1], int):
            return origin
        keys = keys[:-1]
    return None


def explain_lines(manifest: Manifest) -> list[str]:
    """The effective manifest as YAML-like lines, each value followed by ``# file:line:col``."""
    values = effective_values(manifest)
    width = max((len(_label(v)) for v in values), default=0)
    lines: list[str] = []
    current: str | int | None = None
    for value in values:
        if value.keys[:1] == ("providers",) and value.keys[1] != current:
            current = value.keys[1]
            where = manifest.origin("providers", current)
            lines.append(f"provider {current!s}" + (f"  # {where.location}" if where else ""))
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
        path = ".".join(str(k) for k in self.keys)
        if self.before is None:
            assert self.after is not None
            return f"+ {path}: {self.after.shown}  # {self.after.where}"
        if self.after is None:
            return f"- {path}: {self.before.shown}  # {self.before.where}"
        return (
            f"~ {path}: {self.before.shown} -> {self.after.shown}"
            f"  # {self.before.where} -> {self.after.where}"
        )


def diff_manifests(first: Manifest, second: Manifest) -> list[Change]:
    """Leaf-by-leaf differences; a provider only on one side is one change, not one per field."""
    a = {v.keys: v for v in effective_values(first)}
    b = {v.keys: v for v in effective_values(second)}
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
    return Value(("providers", name), shown, manifest.origin("providers", name))
