"""The documentation's pages and their fenced code blocks, for the tests that run them.

The pages are ``README.md`` and every Markdown file under ``docs/``; a block is a fence that
starts a line (```` ```python ````, ```` ```yaml ````, ...) and the line that closes it.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DOCS",
    "README",
    "REPO",
    "Block",
    "blocks",
    "copy_configs",
    "matches_shown",
    "pages",
]

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
README = REPO / "README.md"

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", flags=re.M | re.S)


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is (page and line of its fence) and what it holds."""

    page: Path
    line: int
    language: str
    text: str

    @property
    def where(self) -> str:
        """``docs/guides/ci.md:42``: how a failure names the block."""
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    """README.md, then every page of the site, in a stable order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def blocks(page: Path, language: str | None = None) -> list[Block]:
    """The fenced blocks of ``page`` (of one ``language`` if given), in page order."""
    text = page.read_text(encoding="utf-8")
    found = [
        Block(page, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2))
        for m in _FENCE.finditer(text)
    ]
    return [b for b in found if language is None or b.language == language]


def copy_configs(folder: Path) -> Path:
    """A copy of the bundled ``configs/`` inside ``folder`` (no SQLite file made by a run)."""
    target = folder / "configs"
    shutil.copytree(REPO / "configs", target, ignore=shutil.ignore_patterns("*.sqlite*"))
    return target


def _shown_lines(shown: str) -> list[str]:
    return [" ".join(line.split()) for line in shown.splitlines()]


def matches_shown(shown: str, actual: str) -> bool:
    """Whether ``actual`` output is what a page shows: line by line, spaces collapsed, where a
    line ``...`` stands for any number of lines and a line ending in `` ...`` for the rest of
    its line. A table row's last cell (milliseconds) is not compared when the page's row has
    one: it differs on every run."""
    want = _shown_lines(shown)
    have = _shown_lines(actual)

    def same(pattern: str, line: str) -> bool:
        if pattern.endswith(" ..."):
            return line.startswith(pattern[:-4])
        if re.fullmatch(r".+ \d+\.\d", pattern):  # a preview row: drop the ms column
            return pattern.rsplit(" ", 1)[0] == line.rsplit(" ", 1)[0]
        return pattern == line

    def match(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(have)
        if want[i] == "...":
            return any(match(i + 1, k) for k in range(j, len(have) + 1))
        return j < len(have) and same(want[i], have[j]) and match(i + 1, j + 1)

    return match(0, 0)
