"""Branches kept by id, for the servers and the framework integrations: a bounded LRU with an
idle TTL, and each branch's turns counted (``TurnCounter``).

Each branch has its own registry (ADR-0008 D1), built from the one loaded manifest, so heavy
provider state (an index, a connection, an MCP session) is shared through the manifest, as
``attach`` does it. Turns on one branch run one at a time (the turn path keeps per-turn state
on the branch); turns on different branches run concurrently. A branch idle for longer than
the TTL, or the least recently used one when there are too many, is dropped and its registry
closed (after each turn, and by a periodic sweep); a branch in use is never dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from composer.build import WritebackResult
from composer.registry import BranchLike
from composer.turn import Branch

__all__ = ["BranchEntry", "BranchRegistry", "BranchStore", "TurnCounter"]

logger = logging.getLogger(__name__)


class BranchRegistry(Protocol):
    """What a kept branch's registry does for its keeper: a ``ManifestRegistry``, or a
    ``WatchedRegistry`` following a reloaded manifest."""

    async def writeback_results(
        self, branch: BranchLike, action_responses: list[Any]
    ) -> list[WritebackResult]: ...

    async def aclose(self) -> None: ...


@dataclass
class BranchEntry:
    """One kept branch: the branch, its registry, and what the server remembers of it."""

    branch: Branch
    registry: BranchRegistry
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = 0.0
    users: int = 0
    last_guidance: str | None = None


class BranchStore:
    """At most ``max_branches`` branches, each dropped after ``idle_ttl_s`` without a turn."""

    def __init__(
        self,
        make: Callable[[str], BranchEntry],
        *,
        max_branches: int = 1000,
        idle_ttl_s: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_branches < 1:
            raise ValueError("max_branches must be at least 1")
        self._make = make
        self.max_branches = max_branches
        self.idle_ttl_s = idle_ttl_s
        self._clock = clock
        self._entries: OrderedDict[str, BranchEntry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, branch_id: object) -> bool:
        return branch_id in self._entries

    def peek(self, branch_id: str) -> BranchEntry | None:
        """The branch kept under ``branch_id``, without touching its place or idle time."""
        return self._entries.get(branch_id)

    @contextlib.asynccontextmanager
    async def use(self, branch_id: str) -> AsyncIterator[BranchEntry]:
        """The branch called ``branch_id`` (made on first use), held for one turn at a time."""
        entry = self._entries.get(branch_id)
        if entry is None:
            entry = self._make(branch_id)
            self._entries[branch_id] = entry
        self._entries.move_to_end(branch_id)
        entry.last_used = self._clock()
        entry.users += 1
        try:
            async with entry.lock:
                yield entry
        finally:
            entry.users -= 1
            entry.last_used = self._clock()
            await self.sweep()

    async def sweep(self) -> None:
        """Drop the idle-too-long, then the least recently used over the bound; close them."""
        now = self._clock()
        dropped: list[BranchEntry] = []
        for branch_id, entry in list(self._entries.items()):
            over = len(self._entries) > self.max_branches
            idle = now - entry.last_used > self.idle_ttl_s
            if not (over or idle):
                break  # in LRU order: everything after was used more recently
            if entry.users == 0:
                dropped.append(self._entries.pop(branch_id))
        for entry in dropped:
            await _close(entry)

    async def sweep_every(self, seconds: float) -> None:
        """Sweep until cancelled, so that idle branches go even when no turn comes."""
        while True:
            await asyncio.sleep(seconds)
            await self.sweep()

    async def aclose(self) -> None:
        """Drop every branch and close its registry (server shutdown)."""
        entries = list(self._entries.values())
        self._entries.clear()
        for entry in entries:
            await _close(entry)


class TurnCounter:
    """How many turns each kept branch has had, for its ``turn_key`` (``composer.plugin``):
    a writeback of one turn is idempotent, the same result in a later turn is stored again.

    The counts outlive their branches' eviction (a writeback after it still knows its turn),
    so they are bounded on their own, least recently counted dropped first. Each counter has a
    random run id in its keys: a restarted process never takes a new turn's result for a
    retry of one it stored before.
    """

    def __init__(self, max_counts: int) -> None:
        self.max_counts = max_counts
        self.run = secrets.token_hex(4)
        self._counts: OrderedDict[str, int] = OrderedDict()

    def current(self, key: str, prefix: str = "") -> str:
        """The turn key of the latest turn of ``key`` (0 before its first)."""
        return f"{prefix}{self.run}:{self._counts.get(key, 0)}"

    def next(self, key: str, prefix: str = "") -> str:
        """Count a new turn of ``key``; its turn key."""
        self._counts[key] = self._counts.pop(key, 0) + 1
        while len(self._counts) > self.max_counts:
            self._counts.popitem(last=False)
        return self.current(key, prefix)


async def _close(entry: BranchEntry) -> None:
    try:
        await entry.registry.aclose()
    except Exception:
        logger.warning("closing the registry of branch %r failed", entry.branch.id, exc_info=True)
