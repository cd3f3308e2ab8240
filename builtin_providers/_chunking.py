"""Split a text file into passages of at most ``max_tokens`` o200k_base tokens.

Tokens are counted with ``composer.count_tokens`` (the registry's own tokenizer), not a
characters-per-token guess, so ``chunk_tokens`` means what the budget means. Passages are cut
at Markdown ATX headings (``# Title``, outside fenced code) and then at blank lines; a
paragraph that alone is too long is cut at line breaks, then at spaces, then, for one giant
word, every ``max_tokens // 4`` characters (a character is at most 4 UTF-8 bytes, so at most
4 tokens).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from composer.plugin import count_tokens

__all__ = ["ChunkBy", "Passage", "split_passages"]

ChunkBy = Literal["heading", "paragraph"]

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Passage:
    """One retrievable unit: its file (relative to the root), nearest heading, and text."""

    path: str
    heading: str | None
    text: str


def _sections(text: str) -> Iterator[tuple[str | None, list[str]]]:
    """``(heading, paragraphs)`` per Markdown section; fenced code stays one paragraph."""
    heading: str | None = None
    paragraphs: list[str] = []
    current: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        if fence is not None:
            current.append(line)
            if line.strip().startswith(fence):
                fence = None
            continue
        opening = _FENCE.match(line)
        if opening:
            fence = opening.group(1)[:3]
            current.append(line)
            continue
        match = _HEADING.match(line)
        if match:
            if current:
                paragraphs.append("\n".join(current))
                current = []
            if paragraphs or heading is not None:
                yield heading, paragraphs
            heading, paragraphs = (match.group(2) or "").strip() or None, []
            continue
        if line.strip():
            current.append(line)
        elif current:
            paragraphs.append("\n".join(current))
            current = []
    if current:
        paragraphs.append("\n".join(current))
    if paragraphs:
        yield heading, paragraphs


Piece = tuple[str, int]  # text and its exact token count


def _pack(pieces: list[Piece], separator: str, max_tokens: int) -> Iterator[Piece]:
    """Greedy runs of ``pieces`` joined by ``separator``, each estimated within ``max_tokens``.

    A run's count is the sum of its pieces plus the separators: an estimate, exact for a run
    of one piece; callers re-count runs of several.
    """
    run: list[str] = []
    run_tokens = 0
    glue = count_tokens(separator) if separator.strip() else 1
    for text, tokens in pieces:
        if run and run_tokens + glue + tokens <= max_tokens:
            run.append(text)
            run_tokens += glue + tokens
            continue
        if run:
            yield separator.join(run), run_tokens if len(run) == 1 else -1
        run, run_tokens = [text], tokens
    if run:
        yield separator.join(run), run_tokens if len(run) == 1 else -1


def _split_long(text: str, max_tokens: int, tokens: int = -1) -> Iterator[Piece]:
    """``text`` cut into pieces of at most ``max_tokens``: lines, then words, then characters.

    ``tokens`` is the count of ``text`` when already known (-1: count it).
    """
    tokens = count_tokens(text) if tokens < 0 else tokens
    if tokens <= max_tokens:
        yield text, tokens
        return
    for separator, splitter in _SPLITTERS:
        parts = [(p, count_tokens(p)) for p in splitter(text) if p.strip()]
        if len(parts) > 1:
            for packed, packed_tokens in _pack(parts, separator, max_tokens):
                yield from _split_long(packed, max_tokens, packed_tokens)
            return
    step = max(max_tokens // 4, 1)
    for start in range(0, len(text), step):
        piece = text[start : start + step]
        yield piece, count_tokens(piece)


_SPLITTERS: tuple[tuple[str, Callable[[str], list[str]]], ...] = (
    ("\n", str.splitlines),
    (" ", str.split),
)


def split_passages(path: str, text: str, chunk_by: ChunkBy, max_tokens: int) -> list[Passage]:
    """The passages of one file, in file order.

    ``heading``: passages never span a heading; paragraphs of a section are packed together
    up to ``max_tokens``. ``paragraph``: every paragraph is its own passage. Either way each
    passage records its nearest heading.
    """
    passages: list[Passage] = []
    for heading, paragraphs in _sections(text):
        pieces = [piece for p in paragraphs for piece in _split_long(p, max_tokens)]
        groups = _pack(pieces, "\n\n", max_tokens) if chunk_by == "heading" else iter(pieces)
        for group, tokens in groups:
            for piece, _ in _split_long(group, max_tokens, tokens):  # re-counts packed runs
                passages.append(Passage(path, heading, piece.strip()))
    return [p for p in passages if p.text]
