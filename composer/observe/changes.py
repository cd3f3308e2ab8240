"""Moved to ``composer.reload.changes``; this address stays until ``composer.cli.watch`` imports
the new one (the lead deletes it when the CLI branch lands)."""

from composer.reload.changes import Digests, Inputs, has_watchfiles, snapshot

__all__ = ["Digests", "Inputs", "has_watchfiles", "snapshot"]
