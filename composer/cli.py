"""The ``composer`` command (filled in by the CLI issue)."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    print("composer: no commands yet", file=sys.stderr)
    return 2
