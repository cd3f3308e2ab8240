"""Secure by default: a server never lets clients choose whose shared data they reach.

A memory store several teams share is split by its ``namespace`` template. Over a server every
client states its own branch (id, name, metadata) and instruction, so a namespace rendered from
any of them is chosen by the client: team b would say ``team: a`` and read and write team a's
items. Only branch metadata that authentication binds (``--principals``) may split shared
data, and every principal must bind each key the split reads. A store that is not shared keeps
working as before: its single tenant trusts its own clients.
"""

from __future__ import annotations

from collections.abc import Sequence

from composer.errors import ServeError
from composer.hooks import Partitioned
from composer.manifest import Manifest
from composer.principal import Principal
from composer.templating import template_reads

__all__ = ["check_isolation"]

_FIXED_NAMES = frozenset({"provider", "now"})
"""Context names no client states: the provider's own name, the time."""


def check_isolation(manifest: Manifest, principals: Sequence[Principal]) -> None:
    """Raise ``ServeError`` when a shared store's split reads what a client could choose."""
    problems: list[str] = []
    for config in manifest.providers:
        if not config.enabled or not isinstance(config, Partitioned):
            continue
        template = config.partition()
        if not template:
            continue
        for path in sorted(template_reads(template), key=repr):
            if path[0] in _FIXED_NAMES:
                continue
            dotted = ".".join(str(part) for part in path)
            key = path[2] if len(path) >= 3 and path[:2] == ("branch", "metadata") else None
            if key is None:
                problems.append(
                    f"provider {config.name!r}: the namespace of its shared store reads "
                    f"{dotted}, which clients state themselves; a shared store's namespace may "
                    "read only branch metadata bound by --principals (branch.metadata.KEY)"
                )
                continue
            unbound = [p.name for p in principals if key not in p.metadata]
            if unbound:
                problems.append(
                    f"provider {config.name!r}: the namespace of its shared store reads "
                    f"{dotted}, which clients state themselves; bind {key!r} for every "
                    f"principal with --principals (not bound for: {', '.join(unbound)})"
                )
    if problems:
        raise ServeError(
            "refusing to serve a shared store clients could cross:\n  " + "\n  ".join(problems)
        )
