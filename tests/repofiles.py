"""Paths into this repository and a way to write small manifests, shared by the CLI tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["CONFIGS", "REPO", "location", "put"]

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "configs"


def put(path: Path, text: str) -> Path:
    """Write dedented ``text`` to ``path`` (parents created) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def location(path: Path, needle: str, value: str | None = None) -> str:
    """``path:line:col`` of ``value`` (default: ``needle``) on the first line holding ``needle``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    row = next(i for i, line in enumerate(lines) if needle in line)
    column = lines[row].index(value or needle, lines[row].index(needle)) + 1
    return f"{path}:{row + 1}:{column}"
