"""The effective manifest as YAML that loads again: ``composer render`` (and ``explain``).

After ``extends``, overlays and ``${VAR}``, one mapping with the manifest's own key names
(``json``, not the model's ``json_body``), every value followed by ``# file:line:col`` of the
file that set it, or ``# default``. A value written with a variable is shown as written
(``Bearer ${STATUS_TOKEN}``), so the text holds no secret and, loaded again with the same
variables, gives the same manifest; a literal ``${`` in any other value is written ``$${``.
Paths are written relative to the rendered manifest's folder, so the output can stand in its
place.

Scalars are written by PyYAML's emitter (plain where the YAML 1.2 core schema reads the same
string back, literal blocks for multi-line text, double quotes for anything with a character
a terminal must not see raw), then spliced in, so that a comment can follow each value.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from composer.manifest import KeyPath, Manifest, Origin
from composer.manifest.yamlnodes import core_value

__all__ = [
    "manifest_folder",
    "provider_name",
    "relative_path",
    "render_lines",
    "yaml_scalar",
]

# What must be written inside double quotes: controls, DEL, C1, line separators, bidi
# overrides (as ``printable`` escapes them, which only double quotes read back the same).
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_WIDTH = 1 << 30  # PyYAML folds long lines otherwise


def yaml_scalar(value: Any) -> list[str]:
    """``value`` (a string, number, bool or None) as YAML scalar lines; the first follows
    ``key: `` or ``- ``, the others are block content indented by two spaces."""
    if value is None:
        return ["null"]
    if isinstance(value, bool):
        return ["true" if value else "false"]
    if isinstance(value, int):
        return [str(int(value))]
    if isinstance(value, float):
        if math.isnan(value):
            return [".nan"]
        if math.isinf(value):
            return [".inf" if value > 0 else "-.inf"]
        return [repr(float(value))]
    text = str.__str__(value) if isinstance(value, str) else str(value)
    if _UNSAFE.search(text) or not text.strip():
        style: str | None = '"'
    elif "\n" in text:
        style = "|"
    else:
        style = None
    dumped = _dump(text, style)
    if style is None and dumped[0].startswith("'") and "'" in text:
        dumped = _dump(text, '"')  # easier to read than doubled single quotes
    elif (
        style is None
        and not dumped[0].startswith(("'", '"'))
        and not isinstance(core_value(text), str)
    ):
        dumped = _dump(text, '"')  # plain, it would read back as a number, bool or null
    return dumped


def _dump(text: str, style: str | None) -> list[str]:
    out: str = yaml.dump(
        text,
        Dumper=yaml.SafeDumper,
        default_style=style,
        allow_unicode=True,
        width=_WIDTH,
    )
    if out.endswith("\n...\n"):  # the end marker PyYAML writes after a top-level scalar
        out = out[: -len("...\n")]
    return out[:-1].split("\n") if out.endswith("\n") else out.split("\n")


def relative_path(path: Path, folder: Path | None) -> str:
    """``path`` relative to ``folder`` (the rendered manifest's), where that can be said."""
    if folder is None or not path.is_absolute():
        return str(path)
    try:
        return os.path.relpath(path, folder)
    except ValueError:  # another drive
        return str(path)


def manifest_folder(manifest: Manifest) -> Path | None:
    """The folder of the file the manifest was loaded from: what its paths are shown against."""
    return Path(manifest.path).absolute().parent if manifest.path is not None else None


def provider_name(manifest: Manifest, name: str | int) -> str:
    """The provider's name as shown: as written (``${TEAM}``) when a variable went into it.

    Providers are addressed by their substituted name, which is the variable's value: a secret.
    """
    origin = manifest.origin("providers", name, "name")
    if origin is not None and origin.is_secret and origin.raw is not None:
        return origin.raw
    return str(name)


def _key(name: str | int) -> str:
    text = str(name)
    if _PLAIN_KEY.fullmatch(text) and isinstance(core_value(text), str):
        return text
    return _dump(text, '"')[0]


class _Writer:
    """Lines of one manifest: values from ``data``, origins and as-written text from
    ``manifest``; with ``only_set``, only the values a file set (and what holds them)."""

    def __init__(self, manifest: Manifest, folder: Path | None, *, only_set: bool) -> None:
        self.manifest = manifest
        self.folder = folder
        self.lines: list[str] = []
        self.only_set = only_set
        self.set_under = {keys[:end] for keys in manifest.origins for end in range(len(keys) + 1)}
        """Every key path a file set a value at or under."""

    def shown(self, keys: KeyPath) -> bool:
        """Whether to write the value at ``keys``: always, or with ``only_set`` when a file
        set it or a value under it, or it is an item of a list a file set."""
        if not self.only_set or keys in self.set_under:
            return True
        return isinstance(keys[-1], int) and self.manifest.origin(*keys[:-1]) is not None

    def where(self, keys: KeyPath) -> str:
        origin = self.manifest.origin(*keys)
        return origin.location if origin is not None else "default"

    def leaf(self, keys: KeyPath, value: Any) -> list[str]:
        """The scalar lines of one value: as written when a variable went into it."""
        origin: Origin | None = self.manifest.origin(*keys)
        if origin is not None and origin.raw is not None and "$" in origin.raw:
            return yaml_scalar(origin.raw)  # ${NAME} (never its value), or a $${ kept
        if isinstance(value, Path):
            value = relative_path(value, self.folder)
        if isinstance(value, str):
            value = value.replace("${", "$${")
        return yaml_scalar(value)

    def entry(self, prefix: str, keys: KeyPath, value: Any, indent: int) -> None:
        """``prefix`` (``key:`` or ``-``) then ``value`` at ``indent`` spaces."""
        if not self.shown(keys):
            return
        pad = " " * indent
        where = self.where(keys)
        if isinstance(value, Mapping) and any(self.shown((*keys, key)) for key in value):
            self.lines.append(f"{pad}{prefix}  # {where}")
            for key, item in value.items():
                self.entry(f"{_key(key)}:", (*keys, key), item, indent + 2)
        elif isinstance(value, list | tuple) and value:
            self.lines.append(f"{pad}{prefix}  # {where}")
            for index, item in enumerate(value):
                self.item((*keys, index), item, indent + 2)
        elif isinstance(value, Mapping | list | tuple):
            self.lines.append(
                f"{pad}{prefix} {'{}' if isinstance(value, Mapping) else '[]'}  # {where}"
            )
        else:
            first, *rest = self.leaf(keys, value)
            self.lines.append(f"{pad}{prefix} {first}  # {where}")
            self.lines.extend(f"{pad}{line}" if line else "" for line in rest)

    def item(self, keys: KeyPath, value: Any, indent: int) -> None:
        """One list item; a mapping's first key goes on the ``-`` line."""
        if isinstance(value, Mapping) and any(self.shown((*keys, key)) for key in value):
            start = len(self.lines)
            for key, item in value.items():
                self.entry(f"{_key(key)}:", (*keys, key), item, indent + 2)
            first = self.lines[start]
            self.lines[start] = " " * indent + "- " + first[indent + 2 :]
            return
        self.entry("-", keys, value, indent)


def render_lines(manifest: Manifest, *, only_set: bool = False) -> list[str]:
    """The effective manifest as YAML lines (no header), each value with its origin; with
    ``only_set``, only what the files set (it loads to the same manifest: the rest are
    defaults)."""
    writer = _Writer(manifest, manifest_folder(manifest), only_set=only_set)
    top = manifest.model_dump(by_alias=True, exclude={"providers", "extends"})
    for key in ("version", "budget"):
        writer.entry(f"{key}:", (key,), top.pop(key), 0)
    for key, value in top.items():
        writer.entry(f"{_key(key)}:", (key,), value, 0)
    if not manifest.providers:
        writer.lines.append("providers: []")
        return writer.lines
    writer.lines.append(f"providers:  # {writer.where(('providers',))}")
    for config in manifest.providers:
        keys: KeyPath = ("providers", config.name)
        writer.lines.append(
            f"  # provider {provider_name(manifest, config.name)}  # {writer.where(keys)}"
        )
        writer.item(keys, config.model_dump(by_alias=True), 2)
    return writer.lines
