"""What every branch state store shares: the turn's slot, a branch's record, the contract.

``StateStore`` is what ``ContextService`` counts turns and keeps context in (``composer.serve.
state`` says why); ``SharedState`` what the stores every replica shares have in common; the
records are bounded (``cut``, ``report_summary``) the same way in each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from limits.aio.storage import Storage

__all__ = [
    "MAX_TEXT",
    "NO_TURN",
    "BranchRecord",
    "SharedState",
    "StateStore",
    "TurnSlot",
    "cut",
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


class StateStore:
    """Where a server counts each branch's turns and keeps its last context: the base of every
    back-end.

    What a store need not do is done here: ``finish`` keeps nothing, ``recall`` finds
    nothing, ``check`` and ``sweep`` have nothing to check or drop. That is the process's own
    store (``ProcessState``), whose last context stays on the kept branch; a store that
    replicas share (``SharedState``) does each.
    """

    kind: str
    """``process``, ``postgres`` or ``redis``."""
    shared = False
    """Whether other processes see what this one writes (any replica may serve any turn)."""

    def describe(self) -> str:
        """Where the state is, for readiness and logs: never a password."""
        raise NotImplementedError

    async def begin(
        self, principal: str, branch_id: str, name: str | None, metadata: dict[str, Any]
    ) -> TurnSlot:
        """Count a new turn of the branch (atomically, whoever else counts), remembering its
        name and bound metadata; its slot."""
        raise NotImplementedError

    async def current(self, principal: str, branch_id: str) -> str:
        """The ``epoch:count`` of the branch's latest turn (``NO_TURN`` before its first)."""
        raise NotImplementedError

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
        return None

    async def recall(self, principal: str, branch_id: str) -> BranchRecord | None:
        """The principal's branch, or None (none, expired, or another principal's)."""
        return None

    async def check(self) -> None:
        """Raise unless the store answers (readiness)."""
        return None

    def rate_storage(self) -> Storage:
        """Where the rate limits count (``composer.serve.rates``): a ``limits`` storage in
        this store, for the running event loop, so that every process sharing the store
        counts one limit."""
        raise NotImplementedError

    async def sweep(self) -> None:
        """Drop expired records and those over the bound."""
        return None

    async def aclose(self) -> None:
        """Release the store's connections (of the running event loop)."""
        return None


class SharedState(StateStore):
    """What the stores replicas share have in common: the latest turn is read from the
    record (each keeps its records: ``finish``, ``recall``, ``check``, ``sweep``)."""

    shared = True

    def __init__(self, *, max_records: int, ttl_s: float, timeout_s: float) -> None:
        self.max_records = max_records
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s

    async def current(self, principal: str, branch_id: str) -> str:
        record = await self.recall(principal, branch_id)
        return record.current if record is not None else NO_TURN


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
