"""Split a text file into passages of at most ``max_tokens`` o200k_base tokens.

Tokens are counted with ``composer.count_tokens`` (the registry's own tokenizer), not a
characters-per-token guess, so ``chunk_tokens`` means what the budget means. Passages are cut
at Markdown headings as a CommonMark parser (markdown-it-py) sees them: ATX (``# Title``) and
setext (``Title`` over ``=====``), never inside fenced or indented code (text with nothing but
paragraphs and ATX headings is read line by line, as the parser reads it); then at blank lines
outside code. A paragraph that alone is too long is cut at line breaks, then at spaces, then,
for one giant word, every ``max_tokens // 4`` characters (a character is at most 4 UTF-8
bytes, so at most 4 tokens). A text is tokenized only where its UTF-8 length (at least its
token count) does not settle whether it fits.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from markdown_it import MarkdownIt

from composer.plugin import count_tokens

__all__ = ["ChunkBy", "Passage", "Piece", "split_passages"]

ChunkBy = Literal["heading", "paragraph"]

_VERBATIM = frozenset({"fence", "code_block"})


@functools.cache
def _markdown() -> MarkdownIt:
    """A CommonMark block parser: the inline pass is off, headings and code need no more."""
    parser = MarkdownIt("commonmark")
    parser.core.ruler.disable(["inline", "text_join"])
    return parser


@dataclass(frozen=True, slots=True)
class Passage:
    """One retrievable unit: its file (relative to the root), its heading path, and text.

    ``heading`` is where the passage stands: the file's title (its first H1, else its name),
    then the headings that enclose the passage (``Disk almost full > First steps``); None in
    a file without headings. ``title`` is the file's title. The heading (else the title) is
    indexed with the text, so a query made of a runbook's title finds that runbook.
    """

    path: str
    heading: str | None
    text: str
    title: str = ""

    @property
    def indexed(self) -> str:
        """What the index reads of the passage: where it stands, then its text."""
        return f"{self.heading or self.title}\n{self.text}"


_Headings = dict[int, tuple[int, str, int]]


def _blocks(text: str) -> tuple[list[str], _Headings, dict[int, int]]:
    """The lines of ``text``, its headings and its code blocks, as CommonMark parses them.

    Headings (ATX ``# Title`` and setext ``Title`` over ``===`` or ``---``) map their first
    line to ``(line after the heading, title, level)``; fenced and indented code map their
    first line to the line after them. Lines are counted as the parser counts them (after its own
    newline normalisation), so the maps index the returned lines.
    """
    source = text.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\ufffd")
    lines = source.split("\n")
    if _NOT_PLAIN.search(source) is None:
        return lines, _plain_headings(lines), {}
    return lines, *_parsed_blocks(source)


def _parsed_blocks(source: str) -> tuple[_Headings, dict[int, int]]:
    """Headings and code blocks as markdown-it-py finds them."""
    tokens = _markdown().parse(source)
    headings: _Headings = {}
    verbatim: dict[int, int] = {}
    for i, token in enumerate(tokens):
        if token.map is None:
            continue
        start, end = token.map
        if token.type == "heading_open":
            title = " ".join(tokens[i + 1].content.split())
            headings[start] = (end, title, int(token.tag[1:]))
        elif token.type in _VERBATIM:
            verbatim.setdefault(start, end)
    return headings, verbatim


# A line that could open a block other than a paragraph or an ATX heading: a quote, a list
# item, a rule, a setext underline, a fence, HTML, a link reference definition, or indented
# code (4 spaces, or a tab, before its text).
_NOT_PLAIN = re.compile(r"^ {0,3}(?:[\t>\-+*_=`~<\[]|\d{1,9}[.)])|^ {4}", re.MULTILINE)
_ATX = re.compile(r" {0,3}(#{1,6})((?:[ \t].*)?)")


def _plain_headings(lines: list[str]) -> _Headings:
    """The ATX headings of text that has only paragraphs and ATX headings (no line matches
    ``_NOT_PLAIN``), found as markdown-it-py's heading rule finds them, without parsing the
    text: parsing was a third of a corpus build. A test holds the two equal."""
    headings: _Headings = {}
    for n, line in enumerate(lines):
        if "#" not in line[:4]:
            continue
        match = _ATX.fullmatch(line)
        if match is None:
            continue
        marks, rest = match.groups()
        rest = rest.rstrip(" \t")
        closed = rest.rstrip("#")
        if closed and closed[-1] in " \t":  # a closing run of # after a space is no text
            rest = closed
        headings[n] = (n + 1, " ".join(rest.split()), len(marks))
    return headings


def _title(path: str, headings: _Headings) -> str:
    """A file's title: its first level-1 heading, else its name without the extension."""
    for _, title, level in sorted(headings.values()):
        if level == 1 and title:
            return title
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0] if "." in name[1:] else name


def _sections(path: str, text: str) -> Iterator[tuple[str, str | None, list[str]]]:
    """``(title, heading path, paragraphs)`` per Markdown section; code blocks stay one
    paragraph. The path starts with the file's title unless an enclosing level-1 heading
    gives one; a file without headings has none.
    """
    lines, headings, verbatim = _blocks(text)
    title = _title(path, headings)
    stack: list[tuple[int, str]] = []  # the enclosing headings: (level, title)

    def where() -> str | None:
        if not headings:
            return None
        names = [name for _, name in stack if name]
        if not stack or stack[0][0] != 1:
            names.insert(0, title)
        return " > ".join(names)

    heading = where()
    started = False
    paragraphs: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(lines):
        if i in headings:
            if current:
                paragraphs.append("\n".join(current))
                current = []
            if paragraphs or started:
                yield title, heading, paragraphs
            i, name, level = headings[i]
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, name))
            heading, paragraphs, started = where(), [], True
            continue
        if i in verbatim:  # blank lines inside code do not end the paragraph
            current.extend(lines[i : verbatim[i]])
            i = verbatim[i]
            continue
        line = lines[i]
        if line.strip():
            current.append(line)
        elif current:
            paragraphs.append("\n".join(current))
            current = []
        i += 1
    if current:
        paragraphs.append("\n".join(current))
    if paragraphs:
        yield title, heading, paragraphs


Piece = tuple[str, int]  # text and its exact token count, or -1 when not counted


def _bound(text: str) -> int:
    """At least the o200k count of ``text``, without tokenizing: its UTF-8 length (a token is
    at least one byte). Most paragraphs and sections it decides alone, and counting was a
    fifth of a corpus build."""
    return len(text) if text.isascii() else len(text.encode())


def _pack(pieces: list[Piece], separator: str, max_tokens: int) -> Iterator[Piece]:
    """Greedy runs of ``pieces`` joined by ``separator``, each estimated within ``max_tokens``.

    A run's estimate is the sum of its pieces' counts plus the separators: exact for a run of
    one piece; callers re-count runs of several. Pieces not counted yet stand for their
    ``_bound``; they are counted only when the bounds alone would not admit the next piece,
    so every run is what exact counts make it.
    """
    run: list[Piece] = []
    run_tokens = 0  # the run's estimate, or more while some of its pieces are not counted
    glue = count_tokens(separator) if separator.strip() else 1
    for text, tokens in pieces:
        if run:
            size = tokens if tokens >= 0 else _bound(text)
            if run_tokens + glue + size > max_tokens and (tokens < 0 or any(n < 0 for _, n in run)):
                run = [(t, n if n >= 0 else count_tokens(t)) for t, n in run]
                run_tokens = sum(n for _, n in run) + glue * (len(run) - 1)
                tokens = size = tokens if tokens >= 0 else count_tokens(text)
            if run_tokens + glue + size <= max_tokens:
                run.append((text, tokens))
                run_tokens += glue + size
                continue
            yield _joined(run, separator)
        run, run_tokens = [(text, tokens)], tokens if tokens >= 0 else _bound(text)
    if run:
        yield _joined(run, separator)


def _joined(run: list[Piece], separator: str) -> Piece:
    if len(run) == 1:
        return run[0]
    return separator.join(text for text, _ in run), -1


def _split_long(text: str, max_tokens: int, tokens: int = -1) -> Iterator[Piece]:
    """``text`` cut into pieces of at most ``max_tokens``: lines, then words, then characters.

    ``tokens`` is the count of ``text`` when already known (-1: not counted; then it is counted
    only when its ``_bound`` exceeds ``max_tokens``). Pieces come with their count or -1.
    """
    if tokens < 0:
        if _bound(text) <= max_tokens:
            yield text, -1
            return
        tokens = count_tokens(text)
    if tokens <= max_tokens:
        yield text, tokens
        return
    for separator, splitter in _SPLITTERS:
        parts = [(p, -1) for p in splitter(text) if p.strip()]
        if len(parts) > 1:
            for packed, packed_tokens in _pack(parts, separator, max_tokens):
                yield from _split_long(packed, max_tokens, packed_tokens)
            return
    step = max(max_tokens // 4, 1)
    for start in range(0, len(text), step):
        yield text[start : start + step], -1


_SPLITTERS: tuple[tuple[str, Callable[[str], list[str]]], ...] = (
    ("\n", str.splitlines),
    (" ", str.split),
)


def split_passages(path: str, text: str, chunk_by: ChunkBy, max_tokens: int) -> list[Passage]:
    """The passages of one file, in file order.

    ``heading``: passages never span a heading; paragraphs of a section are packed together
    up to ``max_tokens``. ``paragraph``: every paragraph is its own passage. Either way each
    passage records its heading path (``Passage.heading``).
    """
    passages: list[Passage] = []
    for title, heading, paragraphs in _sections(path, text):
        pieces = [piece for p in paragraphs for piece in _split_long(p, max_tokens)]
        groups = _pack(pieces, "\n\n", max_tokens) if chunk_by == "heading" else iter(pieces)
        for group, tokens in groups:
            for piece, _ in _split_long(group, max_tokens, tokens):  # re-counts packed runs
                passages.append(Passage(path, heading, piece.strip(), title))
    return [p for p in passages if p.text]
