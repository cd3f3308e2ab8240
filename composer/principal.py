"""Who a turn is for: the principal a server authenticated, visible to the engine.

A server (``composer serve``, the MCP server) maps each request's credential to a
``Principal`` and sets ``current_principal`` around the turn or writeback it runs. The engine
reads it where a result derived from a turn must not cross principals (a cached block's key)
and where a turn is recorded (an audit line, a span). In-process use has no principal: the
variable is None and nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["Principal", "current_principal", "principal_name"]


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: its name and the branch metadata bound to it.

    Bound metadata is merged over every branch the principal uses; a request may not state
    another value for a bound key. The credential is never part of it.
    """

    name: str
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __repr__(self) -> str:
        return f"Principal(name={self.name!r}, bound={sorted(self.metadata)!r})"


current_principal: ContextVar[Principal | None] = ContextVar("composer_principal", default=None)
"""The principal of the running turn or writeback (None outside a server)."""


def principal_name() -> str | None:
    """The running turn's principal name, if a server set one."""
    principal = current_principal.get()
    return principal.name if principal is not None else None
