"""Tab-completion scripts generated from the argument parser (``composer completion``).

shtab writes it from the same parser ``composer`` runs, so every command, option and choice
completes as it is today; nothing of composer runs on a TAB (the script is static shell).
Arguments that name files (a manifest, a test file, a log) complete as paths, those that name
folders as folders.
"""

from __future__ import annotations

import argparse

__all__ = ["SHELLS", "completion_script"]

SHELLS = ("bash", "zsh", "fish")
"""The shells a script is written for."""

_PATHS = frozenset({"MANIFEST", "OTHER", "FILE", "LOG", "TESTS", "QUESTIONS", "STORE"})
"""Metavars of arguments that name a file (or a manifest folder): completed as paths."""

_FOLDERS = frozenset({"DIR"})


def completion_script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script of ``parser`` (``composer``'s, every command built) for
    ``shell``; ``parser``'s path arguments are marked for it."""
    import shtab

    for action in _actions(parser):
        if action.metavar in _PATHS:
            action.complete = shtab.FILE  # type: ignore[attr-defined]
        elif action.metavar in _FOLDERS:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
    text: str = shtab.complete(parser, shell=shell)
    return text


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every action of ``parser`` and of its commands' parsers (and theirs)."""
    found: list[argparse.Action] = []
    for action in parser._actions:
        found.append(action)
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # an alias is the same parser
                found.extend(_actions(sub))
    return found
