"""What became of each provider in one turn: typed outcome records and the turn's notes.

ADR-0008's report has four lists and mixes reasons in ``skipped`` (P6). The registry also
records, as fields the ADR lists never see, one ``ProviderOutcome`` per registered provider.
Some reasons are known only around a provider (a ``when`` guard that was false, an answer
served from a cache): the engine notes them in the running ``Turn`` (a context variable the
registry sets while it gathers), and the registry reads the notes when it writes the records.

Beyond the ADR, and only when a turn asks (``explain_turns``, or the engine's ``runtime.dedup``,
``runtime.admission: fill`` or ``runtime.explain``), a provider that ranks items (passages,
memory hits) reports what it considered, best first, as a ``Ranking`` of ``Candidate`` records;
the engine then says per provider, in an ``Explanation``, what became of each candidate and,
for a provider lost to the budget, what it needed, what was left and who took the rest.
A turn that does not ask creates none of these: ``ranking_wanted()`` is False and a provider
ranks exactly as before.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

__all__ = [
    "CURRENT_TURN",
    "EXPLAIN",
    "EXPLAIN_DEPTH",
    "FATES",
    "RECENT_TURNS",
    "Candidate",
    "Explanation",
    "Fate",
    "Outcome",
    "ProviderOutcome",
    "Ranking",
    "Refit",
    "Render",
    "Turn",
    "current_turn",
    "explain_turns",
    "explaining",
    "new_turn_id",
    "note",
    "note_degraded",
    "ranking_wanted",
    "report_ranking",
    "search_depth",
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

    __slots__ = ("_nonce", "degraded", "explain", "id", "notes", "rankings")

    def __init__(self) -> None:
        self.id = _LEADS.draw()  # new_turn_id(), a frame fewer on every turn
        self.notes: dict[int, Outcome] = {}  # id(provider) -> outcome
        self.degraded: dict[int, tuple[Outcome, BaseException]] = {}
        """id(provider) -> how it failed, for a provider that answered with its notice."""
        self._nonce: str | None = None
        self.explain = False
        """Whether this turn explains itself: ranking providers also report near misses."""
        self.rankings: dict[int, Ranking] | None = None
        """id(provider) -> what it ranked; None unless the engine asked for rankings."""

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
    """The first 8 characters of the process's ``RECENT_TURNS`` newest turn ids.

    The random characters are read ahead, ``_POOL_IDS`` ids at a time (one read of the
    system's randomness instead of two a turn, which cost more than the rest of a gather of
    ten static providers); a forked child drops what its parent read ahead, so no two
    processes hand out the same ids.
    """

    def __init__(self, size: int) -> None:
        self._order: deque[str] = deque()
        self._held: set[str] = set()
        self._size = size
        self._lock = threading.Lock()  # turns may start in several threads at once
        self._pool = ""  # random hex characters read ahead, used from ``_at`` on
        self._at = 0
        os.register_at_fork(after_in_child=self._forget_pool)

    def _forget_pool(self) -> None:
        self._pool, self._at = "", 0

    def _hex(self) -> str:
        """32 random hex characters (the lock is held)."""
        at = self._at
        if at + 32 > len(self._pool):
            self._pool, at = secrets.token_hex(16 * _POOL_IDS), 0
        self._at = at + 32
        return self._pool[at : at + 32]

    def draw(self) -> str:
        """A turn id: 32 random hex characters whose first 8 none of the recent ids starts with."""
        held, order = self._held, self._order
        with self._lock:
            drawn = self._hex()
            lead = drawn[:8]
            while lead in held:
                drawn = self._hex()
                lead = drawn[:8]
            held.add(lead)
            order.append(lead)
            if len(order) > self._size:
                held.discard(order.popleft())
            return drawn


_POOL_IDS = 256
"""How many turn ids' random characters are read at once."""

_LEADS = _Leads(RECENT_TURNS)


def new_turn_id() -> str:
    """A turn id: 32 random hex characters, the first 8 distinct among the process's
    ``RECENT_TURNS`` newest, so that 8 characters name a turn (``composer audit show LOG
    ID``). Random, not ordered: turns are ordered by their time."""
    return _LEADS.draw()


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


Fate = Literal[
    "admitted",  # in the model-visible block
    "below_min_score",  # scored under the provider's min_score
    "beyond_top_k",  # ranked past top_k (a memory provider's query.limit)
    "cut_to_fit",  # within top_k, left out to fit the provider's cap (or, refitted, the budget)
    "duplicate",  # its text was admitted already, from a higher-priority provider or earlier
    "lost_with_block",  # admitted by its provider, whose block was then over_max_tokens/over_budget
]
"""What became of one candidate a ranking provider considered."""

FATES: tuple[Fate, ...] = (
    "admitted",
    "below_min_score",
    "beyond_top_k",
    "cut_to_fit",
    "duplicate",
    "lost_with_block",
)


@dataclass(slots=True)
class Candidate:
    """One item a ranking provider considered: a passage, a memory item, or (when dedup cut a
    plain block) a paragraph.

    ``id`` is stable between turns (``path#Title > Section`` for a passage, the item id for a
    memory item); ``score`` is the provider's own (None when it does not score); ``tokens``
    what the item adds to its block (None unless the turn explains); ``text`` is what dedup
    compares, shown only when asked. For a ``duplicate``, ``duplicate_of`` names the provider
    whose copy was kept and ``duplicate_of_id`` that copy's id (None for a plain block).
    """

    id: str
    score: float | None
    fate: Fate
    text: str = ""
    tokens: int | None = None
    duplicate_of: str | None = None
    duplicate_of_id: str | None = None

    def to_json(self, *, text: bool = False) -> dict[str, Any]:
        """JSON data: id, score, tokens, fate, duplicate_of, duplicate_of_id (and ``text``
        when asked; it is the source's own words, so only under a keep-text setting)."""
        data: dict[str, Any] = {
            "id": self.id,
            "score": self.score,
            "tokens": self.tokens,
            "fate": self.fate,
            "duplicate_of": self.duplicate_of,
            "duplicate_of_id": self.duplicate_of_id,
        }
        if text:
            data["text"] = self.text
        return data


Render = Callable[[Sequence[int]], str]
"""``render(indices)``: the provider's block of the candidates at ``indices`` (rank order)."""

Refit = Callable[[Sequence[int], int], "tuple[str, list[int]] | None"]
"""``refit(indices, tokens)``: the block of the best of those candidates that fits ``tokens``
(and the provider's own caps), with the indices it holds; None when not even one fits."""


@dataclass(slots=True)
class Ranking:
    """What a ranking provider considered this turn, best first, as it decided: ``admitted``
    (in its block), ``cut_to_fit``, ``beyond_top_k``, ``below_min_score``.

    ``render`` lets the engine re-render the block without a duplicate (``runtime.dedup``);
    ``refit`` lets it fit the block to what is left of the budget (``runtime.admission:
    fill``). Without them the block is deduplicated paragraph by paragraph and never refitted.
    """

    candidates: list[Candidate]
    render: Render | None = None
    refit: Refit | None = None


@dataclass(slots=True)
class Explanation:
    """Why one registered provider's block is in the turn, or not, candidate by candidate.

    ``outcome`` and ``tokens`` are its outcome record's. ``candidates`` (best first) is None
    for a provider that does not rank, or whose ranking is unknown this turn (it failed, was
    served from its cache, or was not called). For a provider lost to the budget: ``needed``
    (its block's tokens), ``left`` (what the budget had left when its turn came) and
    ``taken_by`` (the providers admitted before it, by priority); over its own cap: ``needed``
    and ``cap``. ``refitted``: fitted to what was left (``runtime.admission: fill``), with
    ``needed`` what the whole block needed and ``left`` what was left.
    """

    provider: str
    outcome: Outcome
    tokens: int | None = None
    candidates: list[Candidate] | None = None
    needed: int | None = None
    left: int | None = None
    cap: int | None = None
    taken_by: list[str] = field(default_factory=list)
    refitted: bool = False
    left_off: int = 0
    """Candidates considered but not held here (an audit line keeps the best few)."""

    def to_json(self, *, text: bool = False, limit: int | None = None) -> dict[str, Any]:
        """JSON data (the shape ``composer preview --json`` documents); ``limit`` keeps the
        first ``limit`` candidates in rank order (an audit line is bounded) and
        ``candidates_left_off`` says how many were left off."""
        candidates = self.candidates
        shown = None if candidates is None else candidates[:limit] if limit else candidates
        return {
            "provider": self.provider,
            "outcome": self.outcome,
            "tokens": self.tokens,
            "needed": self.needed,
            "left": self.left,
            "cap": self.cap,
            "taken_by": list(self.taken_by),
            "refitted": self.refitted,
            "candidates": None if shown is None else [c.to_json(text=text) for c in shown],
            "candidates_left_off": self.left_off
            + (0 if candidates is None else len(candidates) - len(shown or [])),
        }


EXPLAIN: ContextVar[bool] = ContextVar("composer_explain", default=False)
"""Whether turns gathered in this context explain themselves (``explain_turns``)."""


EXPLAIN_DEPTH: ContextVar[int] = ContextVar("composer_explain_depth", default=0)
"""At least how many items each ranking provider looks at while explaining (``composer eval``
asks for ``--k``)."""


@contextmanager
def explain_turns(on: bool = True, *, depth: int = 0) -> Iterator[None]:
    """Turns gathered inside explain themselves: every candidate each ranking provider
    considered, near misses included, in ``ProviderReport.explanations`` (a manifest-built
    registry only). ``composer preview --explain`` and a server asked for it use this;
    ``depth`` asks each ranking provider to look at least that deep (``composer eval``)."""
    token = EXPLAIN.set(on)
    deep = EXPLAIN_DEPTH.set(depth)
    try:
        yield
    finally:
        EXPLAIN_DEPTH.reset(deep)
        EXPLAIN.reset(token)


def explaining() -> bool:
    """Whether the turn being gathered explains itself (so near misses are wanted)."""
    turn = CURRENT_TURN.get()
    return turn is not None and turn.explain


def search_depth(top_k: int) -> int:
    """How many items a ranking provider should look at: ``top_k``, or twice as many while
    the turn explains itself, so that as many near misses as admitted items show (deeper
    when ``explain_turns`` asked for a depth)."""
    return max(2 * top_k, EXPLAIN_DEPTH.get()) if explaining() else top_k


def ranking_wanted() -> bool:
    """Whether the engine wants this turn's rankings (``report_ranking``): building one costs
    a little, so a provider builds it only then."""
    turn = CURRENT_TURN.get()
    return turn is not None and turn.rankings is not None


def report_ranking(provider: object, ranking: Ranking) -> None:
    """Hand the engine what ``provider`` (the object the manifest's type built) ranked this
    turn; nothing happens when no ranking is wanted."""
    turn = CURRENT_TURN.get()
    if turn is not None and turn.rankings is not None:
        turn.rankings[id(provider)] = ranking
