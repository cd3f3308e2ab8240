"""Manifest YAML -> located nodes: every value keeps its file, line and column.

Reading goes through PyYAML's safe scanner, parser and composer only (no constructor); the
nodes are turned into the small ``Scalar``/``Map``/``Seq`` trees here, so that

* only YAML 1.2 core scalars are typed (``true``/``false``, not ``yes``/``no``/``on``/``off``;
  no timestamps) and numbers remember their text (``1.10`` stays "1.10" in a string field);
* duplicate keys are errors naming both lines; aliases are refused (no "billion laughs");
  nesting depth and file size are capped;
* whatever PyYAML raises (bad bytes, control characters, syntax) leaves as a located
  ``ManifestError``; only a regular file is opened, so a FIFO or a device cannot hang a read;
* no tag is read but ``!!str`` and, in a manifest, the overlay tags on a key's value
  (docker compose's names): ``!override`` marks the value (``override``), ``!reset`` leaves
  the key out and names it in its mapping's ``resets``; what they do to a base is
  ``overlay.py``'s.

Where PyYAML was built with libyaml, its C parser and composer read the file (about ten times
faster than the pure-Python ones, which take most of a load otherwise), but only for text the
pure-Python reader would read the same way: a character it refuses, an alias, nesting near
``MAX_DEPTH`` or any error sends the text to the pure-Python reader, so every located error
and every tree is the same with or without libyaml (a test compares the two).

It exists apart from ``loader.py`` because none of this knows what a manifest means: overlays
(``overlay.py``) and validation (``loader.py``) work on the trees it returns. The two text
helpers every reader of these files needs live here too: ``read_regular_file`` (settings
files go through it as well) and ``printable``, which makes names read from a file safe to
print on a terminal.
"""

from __future__ import annotations

import importlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml
import yaml.composer
import yaml.parser
import yaml.reader
import yaml.resolver
import yaml.scanner
from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.nodes import Node as YAMLNode

from composer.errors import ManifestError
from composer.manifest.indentation import diagnose
from composer.manifest.source import SourceFloat, SourceInt

_libyaml: Any
try:  # PyYAML's binding of libyaml, when it was built with it
    _libyaml = importlib.import_module("yaml._yaml")
except ImportError:  # pragma: no cover - the pure-Python reader does everything then
    _libyaml = None

LIBYAML = _libyaml is not None
"""Whether manifests are read with libyaml (PyYAML was built with it)."""

# libyaml 0.2.6 refuses nesting past 1000 levels itself, so its composer cannot exhaust the C
# stack: then text without an anchor (no "&", so no alias can resolve) needs no event pass.
_NESTING_BOUNDED = LIBYAML and _libyaml.get_version() >= (0, 2, 6)

__all__ = [
    "LIBYAML",
    "MAX_BYTES",
    "MAX_DEPTH",
    "Map",
    "Mark",
    "Node",
    "Scalar",
    "Seq",
    "core_value",
    "plain",
    "printable",
    "read_regular_file",
    "read_yaml",
    "scalar_at",
]

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


# --------------------------------------------------------------------------- located trees

_OVERRIDE = "!override"
_RESET = "!reset"
_OVERLAY_TAGS = (_OVERRIDE, _RESET)


class Mark(NamedTuple):
    """Where a node starts (a tuple: one is made for every node and key of a file)."""

    display: str  # the path as the user wrote it (errors show this)
    file: Path  # absolute (relative paths in values resolve against its folder)
    line: int  # 1-based
    column: int  # 1-based

    def error(self, message: str) -> ManifestError:
        return ManifestError(self.display, self.line, self.column, message)


@dataclass(slots=True)
class Scalar:
    mark: Mark
    value: Any  # the raw text for a string (interpolated later), else the typed value
    text: str  # as written (after YAML unescaping)
    is_str: bool
    override: bool = False  # tagged !override: replaces a base value, never merges into it


@dataclass(slots=True)
class Map:
    mark: Mark
    items: dict[str, tuple[Mark, Node]] = field(default_factory=dict)  # key -> (key's mark, value)
    override: bool = False
    resets: tuple[str, ...] = ()  # keys tagged !reset: left out here, removed from a base


@dataclass(slots=True)
class Seq:
    mark: Mark
    items: list[Node] = field(default_factory=list)
    override: bool = False


Node = Scalar | Map | Seq


def scalar_at(node: Node, key: str) -> Scalar | None:
    """``node[key]`` when ``node`` is a mapping holding a scalar there, else None."""
    if isinstance(node, Map) and key in node.items:
        child = node.items[key][1]
        if isinstance(child, Scalar):
            return child
    return None


def plain(node: Node) -> Any:
    """A located tree as plain values, strings as written (for files without ``${VAR}``, or
    that interpolate on their own: a test file, a principals file)."""
    if isinstance(node, Map):
        return {key: plain(child) for key, (_, child) in node.items.items()}
    if isinstance(node, Seq):
        return [plain(item) for item in node.items]
    return node.value


# --------------------------------------------------------------------------- files and text

_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
r"""What must not reach a terminal or a log raw: C0 and C1 controls (ESC, BEL, CSI ``\x9b``),
DEL, line separators, and the bidirectional overrides that make text read differently."""


def printable(text: str, *, keep: str = "", json: bool = False) -> str:
    r"""``text`` with every unsafe character (``_UNSAFE``) but those in ``keep`` escaped.

    A provider or file name comes from a manifest or a folder someone else may write; printed
    raw, an escape sequence rewrites the operator's terminal and a newline forges a log line.
    Escapes are Python's (``\x1b``, ``\n``), or with ``json`` JSON's (``\u001b``), so that a
    JSON document stays valid and means the same.
    """

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        return f"\\u{ord(char):04x}" if json else repr(char)[1:-1]

    return _UNSAFE.sub(escape, text)


_KINDS = [
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
]


def _check_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a file")
        raise ValueError(f"not a regular file ({kind})")


def read_regular_file(file: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``file`` (one more than allowed tells it is too large).

    Opening a FIFO waits for a writer forever and a device never ends, so only a regular file
    is read: its type is checked before opening (opening some devices acts) and again on the
    descriptor, opened non-blocking, in case a FIFO took its place in between. Raises
    ``ValueError`` for that (and for a path with a NUL byte), else the ``OSError`` of opening
    or reading.
    """
    _check_regular(os.stat(file).st_mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    with open(os.open(file, flags), "rb") as handle:
        _check_regular(os.fstat(handle.fileno()).st_mode)
        return handle.read(limit + 1)


# --------------------------------------------------------------------------- reading YAML


def read_yaml(
    display: str, file: Path, *, libyaml: bool = True, overlay_tags: bool = False
) -> tuple[Node, list[ManifestError]]:
    """``file`` as a located tree, with the mistakes that did not stop reading.

    Fatal problems (not a regular file, unreadable, too large, not UTF-8, bad syntax, empty)
    raise. ``libyaml=False`` reads with the pure-Python reader only (the result is the same).
    ``overlay_tags`` accepts ``!override`` and ``!reset`` (a manifest's); other files refuse
    them as any other tag.
    """
    try:
        data = read_regular_file(file, MAX_BYTES)
    except OSError as e:
        raise ManifestError(display, 1, 1, f"cannot read manifest: {e.strerror or e}") from e
    except ValueError as e:
        raise ManifestError(display, 1, 1, f"cannot read manifest: {e}") from e
    if len(data) > MAX_BYTES:
        raise ManifestError(display, 1, 1, f"manifest is larger than {MAX_BYTES} bytes")
    text = _decode(data, display)
    fast = _compose_with_libyaml(text) if libyaml else _UNSURE
    if fast is not _UNSURE and fast is not None:
        builder = _Builder(display, file, overlay_tags)
        tree = builder.build(fast)
        if not builder.unsure:
            return tree, builder.errors
    node = _compose(text, display, file)
    if node is None:
        raise ManifestError(display, 1, 1, "empty manifest; expected a mapping with version: 1")
    builder = _Builder(display, file, overlay_tags)
    return builder.build(node), builder.errors


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

    def compose_node(self, parent: YAMLNode | None, index: Any) -> YAMLNode | None:
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
            node: YAMLNode | None = super().compose_node(parent, index)
            return node
        finally:
            self._depth -= 1


class _CComposer(_libyaml.CParser if LIBYAML else object, yaml.resolver.BaseResolver):  # type: ignore[misc]
    """libyaml's parser and composer; untagged nodes left for the YAML 1.2 core rules."""

    def __init__(self, text: str) -> None:
        _libyaml.CParser.__init__(self, text)
        yaml.resolver.BaseResolver.__init__(self)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        return _IMPLICIT


_DIFFERS = re.compile(r"[\t\ufeff]")
"""Text where libyaml and PyYAML's pure-Python reader are known to disagree (libyaml reads a
tab in a plain scalar, or a byte-order mark inside the text, where PyYAML refuses or reads
otherwise): the pure-Python reader decides. So it does for a "?" when the text has flow
collections (PyYAML refuses it inside a plain scalar there)."""

_BLOCK_HEADER_COMMENT = re.compile(r"[|>][-+0-9]*#|\?(?:\s|$)")
"""A block scalar header touching a comment (``|#``), which PyYAML refuses and libyaml does
not; an explicit key (``? key``), whose empty value the two readers place differently."""

_TAG_HANDLE = re.compile(r"!(?!<)[\w-]*[^\w\s!-]\S*!", re.ASCII)
"""A tag (not a verbatim ``!<...>``) whose later "!" makes PyYAML read a handle (``!x.y!z``),
which it then refuses for the character that is no letter, where libyaml reads one tag."""

_UNSURE: Any = object()
"""What ``_compose_with_libyaml`` returns when the pure-Python reader must read the text."""


def _compose_with_libyaml(text: str) -> Any:
    """The root node as libyaml composes it (None when empty), or ``_UNSURE`` for text the
    pure-Python reader might read or word differently: a character it refuses, an alias,
    nesting within a level of ``MAX_DEPTH`` (the builder says so when events were not read),
    or anything libyaml raises. Events are read first, without building nodes, unless
    libyaml bounds nesting itself and the text defines no anchor."""
    if not LIBYAML or _DIFFERS.search(text) or yaml.reader.Reader.NON_PRINTABLE.search(text):
        return _UNSURE
    if ("?" in text and ("{" in text or "[" in text)) or _BLOCK_HEADER_COMMENT.search(text):
        return _UNSURE
    if "!" in text and _TAG_HANDLE.search(text):
        return _UNSURE
    try:
        if not _NESTING_BOUNDED or "&" in text:
            events = _libyaml.CParser(text)
            try:
                depth = 0
                while events.check_event():
                    event = events.get_event()
                    if isinstance(event, CollectionStartEvent):
                        depth += 1
                        if depth >= MAX_DEPTH:
                            return _UNSURE
                    elif isinstance(event, CollectionEndEvent):
                        depth -= 1
                    elif isinstance(event, AliasEvent):
                        return _UNSURE
            finally:
                events.dispose()
        composer = _CComposer(text)
        try:
            return composer.get_single_node()
        finally:
            composer.dispose()
    except Exception:  # the pure-Python reader says what is wrong, in its own words
        return _UNSURE


def _mark(display: str, file: Path, mark: Any) -> Mark:
    return Mark(display, file, mark.line + 1, mark.column + 1)


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


def _syntax_message(e: yaml.MarkedYAMLError, text: str) -> tuple[int, int, str]:
    """Line, column (1-based) and message of a syntax error: an indentation mistake placed
    on the line to fix (``indentation.diagnose``), else the parser's words at its mark."""
    mark = e.problem_mark or e.context_mark
    problem = e.problem or e.context or "invalid YAML"
    if mark is not None:
        context = e.context_mark.line if e.context_mark is not None else None
        found = diagnose(text, problem, mark.line, mark.column, context)
        if found is not None:
            return found.line, found.column, found.message
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    if mark is not None and 0 <= mark.index < len(text) and text[mark.index] == "\t":
        return line, column, "tab character; YAML indents with spaces only"
    message = f"YAML syntax error: {problem}"
    if e.context and e.problem:
        message += f" ({e.context})"
    return line, column, message


def _compose(text: str, display: str, file: Path) -> YAMLNode | None:
    """The document's root node (None when empty); any YAML failure as a located error."""
    try:
        # A str input is checked for unprintable characters here, whole, and never again.
        loader = _Composer(text, display, file)
    except yaml.reader.ReaderError as e:
        before = text[: e.position]
        line = before.count("\n") + 1
        column = e.position - (before.rfind("\n") + 1) + 1
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
        raise ManifestError(display, *_syntax_message(e, text)) from e
    except (yaml.YAMLError, ValueError, AttributeError, IndexError, TypeError, RecursionError) as e:
        raise ManifestError(display, 1, 1, f"unreadable YAML ({type(e).__name__})") from e
    finally:
        loader.dispose()


class _Builder:
    """PyYAML nodes -> located trees; collects duplicate-key and tag errors instead of stopping."""

    def __init__(self, display: str, file: Path, overlay_tags: bool = False) -> None:
        self.display = display
        self.file = file
        self.overlay_tags = overlay_tags
        self.errors: list[ManifestError] = []
        self.depth = 0
        # Nested within a level of MAX_DEPTH (the tree is not built then), or an empty value
        # in a flow collection (``{a: , b: 1}``, whose place the two readers give differently).
        self.unsure = False

    def build(self, node: YAMLNode, value_of_key: bool = False) -> Node:
        self.depth += 1
        try:
            if self.depth >= MAX_DEPTH:
                self.unsure = True  # the pure-Python reader words this one
                return Scalar(self.mark(node), None, "", is_str=False)
            return self._build(node, value_of_key)
        finally:
            self.depth -= 1

    def mark(self, node: YAMLNode) -> Mark:
        start = node.start_mark
        return Mark(self.display, self.file, start.line + 1, start.column + 1)

    def _build(self, node: YAMLNode, value_of_key: bool) -> Node:
        tag = node.tag
        override = tag not in _ALLOWED_TAGS.get(type(node), ()) and self.check_tag(
            node, value_of_key
        )
        built: Node
        if isinstance(node, MappingNode):
            built = self.mapping(node)
        elif isinstance(node, SequenceNode):
            built = Seq(self.mark(node), [self.build(item) for item in node.value])
        elif isinstance(node, ScalarNode):
            typed = tag == _IMPLICIT or (self.overlay_tags and tag in _OVERLAY_TAGS)
            built = self.scalar(node, typed)
        else:
            raise TypeError(f"unexpected YAML node {type(node).__name__}")
        if override:
            built.override = True
        return built

    def check_tag(self, node: YAMLNode, value_of_key: bool) -> bool:
        """Whether ``node``'s tag is ``!override`` on a key's value; any other tag is an error,
        but ``!reset`` on a key's value (``mapping`` leaves that key out)."""
        tag = node.tag
        if not self.overlay_tags or tag not in _OVERLAY_TAGS:
            supported = "!!str, !override and !reset are" if self.overlay_tags else "!!str is"
            self.errors.append(
                self.mark(node).error(f"YAML tag {tag!r} is not supported (only {supported})")
            )
        elif not value_of_key:
            self.errors.append(
                self.mark(node).error(
                    f'the {tag} tag marks the value of a key ("key: {tag} ..."), not a list '
                    "item or the whole file"
                )
            )
        else:
            return bool(tag == _OVERRIDE)
        return False

    def mapping(self, node: MappingNode) -> Map:
        result = Map(self.mark(node))
        if node.flow_style and any(_empty(k) or _empty(v) for k, v in node.value):
            self.unsure = True
        display, file = self.display, self.file
        resets: dict[str, Mark] = {}
        for key_node, value_node in node.value:
            start = key_node.start_mark
            key_mark = Mark(display, file, start.line + 1, start.column + 1)
            if not isinstance(key_node, ScalarNode):
                self.errors.append(
                    key_mark.error("a key must be a plain name, not a list or mapping")
                )
                continue
            key = key_node.value
            if key == "<<" and not key_node.style:
                self.merge_key(result, key_mark, value_node)
                continue
            if key in result.items or key in resets:
                first = result.items[key][0] if key in result.items else resets[key]
                self.errors.append(
                    key_mark.error(f'duplicate key "{key}" (first at line {first.line})')
                )
                continue
            value = self.build(value_node, True)  # a reset's value too, for its errors
            if value_node.tag == _RESET and self.overlay_tags:
                resets[key] = key_mark
            else:
                result.items[key] = (key_mark, value)
        if resets:
            result.resets = tuple(resets)
        return result

    def merge_key(self, result: Map, key_mark: Mark, value_node: YAMLNode) -> None:
        """``<<:`` is one error; the keys it would merge count as written, so that a key
        given only there is not reported missing as well."""
        self.errors.append(
            key_mark.error(
                "merge keys (<<) are not supported in a manifest; write the keys out, or "
                "share settings with extends"
            )
        )
        if isinstance(value_node, MappingNode):
            for key, item in self.mapping(value_node).items.items():
                result.items.setdefault(key, item)

    def scalar(self, node: ScalarNode, typed: bool) -> Scalar:
        text: str = node.value
        mark = self.mark(node)
        # plain and untagged (or with an overlay tag only): typed (libyaml calls the plain
        # style "", PyYAML None)
        if not node.style and typed:
            try:
                value = core_value(text)
            except ValueError:  # int() refuses more digits than sys.get_int_max_str_digits()
                self.errors.append(mark.error("number is too long"))
                value = text
            if not isinstance(value, str):
                return Scalar(mark, value, text, is_str=False)
        return Scalar(mark, text, text, is_str=True)


_TYPED_START = frozenset("0123456789+-.~nNtTfF")
"""How every typed plain scalar starts; any other text is a string without a regex."""


def _empty(node: YAMLNode) -> bool:
    """An empty plain scalar (a key or value left out)."""
    return isinstance(node, ScalarNode) and not node.value and not node.style


def core_value(text: str) -> Any:
    """A plain scalar typed by the YAML 1.2 core schema; ``text`` itself when it is a string."""
    if text and text[0] not in _TYPED_START:
        return text
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
