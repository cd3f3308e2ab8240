"""The exit codes of ``composer``, by name: scripts and CI branch on them, so they do not move."""

from __future__ import annotations

from typing import Final

__all__ = ["FAILURE", "INTERRUPTED", "SUCCESS", "TERMINATED", "TROUBLE", "USAGE"]

SUCCESS: Final = 0

FAILURE: Final = 1
"""What was checked does not hold (an invalid manifest, an expectation, ``--strict`` with a
failed provider, differences under ``diff --exit-code``), or the command could not do its work
(a file or store that cannot be read, stdout closed or full)."""

USAGE: Final = 2
"""The command line cannot run: argparse's code for a usage error, and composer's for options
that do not go together or a value it cannot use."""

TROUBLE: Final = 2
"""``diff --exit-code``: a side did not load (diff(1)'s trouble), apart from ``FAILURE`` for
differences."""

INTERRUPTED: Final = 130
"""Ctrl-C (128 + SIGINT), after the providers were closed."""

TERMINATED: Final = 143
"""SIGTERM during ``preview`` or ``test`` (128 + SIGTERM), after the providers were closed."""
