"""Branch state in the process, the default without ``--state``: nothing shared.

Turns are counted by a ``TurnCounter`` (its random run id is the epoch, which a restart
changes, as it must); the rate limits count in the ``limits`` library's memory storage.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from composer.branches import TurnCounter
from composer.serve.state.base import StateStore, TurnSlot

if TYPE_CHECKING:
    from limits.aio.storage import Storage

__all__ = ["ProcessState"]


class ProcessState(StateStore):
    """The default: counts in this process (``TurnCounter``), nothing shared.

    The last context stays on the kept branch (``BranchEntry.last_guidance``), so ``finish``
    and ``recall`` keep and find nothing here (the base's): a branch that is not kept is not
    known.
    """

    kind = "process"

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

    def rate_storage(self) -> Storage:
        """The library's in-memory storage (its locks and expiry task belong to a loop)."""
        loop = asyncio.get_running_loop()
        storage = self._rates.get(loop)
        if storage is None:
            from limits.aio.storage import MemoryStorage

            storage = self._rates[loop] = MemoryStorage()
        return storage

    async def aclose(self) -> None:
        self._rates.pop(asyncio.get_running_loop(), None)
