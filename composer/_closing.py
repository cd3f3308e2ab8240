"""``async with`` for the objects that hold resources until their ``aclose``.

A manifest, a registry, a service, a ``Composer`` and the integrations built on it each close
what they hold in their own ``aclose``; leaving an ``async with`` block calls it, however the
block ends (an exception, a cancellation), and the block's value is the object itself.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["AsyncCloseable"]


class AsyncCloseable:
    """A base whose ``async with`` gives the object and calls ``aclose`` on the way out."""

    __slots__ = ()

    async def aclose(self) -> None:
        """Release what the object holds (each subclass says what)."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
