"""What a server remembers of each branch, in the process or in a store every replica shares.

A turn's writeback is idempotent because the branch's turns are counted: the memory provider
keys what it stores by the turn (``composer.plugin.turn_key``: ``principal:epoch:count``), so
a retry of one turn's writeback stores nothing twice and the same result in a later turn is
stored again. Several replicas behind a load balancer must agree on that key, so with
``composer serve --state URL`` the count lives in PostgreSQL or Redis beside what a replica
needs to serve a branch another one served last: the name and bound metadata of its last
turn (a writeback that states no branch), and its last composed text and report summary
(the MCP resource ``composer://branches/{id}/context``). Each replica still keeps its own
branches' registries (``composer.serve.branches``): they hold no more than a cache of the
manifest's shared state.

The rate limits are counted in the same store (``rate_storage``, a ``limits`` storage), so
that every process sharing it counts one limit (``composer.serve.rates``).

The epoch. A count alone would repeat after its record is gone (dropped as idle, over the
bound, or with the store): turn 1 of the new record would be taken for a retry of turn 1 of
the old one, and its result not stored. So each record draws a random epoch when it is
created and keeps it for its life; the key is the epoch and the count. Every replica reads the
same epoch (a retry on another replica is a retry), a replica's restart changes nothing (the
record is in the store), and a record made again has a new epoch (a new turn is never taken
for an old one). In the process (no ``--state``), the store is the process: its epoch is a
random run id drawn at start (``TurnCounter``), which a restart changes, as it must.

Every record belongs to a principal, and each read names one: a record of another principal
is not found. Records are bounded as the process's counts are: each expires after
``ttl_s`` without a turn, and the least recently used go over ``max_records``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from composer.serve.branches import TurnCounter

if TYPE_CHECKING:
    from limits.aio.storage import Storage

__all__ = [
    "MAX_TEXT",
    "NO_TURN",
    "BranchRecord",
    "ProcessState",
    "SharedState",
    "StateStore",
    "TurnSlot",
    "cut",
    "mask_url",
    "report_summary",
]

NO_TURN = "-:0"
"""The epoch and count of a branch the store has no record of (a writeback before any turn)."""

MAX_TEXT = 1 << 20
"""Characters of a branch's last composed text kept in a shared store (more: cut, marked)."""


@dataclass(frozen=True)
class TurnSlot:
    """One counted turn: the record's epoch and the turn's number in it."""

    epoch: str
    count: int

    @property
    def key(self) -> str:
        """``epoch:count``, the part of ``turn_key`` after the principal."""
        return f"{self.epoch}:{self.count}"


@dataclass(frozen=True)
class BranchRecord:
    """What a shared store keeps of one principal's branch."""

    principal: str
    branch_id: str
    name: str | None
    metadata: dict[str, Any]
    epoch: str
    turns: int
    guidance: str | None = None
    report: dict[str, Any] | None = None
    updated_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def current(self) -> str:
        """The ``epoch:count`` of its latest turn."""
        return f"{self.epoch}:{self.turns}"


class StateStore(Protocol):
    """Where a server counts each branch's turns and keeps its last context."""

    kind: str
    """``process``, ``postgres`` or ``redis``."""
    shared: bool
    """Whether other processes see what this one writes (any replica may serve any turn)."""

    def describe(self) -> str:
        """Where the state is, for readiness and logs: never a password."""
        ...

    async def begin(
        self, principal: str, branch_id: str, name: str | None, metadata: dict[str, Any]
    ) -> TurnSlot:
        """Count a new turn of the branch (atomically, whoever else counts), remembering its
        name and bound metadata; its slot."""
        ...

    async def current(self, principal: str, branch_id: str) -> str:
        """The ``epoch:count`` of the branch's latest turn (``NO_TURN`` before its first)."""
        ...

    async def finish(
        self,
        principal: str,
        branch_id: str,
        slot: TurnSlot,
        guidance: str | None,
        report: dict[str, Any] | None,
    ) -> None:
        """Keep the turn's composed text and report summary, unless a later turn's are kept
        already (two replicas finishing out of order)."""
        ...

    async def recall(self, principal: str, branch_id: str) -> BranchRecord | None:
        """The principal's branch, or None (none, expired, or another principal's)."""
        ...

    async def check(self) -> None:
        """Raise unless the store answers (readiness)."""
        ...

    def rate_storage(self) -> Storage:
        """Where the rate limits count (``composer.serve.rates``): a ``limits`` storage in
        this store, for the running event loop, so that every process sharing the store
        counts one limit."""
        ...

    async def sweep(self) -> None:
        """Drop expired records and those over the bound."""
        ...

    async def aclose(self) -> None: ...


class ProcessState:
    """The default: counts in this process (``TurnCounter``), nothing shared.

    The last context stays on the kept branch (``BranchEntry.last_guidance``), so ``finish``
    and ``recall`` keep and find nothing here: a branch that is not kept is not known.
    """

    kind = "process"
    shared = False

    def __init__(self, max_records: int) -> None:
        self.counter = TurnCounter(max_records)
        self._rates: dict[asyncio.AbstractEventLoop, Storage] = {}

    def describe(self) -> str:
        return "in-process"

    async def begin(
        self, principal: str, branch_id: str, name: str | None, metadata: dict[str, Any]
    ) -> TurnSlot:
        epoch, _, count = self.counter.next(f"{principal}/{branch_id}").rpartition(":")
        return TurnSlot(epoch, int(count))

    async def current(self, principal: str, branch_id: str) -> str:
        return self.counter.current(f"{principal}/{branch_id}")

    async def finish(
        self,
        principal: str,
        branch_id: str,
        slot: TurnSlot,
        guidance: str | None,
        report: dict[str, Any] | None,
    ) -> None:
        return None

    async def recall(self, principal: str, branch_id: str) -> BranchRecord | None:
        return None

    async def check(self) -> None:
        return None

    def rate_storage(self) -> Storage:
        """The library's in-memory storage (its locks and expiry task belong to a loop)."""
        loop = asyncio.get_running_loop()
        storage = self._rates.get(loop)
        if storage is None:
            from limits.aio.storage import MemoryStorage

            storage = self._rates[loop] = MemoryStorage()
        return storage

    async def sweep(self) -> None:
        return None

    async def aclose(self) -> None:
        self._rates.pop(asyncio.get_running_loop(), None)


class SharedState:
    """What the shared stores have in common: the latest turn is read from the record."""

    async def recall(self, principal: str, branch_id: str) -> BranchRecord | None:
        raise NotImplementedError

    async def current(self, principal: str, branch_id: str) -> str:
        record = await self.recall(principal, branch_id)
        return record.current if record is not None else NO_TURN


def mask_url(url: str) -> str:
    """``url`` without its password (and without a query, which may hold one)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return url.partition("://")[0] + "://***"
    if ":" in host:
        host = f"[{host}]"
    user = f"{parts.username}:***@" if parts.password is not None else ""
    if parts.password is None and parts.username:
        user = f"{parts.username}@"
    port = f":{parts.port}" if _port(parts) else ""
    return urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, "", ""))


def _port(parts: Any) -> int | None:
    try:
        port: int | None = parts.port
    except ValueError:
        return None
    return port


def report_summary(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a shared store keeps of a turn's report: who fired, was skipped or failed, and
    the tokens (the blocks' text is in the composed text already)."""
    if report is None:
        return None
    keys = ("fired", "skipped", "failed", "turn_id", "budget", "tokens_used")
    return {key: report.get(key) for key in keys}


def cut(text: str | None) -> str | None:
    """``text`` within ``MAX_TEXT`` characters, marked when cut."""
    if text is None or len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + "\n[... cut: the composed text was longer than the state keeps]"
