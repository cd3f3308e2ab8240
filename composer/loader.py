"""YAML manifest -> validated ``Manifest``: extends and overlays, ``${VAR}``, located errors.

Reading goes through PyYAML's safe scanner, parser and composer only; Python values are built
here from the nodes, so that every value keeps its file, line and column, and so that

* only YAML 1.2 core scalars are typed (``true``/``false``, not ``yes``/``no``/``on``/``off``;
  no timestamps) and numbers remember their text (``1.10`` stays "1.10" in a string field);
* duplicate keys are errors naming both lines; aliases are refused (no "billion laughs");
  nesting depth and file size are capped;
* every failure, whatever PyYAML or a plugin raises, leaves as one ``ManifestError`` listing
  every mistake of the file as ``path:line:column: message``.

Overlays (``extends``) are merged on these located trees, ``${VAR}`` is substituted in the
merged result (so an overlay can replace a value whose variable is unset), and only then do
the pydantic models validate it: the manifest's keys by ``Manifest``, each provider entry by
its type's config model.
"""

from __future__ import annotations

import difflib
import os
import re
import types as pytypes
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
import yaml.composer
import yaml.parser
import yaml.reader
import yaml.resolver
import yaml.scanner
from pydantic import BaseModel, ValidationError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from composer.errors import ComposerError, ManifestError
from composer.manifest import (
    KeyPath,
    Manifest,
    Origin,
    SourceFloat,
    SourceInt,
    SourceStr,
    redact,
)
from composer.plugins import ProviderTypes
from composer.settings import Variables, load_settings

__all__ = ["MAX_BYTES", "MAX_DEPTH", "load_manifest"]

MAX_BYTES = 1 << 20
"""Largest manifest file read (1 MiB)."""

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists in a manifest."""

_IMPLICIT = "composer:implicit"
_STR_TAG = "tag:yaml.org,2002:str"
_ALLOWED_TAGS = {
    ScalarNode: {_IMPLICIT, _STR_TAG},
    MappingNode: {_IMPLICIT, "tag:yaml.org,2002:map"},
    SequenceNode: {_IMPLICIT, "tag:yaml.org,2002:seq"},
}

# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution); anything else is str.
_NULL = re.compile(r"null|Null|NULL|~|")
_TRUE = re.compile(r"true|True|TRUE")
_FALSE = re.compile(r"false|False|FALSE")
_INT = re.compile(r"[-+]?[0-9]+")
_OCT = re.compile(r"0o[0-7]+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_INF = re.compile(r"[-+]?\.(inf|Inf|INF)")
_NAN = re.compile(r"\.(nan|NaN|NAN)")

_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# --------------------------------------------------------------------------- located trees


@dataclass(frozen=True)
class _Mark:
    display: str  # the path as the user wrote it (errors show this)
    file: Path  # absolute (relative paths in values resolve against its folder)
    line: int  # 1-based
    column: int  # 1-based

    def error(self, message: str) -> ManifestError:
        return ManifestError(self.display, self.line, self.column, message)


@dataclass
class _Scalar:
    mark: _Mark
    value: Any  # the raw text for a string (interpolated later), else the typed value
    text: str  # as written (after YAML unescaping)
    is_str: bool


@dataclass
class _Map:
    mark: _Mark
    items: dict[str, tuple[_Mark, _Node]] = field(default_factory=dict)


@dataclass
class _Seq:
    mark: _Mark
    items: list[_Node] = field(default_factory=list)


_Node = _Scalar | _Map | _Seq


# --------------------------------------------------------------------------- reading YAML


class _Composer(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    yaml.resolver.BaseResolver,
):
    """PyYAML's safe front half (no constructor): nodes with marks, no aliases, bounded depth."""

    def __init__(self, text: str, display: str, file: Path) -> None:
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.resolver.BaseResolver.__init__(self)
        self._display = display
        self._file = file
        self._depth = 0

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        # Untagged nodes are typed later by the YAML 1.2 core rules, not PyYAML's 1.1 ones.
        return _IMPLICIT

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise _mark(self._display, self._file, mark).error(
                "aliases (*name) are not allowed in a manifest; use extends to share settings"
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise _mark(self._display, self._file, mark).error(
                    f"nesting is deeper than {MAX_DEPTH} levels"
                )
            node: Node | None = super().compose_node(parent, index)
            return node
        finally:
            self._depth -= 1


def _mark(display: str, file: Path, mark: Any) -> _Mark:
    return _Mark(display, file, mark.line + 1, mark.column + 1)


def _line_column(text: str, index: int) -> tuple[int, int]:
    before = text[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


def _decode(data: bytes, display: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        prefix = data[: e.start]
        line = prefix.count(b"\n") + 1
        column = len(prefix[prefix.rfind(b"\n") + 1 :].decode("utf-8", "replace")) + 1
        raise ManifestError(
            display,
            line,
            column,
            f"not UTF-8 text (byte 0x{data[e.start]:02x}); is this a binary file?",
        ) from e


def _syntax_message(e: yaml.MarkedYAMLError, text: str) -> tuple[Any, str]:
    mark = e.problem_mark or e.context_mark
    problem = e.problem or e.context or "invalid YAML"
    if mark is not None and 0 <= mark.index < len(text) and text[mark.index] == "\t":
        return mark, "tab character; YAML indents with spaces only"
    message = f"YAML syntax error: {problem}"
    if e.context and e.problem:
        message += f" ({e.context})"
    return mark, message


def _compose(text: str, display: str, file: Path) -> Node | None:
    """The document's root node (None when empty); any YAML failure as a located error."""
    try:
        loader = _Composer(text, display, file)
    except yaml.reader.ReaderError as e:
        line, column = _line_column(text, e.position)
        raise ManifestError(
            display,
            line,
            column,
            f"control character U+{ord(e.character) if isinstance(e.character, str) else e.character:04X}"
            " is not allowed; is this a binary file?",
        ) from e
    try:
        return loader.get_single_node()
    except ManifestError:
        raise
    except yaml.MarkedYAMLError as e:
        mark, message = _syntax_message(e, text)
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise ManifestError(display, line, column, message) from e
    except yaml.reader.ReaderError as e:
        line, column = _line_column(text, e.position)
        raise ManifestError(display, line, column, "character not allowed in YAML") from e
    except (yaml.YAMLError, ValueError, AttributeError, IndexError, TypeError, RecursionError) as e:
        raise ManifestError(display, 1, 1, f"unreadable YAML ({type(e).__name__})") from e
    finally:
        loader.dispose()


class _Builder:
    """Nodes -> located trees; collects duplicate-key and tag errors instead of stopping."""

    def __init__(self, display: str, file: Path) -> None:
        self.display = display
        self.file = file
        self.errors: list[ManifestError] = []

    def mark(self, node: Node) -> _Mark:
        return _mark(self.display, self.file, node.start_mark)

    def build(self, node: Node) -> _Node:
        if node.tag not in _ALLOWED_TAGS.get(type(node), ()):
            self.errors.append(
                self.mark(node).error(f"YAML tag {node.tag!r} is not supported (only !!str is)")
            )
        if isinstance(node, MappingNode):
            return self.mapping(node)
        if isinstance(node, SequenceNode):
            return _Seq(self.mark(node), [self.build(item) for item in node.value])
        if isinstance(node, ScalarNode):
            return self.scalar(node)
        raise TypeError(f"unexpected YAML node {type(node).__name__}")

    def mapping(self, node: MappingNode) -> _Map:
        result = _Map(self.mark(node))
        for key_node, value_node in node.value:
            key_mark = self.mark(key_node)
            if not isinstance(key_node, ScalarNode):
                self.errors.append(
                    key_mark.error("a key must be a plain name, not a list or mapping")
                )
                continue
            key = key_node.value
            if key in result.items:
                first = result.items[key][0]
                self.errors.append(
                    key_mark.error(f'duplicate key "{key}" (first at line {first.line})')
                )
                continue
            result.items[key] = (key_mark, self.build(value_node))
        return result

    def scalar(self, node: ScalarNode) -> _Scalar:
        text: str = node.value
        mark = self.mark(node)
        if node.style is not None or node.tag != _IMPLICIT:
            return _Scalar(mark, text, text, is_str=True)
        try:
            value = _core_value(text)
        except ValueError:
            self.errors.append(mark.error("number is too long"))
            return _Scalar(mark, text, text, is_str=True)
        if isinstance(value, str):
            return _Scalar(mark, text, text, is_str=True)
        return _Scalar(mark, value, text, is_str=False)


def _core_value(text: str) -> Any:
    """A plain scalar typed by the YAML 1.2 core schema; ``text`` itself when it is a string."""
    if _NULL.fullmatch(text):
        return None
    if _TRUE.fullmatch(text):
        return True
    if _FALSE.fullmatch(text):
        return False
    if _INT.fullmatch(text):
        return SourceInt(int(text, 10), text)
    if _OCT.fullmatch(text):
        return SourceInt(int(text[2:], 8), text)
    if _HEX.fullmatch(text):
        return SourceInt(int(text[2:], 16), text)
    if _FLOAT.fullmatch(text):
        return SourceFloat(float(text), text)
    if _INF.fullmatch(text):
        return SourceFloat(float("-inf" if text.startswith("-") else "inf"), text)
    if _NAN.fullmatch(text):
        return SourceFloat(float("nan"), text)
    return text


# --------------------------------------------------------------------------- loading files


@dataclass
class _Session:
    """One ``load_manifest`` call: where variables come from, what was found, what went wrong."""

    variables: Variables
    types: ProviderTypes
    errors: list[ManifestError] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)
    origins: dict[KeyPath, Origin] = field(default_factory=dict)
    lenient: bool = False  # inside a disabled provider, an unset variable is no error
    variables_of: dict[int, tuple[str, ...]] = field(default_factory=dict)  # id(scalar) -> names
    unresolved: set[int] = field(default_factory=set)  # id(scalar) with an unset variable

    # -- files

    def read(self, display: str, file: Path) -> _Map:
        """One file as a located tree; fatal problems raise, others are collected."""
        try:
            with open(file, "rb") as handle:
                data = handle.read(MAX_BYTES + 1)
        except OSError as e:
            raise ManifestError(display, 1, 1, f"cannot read manifest: {e.strerror or e}") from e
        if len(data) > MAX_BYTES:
            raise ManifestError(display, 1, 1, f"manifest is larger than {MAX_BYTES} bytes")
        text = _decode(data, display)
        node = _compose(text, display, file)
        if node is None:
            raise ManifestError(display, 1, 1, "empty manifest; expected a mapping with version: 1")
        builder = _Builder(display, file)
        tree = builder.build(node)
        self.errors.extend(builder.errors)
        if not isinstance(tree, _Map):
            kind = "a list" if isinstance(tree, _Seq) else "a single value"
            raise tree.mark.error(
                f"the top level must be a mapping (version, budget, providers), not {kind}"
            )
        self.check_names(tree)
        return tree

    def check_names(self, tree: _Map) -> None:
        """Provider names are unique within one file (overlays update by name across files)."""
        providers = tree.items.get("providers")
        if providers is None or not isinstance(providers[1], _Seq):
            return
        seen: dict[str, _Mark] = {}
        for entry in providers[1].items:
            name = _entry_scalar(entry, "name")
            if name is None or not isinstance(name.value, str):
                continue
            if name.value in seen:
                self.errors.append(
                    name.mark.error(
                        f'duplicate provider name "{name.value}" (first at line '
                        f"{seen[name.value].line})"
                    )
                )
            else:
                seen[name.value] = name.mark

    def chain(self, display: str, file: Path) -> list[_Map]:
        """The file and everything it extends, the file first; cycles and gaps are located."""
        trees: list[_Map] = []
        visited: list[tuple[Path, str]] = []
        while True:
            resolved = file.resolve()
            visited.append((resolved, display))
            tree = self.read(display, file)
            trees.append(tree)
            entry = tree.items.get("extends")
            if entry is None:
                return trees
            node = entry[1]
            if not isinstance(node, _Scalar) or not node.is_str or not node.value:
                raise node.mark.error("extends: must be the file name of a base manifest")
            target = self.interpolate(node)[0]
            step = Path(target)
            next_display = (
                target if step.is_absolute() else os.path.join(os.path.dirname(display), target)
            )
            next_file = step if step.is_absolute() else file.parent / step
            if any(seen == next_file.resolve() for seen, _ in visited):
                cycle = " -> ".join([shown for _, shown in visited] + [next_display])
                raise node.mark.error(f"extends cycle: {cycle}")
            if not next_file.is_file():
                reason = "is a directory" if next_file.is_dir() else "no such file"
                raise node.mark.error(f'extends: cannot read "{target}": {reason}')
            display, file = next_display, next_file

    # -- variables

    def interpolate(self, node: _Scalar, *, record: bool = True) -> tuple[str, tuple[str, ...]]:
        """``${VAR}``, ``${VAR:-default}`` and ``$${`` in a string; values found are secrets.

        ``record=False`` only peeks (a provider's name, to address its origins): problems and
        secrets are recorded once, when the value itself is built.
        """
        raw: str = node.value
        out: list[str] = []
        used: list[str] = []
        problems: list[ManifestError] = []
        found: list[str] = []
        i = 0
        while (j := raw.find("$", i)) >= 0:
            out.append(raw[i:j])
            if raw.startswith("$${", j):
                out.append("${")
                i = j + 3
                continue
            if not raw.startswith("${", j):
                out.append("$")
                i = j + 1
                continue
            end = raw.find("}", j + 2)
            if end < 0:
                problems.append(node.mark.error('unclosed "${" (write "$${" for a literal "${")'))
                out.append(raw[j:])
                i = len(raw)
                break
            name, has_default, default = raw[j + 2 : end].partition(":-")
            i = end + 1
            if not _VARIABLE.fullmatch(name):
                problems.append(
                    node.mark.error(
                        f'bad variable reference "${{{name}}}"; a name is letters, digits and _'
                    )
                )
                continue
            try:
                value = self.variables.get(name)
            except OSError as e:
                problems.append(node.mark.error(f'cannot read secret "{name}": {e.strerror}'))
                continue
            if value is None or (has_default and value == ""):
                if has_default:
                    out.append(default)
                    continue
                out.append(raw[j:i])  # kept as written, so no follow-on error about the value
                if not self.lenient:
                    problems.append(
                        node.mark.error(
                            f'environment variable "{name}" is not set (use ${{{name}:-default}} '
                            "for a default)"
                        )
                    )
                continue
            out.append(value)
            used.append(name)
            found.append(value)
        out.append(raw[i:])
        if record:
            if problems:
                self.unresolved.add(id(node))
            self.errors.extend(problems)
            self.secrets.update(value for value in found if value)
        return "".join(out), tuple(used)

    # -- from trees to Python values

    def value(self, node: _Node, keys: KeyPath) -> Any:
        """Plain Python values for validation; strings as SourceStr; origins recorded."""
        mark = node.mark
        if isinstance(node, _Scalar):
            if node.is_str:
                text, used = self.interpolate(node)
                self.origins[keys] = Origin(mark.display, mark.line, mark.column, node.text, used)
                if used:
                    self.variables_of[id(node)] = used
                return SourceStr(text, mark.file, mark.line, mark.column)
            self.origins[keys] = Origin(mark.display, mark.line, mark.column, node.text)
            return node.value
        self.origins[keys] = Origin(mark.display, mark.line, mark.column)
        if isinstance(node, _Seq):
            return [self.value(item, (*keys, i)) for i, item in enumerate(node.items)]
        return {key: self.value(child, (*keys, key)) for key, (_, child) in node.items.items()}

    def entries(self, node: _Seq) -> list[tuple[_Node, Any, str]]:
        """Each provider entry with its value and a label for messages (addressed by name)."""
        result = []
        self.origins[("providers",)] = Origin(node.mark.display, node.mark.line, node.mark.column)
        names: dict[str, _Scalar] = {}
        for i, entry in enumerate(node.items):
            name = _entry_scalar(entry, "name")
            key: str | int = i
            label = f"provider #{i + 1}"
            if name is not None and name.is_str and name.value:
                key, used = self.interpolate(name, record=False)
                label = f'provider "{name.value if used else key}"'  # a secret name shows raw
                first = names.setdefault(key, name)
                if first is not name and first.value != name.value:  # equal raw: reported per file
                    self.errors.append(
                        name.mark.error(
                            f"{label}: the same name as the provider at line {first.mark.line} "
                            "once variables are substituted"
                        )
                    )
            enabled = _entry_scalar(entry, "enabled")
            self.lenient = enabled is not None and enabled.value is False
            try:
                result.append((entry, self.value(entry, ("providers", key)), label))
            finally:
                self.lenient = False
        return result

    # -- validation

    def validate(self, tree: _Map) -> Manifest | None:
        """The manifest's keys by ``Manifest``, each provider by its type's config model."""
        data: dict[str, Any] = {}
        configs: list[Any] = []
        for key, (_, child) in tree.items.items():
            if key == "providers" and isinstance(child, _Seq):
                for entry, value, label in self.entries(child):
                    config = self.provider(entry, value, label)
                    if config is not None:
                        configs.append(config)
                data[key] = configs
            else:
                data[key] = self.value(child, (key,))
        try:
            manifest = Manifest.model_validate(data)
        except ValidationError as e:
            self.errors.extend(_translate(e, tree, Manifest, "", self))
            return None
        return manifest

    def provider(self, entry: _Node, value: Any, label: str) -> Any:
        if not isinstance(entry, _Map) or not isinstance(value, dict):
            self.errors.append(entry.mark.error(f"{label}: must be a mapping with name and type"))
            return None
        known = ", ".join(self.types.names)
        type_entry = entry.items.get("type")
        if type_entry is None:
            self.errors.append(
                entry.mark.error(f'{label}: missing key "type"; known types: {known}')
            )
            return None
        type_node = type_entry[1]
        type_name = value["type"]
        if not isinstance(type_name, str):
            self.errors.append(type_node.mark.error(f"{label}: type: must be a string"))
            return None
        if type_name not in self.types:
            hint = _did_you_mean(type_name, self.types.names)
            self.errors.append(
                type_node.mark.error(
                    f'{label}: unknown provider type "{type_name}"{hint}; known types: {known}'
                )
            )
            return None
        model = self.types.get(type_name).config
        try:
            return model.model_validate(value)
        except ValidationError as e:
            self.errors.extend(_translate(e, entry, model, label, self))
        except Exception as e:  # a plugin's validator raising something pydantic does not wrap
            self.errors.append(
                entry.mark.error(f"{label}: rejected by type {type_name!r} ({type(e).__name__})")
            )
        return None

    def redacted(self, error: ManifestError) -> ManifestError:
        """``error`` as shown: secrets masked, on one line whatever names it quotes."""
        message = _CONTROL.sub(_escape, redact(error.message, self.secrets))
        return ManifestError(error.path, error.line, error.column, message)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _escape(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]


def _entry_scalar(entry: _Node, key: str) -> _Scalar | None:
    if isinstance(entry, _Map) and key in entry.items:
        node = entry.items[key][1]
        if isinstance(node, _Scalar):
            return node
    return None


# --------------------------------------------------------------------------- overlays


def _merge(base: _Node, over: _Node) -> _Node:
    """Mappings merge deeply (the overlay wins); lists and scalars are replaced whole."""
    if isinstance(base, _Map) and isinstance(over, _Map):
        return _merge_maps(base, over)
    return over


def _merge_maps(base: _Map, over: _Map, *, top: bool = False) -> _Map:
    """``_merge`` for mappings; at the top level ``providers`` merge by name."""
    items = dict(base.items)
    for key, (key_mark, child) in over.items.items():
        if key not in items:
            items[key] = (key_mark, child)
        elif top and key == "providers" and isinstance(child, _Seq):
            old = items[key][1]
            items[key] = (
                key_mark,
                _merge_providers(old, child) if isinstance(old, _Seq) else child,
            )
        else:
            items[key] = (key_mark, _merge(items[key][1], child))
    return _Map(base.mark, items)


def _merge_providers(base: _Seq, over: _Seq) -> _Seq:
    """By ``name``: an overlay entry updates the base entry (deeply), a new name is appended.

    An entry that names a different ``type`` replaces the base entry whole, in its place.
    """
    items = list(base.items)
    index: dict[str, int] = {}
    for i, entry in enumerate(items):
        name = _entry_scalar(entry, "name")
        if name is not None and isinstance(name.value, str):
            index.setdefault(name.value, i)
    for entry in over.items:
        name = _entry_scalar(entry, "name")
        key = name.value if name is not None and isinstance(name.value, str) else None
        if key is None or key not in index:
            if key is not None:
                index[key] = len(items)
            items.append(entry)
            continue
        old = items[index[key]]
        new_type, old_type = _entry_scalar(entry, "type"), _entry_scalar(old, "type")
        if new_type is not None and (old_type is None or new_type.value != old_type.value):
            items[index[key]] = entry
        else:
            items[index[key]] = _merge(old, entry)
    return _Seq(base.mark, items)


# --------------------------------------------------------------------------- pydantic errors


def _translate(
    error: ValidationError,
    tree: _Node,
    model: type[BaseModel],
    label: str,
    session: _Session,
) -> list[ManifestError]:
    """One located, human-worded ManifestError per pydantic error (input never echoed).

    A validator's own words about a value that came from variables are not shown at all
    (they may quote part of the secret); the message names the variables instead. A value
    with an unset variable was already reported, so what pydantic says about it is dropped.
    """
    results: list[ManifestError] = []
    seen: set[tuple[int, int, str]] = set()
    for item in error.errors(include_url=False, include_input=False):
        loc = item["loc"]
        kind = item["type"]
        mark, path, node = _locate(tree, loc, key_of_last=kind == "extra_forbidden")
        where = _dotted(path)
        if id(node) in session.unresolved:
            continue
        used = session.variables_of.get(id(node), ())
        if kind == "extra_forbidden":
            key = str(loc[-1]) if loc else "?"
            message = f'unknown key "{key}"' + (f" in {where}" if where else "")
            message += _allowed_keys(model, path, key)
        elif kind == "missing":
            key = str(loc[-1]) if loc else "?"
            message = f'missing key "{key}"' + (f" in {where}" if where else "")
        elif used and not _is_generic(kind):
            names = ", ".join(f"${{{name}}}" for name in used)
            message = (f"{where}: " if where else "") + f"invalid value (from {names}; not shown)"
        else:
            message = (f"{where}: " if where else "") + _describe(item)
        if label:
            message = f"{label}: {message}"
        if (mark.line, mark.column, message) in seen:
            continue
        seen.add((mark.line, mark.column, message))
        results.append(mark.error(message))
    return results


def _locate(
    tree: _Node, loc: tuple[Any, ...], *, key_of_last: bool
) -> tuple[_Mark, KeyPath, _Node | None]:
    """The node a pydantic ``loc`` points at; union tags and missing keys are stepped over."""
    node = tree
    path: list[str | int] = []
    for i, part in enumerate(loc):
        if isinstance(node, _Map) and isinstance(part, str) and part in node.items:
            key_mark, child = node.items[part]
            if key_of_last and i == len(loc) - 1:
                return key_mark, tuple(path), None
            node = child
            path.append(part)
        elif isinstance(node, _Seq) and isinstance(part, int) and 0 <= part < len(node.items):
            node = node.items[part]
            path.append(part)
    return node.mark, tuple(path), node


def _dotted(path: KeyPath) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


_WORDS = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "set_type": "must be a list",
    "none_required": "must be empty (null)",
    "path_type": "must be a path",
}


_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
}


def _is_generic(kind: str) -> bool:
    """Whether the message for ``kind`` is fixed wording that cannot quote the input."""
    return kind in _WORDS or kind in _BOUNDS or kind in ("literal_error", "string_too_short")


def _describe(item: Mapping[str, Any]) -> str:
    kind = item["type"]
    ctx: Mapping[str, Any] = item.get("ctx") or {}
    if kind in _WORDS:
        return _WORDS[kind]
    if kind in _BOUNDS:
        sign, name = _BOUNDS[kind]
        return f"must be {sign} {ctx.get(name)}"
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}"
    if kind == "string_too_short":
        return "must not be empty" if ctx.get("min_length") == 1 else str(item["msg"])
    if kind in ("value_error", "assertion_error"):
        cause = ctx.get("error")
        message = str(cause) if cause is not None else str(item["msg"])
        origin = getattr(cause, "__cause__", None)
        lineno = getattr(origin, "lineno", None)
        if isinstance(lineno, int) and lineno > 1:
            message += f" (template line {lineno})"
        return message
    msg = str(item["msg"])
    return msg[:1].lower() + msg[1:]


def _allowed_keys(model: type[BaseModel], path: KeyPath, key: str) -> str:
    target = _model_at(model, path)
    if target is None:
        return ""
    names = [info.alias or name for name, info in target.model_fields.items()]
    hint = _did_you_mean(key, names)
    return hint or f"; allowed keys: {', '.join(names)}"


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _model_at(model: Any, path: KeyPath) -> type[BaseModel] | None:
    current: Any = model
    for part in path:
        current = _step(current, part)
        if current is None:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(tp: Any) -> Any:
    origin = get_origin(tp)
    if origin is Annotated:
        return _unwrap(get_args(tp)[0])
    if origin in (Union, pytypes.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        return _unwrap(members[0]) if len(members) == 1 else tp
    return tp


def _step(tp: Any, part: str | int) -> Any:
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        info = tp.model_fields.get(part) if isinstance(part, str) else None
        return info.annotation if info is not None else None
    origin, args = get_origin(tp), get_args(tp)
    if origin is list and args and isinstance(part, int):
        return args[0]
    if origin is dict and len(args) == 2 and isinstance(part, str):
        return args[1]
    return None


# --------------------------------------------------------------------------- entry point


def _select(path: str | os.PathLike[str], env: str | None) -> tuple[str, Path]:
    """The file to load: ``path`` itself, or ``<path>/<env>.yaml`` when ``path`` is a folder."""
    display = os.fspath(path)
    file = Path(path).absolute()  # values resolve relative paths against its folder
    if not file.is_dir():
        return display, file
    found = sorted(p.stem for p in file.glob("*.yaml"))
    listing = ", ".join(found) if found else "none"
    if not env:
        raise ManifestError(
            display,
            1,
            1,
            f"is a folder; choose an environment with --env or COMPOSER_ENV (found: {listing})",
        )
    if not _VARIABLE.fullmatch(env.replace("-", "_")) or not (file / f"{env}.yaml").is_file():
        raise ManifestError(
            display,
            1,
            1,
            f'no manifest for environment "{_CONTROL.sub(_escape, env)}" here (found: {listing})',
        )
    return os.path.join(display, f"{env}.yaml"), file / f"{env}.yaml"


def load_manifest(
    path: str | os.PathLike[str] | None = None,
    *,
    env: str | None = None,
    environ: Mapping[str, str] | None = None,
    types: ProviderTypes | None = None,
) -> Manifest:
    """Read, merge, interpolate and validate a manifest; every failure is one ManifestError.

    ``path`` is a file, or a folder of per-environment files from which ``env`` (else
    ``COMPOSER_ENV``) picks ``<env>.yaml``; a folder without an environment is an error listing
    the files, since silently loading a default in production is worse than stopping. With no
    ``path``, ``COMPOSER_MANIFEST`` is used. ``environ`` replaces ``os.environ`` for settings
    and ``${VAR}`` (a ``.env`` file and a secrets directory are consulted after it). ``types``
    defaults to every provider type installed.
    """
    try:
        settings = load_settings(environ)
    except (ValidationError, ValueError, OSError) as e:
        raise ManifestError(
            "COMPOSER_MANIFEST", 1, 1, f"bad composer settings ({type(e).__name__})"
        ) from e
    if path is None:
        if settings.manifest is None:
            raise ManifestError(
                "COMPOSER_MANIFEST", 1, 1, "no manifest given: pass a path or set COMPOSER_MANIFEST"
            )
        path = settings.manifest
    display = os.fspath(path)
    if types is None:
        try:
            types = ProviderTypes.installed()
        except ComposerError as e:  # a broken plugin; its message names the entry point
            raise ManifestError(display, 1, 1, f"cannot load provider types: {e}") from e
    try:
        session = _Session(settings.variables(environ), types)
        display, file = _select(path, env or settings.env)
        manifest = _load(session, display, file)
    except ManifestError:
        raise
    except Exception as e:  # the loader's promise: nothing but ManifestError leaves it
        raise ManifestError(display, 1, 1, f"cannot load manifest ({type(e).__name__})") from e
    return manifest


def _load(session: _Session, display: str, file: Path) -> Manifest:
    try:
        trees = session.chain(display, file)
    except ManifestError as e:
        raise ManifestError.collect(session.redacted(x) for x in [*session.errors, e]) from e
    merged = trees[-1]
    for overlay in reversed(trees[:-1]):
        merged = _merge_maps(merged, overlay, top=True)
    manifest = session.validate(merged)
    if session.errors or manifest is None:
        raise ManifestError.collect(session.redacted(e) for e in session.errors)
    manifest._path = Path(display)
    manifest._secrets = frozenset(session.secrets)
    manifest._origins = dict(session.origins)
    return manifest
