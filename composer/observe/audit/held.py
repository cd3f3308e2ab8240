"""Audit lines held until a server knows whether its client got the turn's answer.

In a process, a turn is answered when ``prepare_turn`` returns, and its line is queued then.
A server has more to do after the providers ran: ``composer serve`` keeps the turn's composed
text in its state store, and a store that fails there answers the client ``503``, which
retries. Its line must then say that this turn was not answered (``AuditLine.answered``), or
the retry would read as a second served turn. So the server runs the turn inside
``holding_audit()``: the observer hands its lines here instead of to the audit queue, and
they are queued when the block ends, marked ``answered`` only if the server said so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from composer.observe.audit.base import AuditQueue
    from composer.observe.record import Snapshot

__all__ = ["HeldLines", "hold", "holding_audit"]


class HeldLines:
    """The lines of the turns run inside one ``holding_audit`` block."""

    def __init__(self) -> None:
        self.answered = False
        """Set by the server once the client's answer is ready; unset, the lines say not."""
        self.lines: list[tuple[AuditQueue, Snapshot]] = []

    def release(self) -> None:
        """Queue every held line, marked unanswered unless ``answered``."""
        lines, self.lines = self.lines, []
        for sink, line in lines:
            sink.put(line if self.answered else line._replace(answered=False))


_HELD: ContextVar[HeldLines | None] = ContextVar("composer_held_audit", default=None)


@contextlib.contextmanager
def holding_audit() -> Iterator[HeldLines]:
    """Hold the audit lines of the turns run in this block; queue them when it ends,
    whichever way it ends (an exception, a cancellation: then unanswered)."""
    held = HeldLines()
    token = _HELD.set(held)
    try:
        yield held
    finally:
        _HELD.reset(token)
        held.release()


def hold(sink: AuditQueue, line: Snapshot) -> bool:
    """Keep ``line`` for ``sink`` when a ``holding_audit`` block is running; False when none
    is (the caller queues the line itself)."""
    held = _HELD.get()
    if held is None:
        return False
    held.lines.append((sink, line))
    return True
