"""Paths into this repository and a way to write small manifests, shared by the CLI tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["CONFIGS", "REPO", "put"]

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "configs"


def put(path: Path, text: str) -> Path:
    """Write dedented ``text`` to ``path`` (parents created) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path
