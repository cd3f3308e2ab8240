"""What the ``mcp`` provider's two transports (stdio, streamable HTTP) have in common.

A *link* is one attempt at a session: it opens the transport the SDK's ``Client`` runs on,
records a bound the server broke (``fault``: a message over ``max_response_bytes``), and says
in words what failed (``explain``). The SDK reports most failures from inside anyio task
groups, as an ``ExceptionGroup`` of one; ``leaf`` and ``describe`` turn that back into the
error that happened, so no message reads "unhandled errors in a TaskGroup".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

__all__ = ["Link", "causes", "describe", "leaf"]


class Link(Protocol):
    """One attempt at a session with a server, over one transport."""

    fault: str | None
    """A bound the server broke (a message too large): the session must not be reused."""

    on_end: Callable[[], None] | None
    """Called when the link finds the session over: the process exited, the server forgot it."""

    def transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        """The read and write streams the SDK's ``Client`` speaks over."""
        ...

    def explain(self, error: BaseException) -> str:
        """What failed, for an error the session met (a start that failed, a lost connection)."""
        ...


def leaf(error: BaseException) -> BaseException:
    """The first error inside nested exception groups (the SDK's task groups wrap one each)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def causes(error: BaseException) -> Iterator[BaseException]:
    """``error``, then what caused it (``__cause__`` or ``__context__``), each once."""
    seen: set[int] = set()
    current: BaseException | None = leaf(error)
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
        if current is not None:
            current = leaf(current)


def describe(error: BaseException) -> str:
    """``Type: first line`` of the error inside the groups; an MCP error by its message."""
    error = leaf(error)
    lines = str(error).strip().splitlines()
    if type(error).__name__ == "MCPError" and lines:
        return lines[0]
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
