"""What became of each provider in one turn: typed outcome records and the turn's notes.

ADR-0008's report has four lists and mixes reasons in ``skipped`` (P6). The registry also
records, as fields the ADR lists never see, one ``ProviderOutcome`` per registered provider.
Some reasons are known only around a provider (a ``when`` guard that was false, an answer
served from a cache): the engine notes them in the running ``Turn`` (a context variable the
registry sets while it gathers), and the registry reads the notes when it writes the records.
"""

from __future__ import annotations

import secrets
import threading
from collections import deque
from contextvars import ContextVar
from typing import Literal, NamedTuple

__all__ = [
    "CURRENT_TURN",
    "RECENT_TURNS",
    "Outcome",
    "ProviderOutcome",
    "Turn",
    "current_turn",
    "new_turn_id",
    "note",
    "note_degraded",
]

Outcome = Literal[
    "fired",  # admitted: its block is in the turn
    "cached",  # admitted, served from the provider's cache without calling it
    "empty",  # returned nothing
    "guarded",  # its ``when`` was false: not called
    "over_max_tokens",  # over its own cap (ADR D3): skipped whole
    "over_budget",  # did not fit what was left of the budget (ADR D3): skipped
    "failed",  # raised (ADR D2)
    "timeout",  # ran out of time and was cancelled
    "not_called",  # the branch had no system text (ADR D4)
    "disabled",  # declared with ``enabled: false``: never built, so only preview and tests see it
]
"""What became of a provider in a turn: the one set of names the registry, the HTTP API, the
audit log, the metrics, ``composer preview --json`` and ``composer test`` all use."""


class ProviderOutcome(NamedTuple):
    """One registered provider's part in one turn.

    ``tokens`` is the count of a non-empty result (None when there was none); ``duration_ms``
    the time its call took (None when it was not called); for ``failed`` and ``timeout``,
    ``error_type`` and ``error`` (the first line of the message, secrets masked by the engine).
    """

    name: str
    outcome: Outcome
    tokens: int | None = None
    duration_ms: float | None = None
    error_type: str | None = None
    error: str | None = None


class Turn:
    """The running turn: its id, a random nonce for labelled blocks, the engine's notes."""

    __slots__ = ("_nonce", "degraded", "id", "notes")

    def __init__(self) -> None:
        self.id = new_turn_id()
        self.notes: dict[int, Outcome] = {}  # id(provider) -> outcome
        self.degraded: dict[int, tuple[Outcome, BaseException]] = {}
        """id(provider) -> how it failed, for a provider that answered with its notice."""
        self._nonce: str | None = None

    @property
    def nonce(self) -> str:
        """Random per turn, made on first use: nothing a provider returns can know it."""
        if self._nonce is None:
            self._nonce = secrets.token_hex(8)
        return self._nonce


RECENT_TURNS = 10_000
"""How many of a process's newest turn ids have distinct first 8 characters (as many as
``composer audit list --limit`` shows at most)."""


class _Leads:
    """The first 8 characters of the process's ``RECENT_TURNS`` newest turn ids."""

    def __init__(self, size: int) -> None:
        self._order: deque[str] = deque()
        self._held: set[str] = set()
        self._size = size
        self._lock = threading.Lock()  # turns may start in several threads at once

    def draw(self) -> str:
        """8 random hex characters that none of the recent ids starts with."""
        with self._lock:
            lead = secrets.token_hex(4)
            while lead in self._held:
                lead = secrets.token_hex(4)
            self._held.add(lead)
            self._order.append(lead)
            if len(self._order) > self._size:
                self._held.discard(self._order.popleft())
            return lead


_LEADS = _Leads(RECENT_TURNS)


def new_turn_id() -> str:
    """A turn id: 32 random hex characters, the first 8 distinct among the process's
    ``RECENT_TURNS`` newest, so that 8 characters name a turn (``composer audit show LOG
    ID``). Random, not ordered: turns are ordered by their time."""
    return _LEADS.draw() + secrets.token_hex(12)


CURRENT_TURN: ContextVar[Turn | None] = ContextVar("composer_turn", default=None)


def current_turn() -> Turn | None:
    """The turn being gathered in this task, if any."""
    return CURRENT_TURN.get()


def note(provider: object, outcome: Outcome) -> None:
    """Tell the registry why ``provider`` gave what it gave this turn (guarded, cached)."""
    turn = CURRENT_TURN.get()
    if turn is not None:
        turn.notes[id(provider)] = outcome


def note_degraded(provider: object, error: BaseException) -> None:
    """Tell the registry that ``provider`` failed (or timed out) and answered with its
    ``on_failure`` notice instead: the notice is admitted as its block, the outcome stays
    ``failed`` or ``timeout``."""
    turn = CURRENT_TURN.get()
    if turn is not None:
        kind: Outcome = "timeout" if isinstance(error, TimeoutError) else "failed"
        turn.degraded[id(provider)] = (kind, error)
