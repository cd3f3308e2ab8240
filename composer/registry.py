"""The per-branch provider registry, exactly as ADR-0008 D1, D2, D3, D5 and D7 describe it.

Nothing here knows a concrete provider type or a memory store (ADR D6): a provider is any
object with ``async provide(branch, instruction) -> str | None``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from composer.outcomes import CURRENT_TURN, Explanation, Outcome, ProviderOutcome, Turn

__all__ = [
    "DEFAULT_BUDGET",
    "BranchLike",
    "Call",
    "ContextProvider",
    "ContextProviderRegistry",
    "GatherMode",
    "InstructionLike",
    "ProviderReport",
]

logger = logging.getLogger(__name__)

DEFAULT_BUDGET = 2000


class BranchLike(Protocol):
    """A conversation branch as the runtime and providers see it: ``composer.Branch`` or a
    lionagi Branch. Only ``id`` is common to both; read the rest through the template context
    (``composer.plugin.template_context``), which handles either shape."""

    @property
    def id(self) -> Any: ...


class InstructionLike(Protocol):
    """One user turn: ``composer.Instruction`` (``text``, ``guidance``, ``context``) or a lionagi
    Instruction (its ``content``). The two share no attribute, so this Protocol promises none:
    read it through the template context, never by attribute."""


@runtime_checkable
class ContextProvider(Protocol):
    """Structural contract for pre-turn context (ADR D1); registration never checks it."""

    async def provide(self, branch: BranchLike, instruction: InstructionLike) -> str | None: ...


@dataclass(frozen=True, slots=True)
class ProviderReport:
    """Last-turn diagnostics (ADR D5): frozen attributes, mutable lists.

    ``blocks[i]`` and ``fired[i]`` describe the same retained result, in registration order;
    ``skipped`` mixes per-provider overflow, budget exclusion and systemless turns; ``failed``
    names providers whose ``provide`` raised. Empty results leave no row anywhere.

    The fields after the four lists are this project's, beyond the ADR: they have defaults,
    take no part in ``==`` or ``repr`` (two reports with the same four lists are equal and
    print alike, as the ADR has it; a failure's message is in ``outcomes`` only), and change
    nothing in the lists. ``outcomes`` has one record per registered provider,
    in registration order.
    """

    blocks: list[str] = field(default_factory=list)
    fired: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    turn_id: str | None = field(default=None, compare=False, repr=False)
    budget: int | None = field(default=None, compare=False, repr=False)
    tokens_used: int = field(default=0, compare=False, repr=False)
    outcomes: list[ProviderOutcome] = field(default_factory=list, compare=False, repr=False)
    degraded: list[dict[str, str]] = field(default_factory=list, compare=False, repr=False)
    """Providers that failed and answered with their ``on_failure`` notice instead, as lionagi
    0.36's report lists them: ``{"provider_name": ..., "reason": ...}``."""
    explanations: list[Explanation] = field(default_factory=list, compare=False, repr=False)
    """One per registered provider, in registration order, when the turn explained itself or
    the engine deduplicated or refitted blocks (``composer.outcomes.Explanation``); else empty."""


GatherMode = Literal["sequential", "concurrent"]


@dataclass(slots=True)
class _Entry:
    provider: Any
    priority: int
    max_tokens: int | None
    name: str


Call = tuple[Any, Exception | None, float | None]
"""What one provider's call gave: ``(result, error, milliseconds)``; ms is None if not run."""


class ContextProviderRegistry:
    """Ordered providers under a total token budget (ADR D1-D3, D7).

    Beyond the ADR, and only when asked: ``gather="concurrent"`` starts every provider at
    once (results are admitted exactly as the sequential pass would admit the same results),
    and ``timeout_s`` bounds the whole gather (a provider still running then is cancelled and
    counted failed, outcome ``timeout``). The defaults are the ADR's: sequential, no timeout.
    """

    def __init__(
        self,
        budget: int = DEFAULT_BUDGET,
        *,
        gather: GatherMode = "sequential",
        timeout_s: float | None = None,
    ) -> None:
        self.budget = budget
        self.gather_mode: GatherMode = gather
        self.timeout_s = timeout_s
        self._entries: list[_Entry] = []
        self._first_priority: int | None = None  # the priority registered first
        self._mixed = False  # whether two entries were registered with different priorities

    def register(
        self,
        provider: Any,
        *,
        priority: int = 0,
        max_tokens: int | None = None,
        name: str | None = None,
    ) -> None:
        """Append one entry (ADR D1): no validation, no duplicate check, no replacement."""
        name = name or getattr(provider, "name", None) or type(provider).__name__
        if self._first_priority is None:
            self._first_priority = priority
        elif priority != self._first_priority:
            self._mixed = True
        self._entries.append(_Entry(provider, priority, max_tokens, name))

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def names(self) -> list[str]:
        """A new list of entry names in registration order."""
        return [entry.name for entry in self._entries]

    @property
    def providers(self) -> list[Any]:
        """A new list of the registered provider objects, in registration order."""
        return [entry.provider for entry in self._entries]

    async def gather(self, branch: BranchLike, instruction: InstructionLike) -> ProviderReport:
        """Call every provider in order, then admit results by priority under the budget.

        ADR D2: sequential, ``Exception`` contained and logged, ``BaseException`` propagates,
        falsy results invisible. ADR D3: per-provider cap by truthiness, then a stable sort by
        descending priority and greedy ``total + tokens <= budget``; blocks in registration order.
        """
        if not self._entries:
            return ProviderReport()

        count_tokens, count_short, short = _counters()

        turn = self._new_turn()
        token = CURRENT_TURN.set(turn)
        try:
            if self.gather_mode == "concurrent":
                calls = await self._call_concurrently(branch, instruction)
            else:
                calls = await self._call_in_order(branch, instruction)
        finally:
            CURRENT_TURN.reset(token)
        if turn.rankings is not None:  # a subclass asked for more than the ADR (_new_turn)
            return self._ranked_report(turn, calls)

        blocks: list[str] = []
        fired: list[dict[str, Any]] = []
        skipped: list[str] = []
        failed: list[str] = []
        degraded: list[dict[str, str]] = []
        outcomes: list[ProviderOutcome] = []  # one per entry, in registration order
        notes = turn.notes  # empty unless the engine noted a guard or a cache hit
        degraded_by = turn.degraded  # empty unless a provider answered with its notice
        successes: list[int] = []  # entries whose block is in blocks and fired, in order
        wanted = 0  # the tokens of every success
        # One pass records every outcome as if every success were admitted (the common case:
        # they all fit); when they do not, ``_admit`` redoes the blocks and the rows it drops.
        for index, (entry, (text, error, ms)) in enumerate(zip(self._entries, calls, strict=True)):
            if error is not None:
                failed.append(entry.name)
                kind: Outcome = "timeout" if isinstance(error, TimeoutError) else "failed"
                outcomes.append(
                    ProviderOutcome(
                        entry.name,
                        kind,
                        duration_ms=ms,
                        error_type=type(error).__name__,
                        error=self.describe_error(error),
                    )
                )
                continue
            if not text:
                guarded = notes and notes.get(id(entry.provider)) == "guarded"
                outcome: Outcome = "guarded" if guarded else "empty"
                outcomes.append(
                    _outcome(ProviderOutcome, (entry.name, outcome, None, ms, None, None))
                )
                continue
            # count_tokens(text), its common case without its frame (composer.tokens)
            if type(text) is str and len(text) <= short:
                tokens = count_short(text)
            else:
                tokens = count_tokens(text)
            if entry.max_tokens and tokens > entry.max_tokens:
                skipped.append(entry.name)
                outcomes.append(ProviderOutcome(entry.name, "over_max_tokens", tokens, ms))
                continue
            successes.append(index)
            wanted += tokens
            blocks.append(text)
            fired.append({"provider_name": entry.name, "tokens": tokens})
            failure = degraded_by.get(id(entry.provider)) if degraded_by else None
            if failure is not None:  # its notice: admitted or not, the outcome says it failed
                kind, cause = failure
                reason = self.describe_error(cause)
                degraded.append({"provider_name": entry.name, "reason": reason})
                outcomes.append(
                    ProviderOutcome(entry.name, kind, tokens, ms, type(cause).__name__, reason)
                )
                continue
            cached = notes and notes.get(id(entry.provider)) == "cached"
            outcome = "cached" if cached else "fired"
            outcomes.append(
                _outcome(ProviderOutcome, (entry.name, outcome, tokens, ms, None, None))
            )

        budget = self.budget
        total = wanted
        if wanted > budget:  # else the greedy pass would admit every success, in any order
            total = self._admit(successes, budget, skipped, blocks, fired, outcomes, degraded_by)
        return ProviderReport(
            blocks, fired, skipped, failed, turn.id, budget, total, outcomes, degraded
        )

    def _admit(
        self,
        successes: list[int],
        budget: int,
        skipped: list[str],
        blocks: list[str],
        fired: list[dict[str, Any]],
        outcomes: list[ProviderOutcome],
        degraded_by: dict[int, Any],
    ) -> int:
        """ADR D3's admission when not every success fits: a stable sort by descending
        priority, greedy ``total + tokens <= budget``, then ``blocks`` and ``fired`` again in
        registration order. ``successes`` are the entries' indexes, in the order of ``blocks``
        and ``fired``; a success left out is ``over_budget`` (a notice stays ``failed`` or
        ``timeout``). The tokens admitted."""
        entries = self._entries
        candidates = [
            (index, entries[index], text, row["tokens"])
            for index, text, row in zip(successes, blocks, fired, strict=True)
        ]
        by_priority = (  # one priority for all (the common case): the stable sort is a no-op
            candidates
            if not self._mixed
            else sorted(candidates, key=lambda item: item[1].priority, reverse=True)
        )
        kept: set[int] = set()
        total = 0
        for index, entry, _text, tokens in by_priority:
            if total + tokens <= budget:
                total += tokens
                kept.add(index)
            else:
                skipped.append(entry.name)
        blocks.clear()
        fired.clear()
        for index, entry, text, tokens in candidates:
            if index in kept:
                blocks.append(text)
                fired.append({"provider_name": entry.name, "tokens": tokens})
            elif not (degraded_by and id(entry.provider) in degraded_by):
                ms = outcomes[index].duration_ms
                outcomes[index] = ProviderOutcome(entry.name, "over_budget", tokens, ms)
        return total

    def _new_turn(self) -> Turn:
        """The record of the turn about to be gathered. The ADR's registry asks for nothing
        more; a subclass that sets ``rankings`` gets its report from ``_ranked_report``."""
        return Turn()

    def _ranked_report(self, turn: Turn, calls: list[Call]) -> ProviderReport:
        """The report of a turn whose rankings were wanted: only a subclass that asks for them
        in ``_new_turn`` (the manifest's registry: ``composer.build``) has them."""
        raise NotImplementedError(f"{type(self).__name__} asked for rankings it cannot use")

    def describe_error(self, error: BaseException) -> str:
        """One line naming a failure for its outcome record (a subclass masks secrets)."""
        lines = str(error).strip().splitlines()
        return lines[0][:300] if lines else ""

    async def _call(
        self,
        entry: _Entry,
        branch: BranchLike,
        instruction: InstructionLike,
        deadline: float | None = None,
    ) -> Call:
        """One provider's call, its ``Exception`` contained and logged (ADR D2)."""
        start = time.perf_counter()
        try:
            if deadline is None:
                result = await entry.provider.provide(branch, instruction)
            else:
                async with asyncio.timeout_at(deadline):
                    result = await entry.provider.provide(branch, instruction)
        except Exception as error:
            logger.warning("context provider %r raised; skipping", entry.name, exc_info=True)
            return None, error, (time.perf_counter() - start) * 1000
        return result, None, (time.perf_counter() - start) * 1000

    async def _call_in_order(self, branch: BranchLike, instruction: InstructionLike) -> list[Call]:
        """ADR D2: one provider after another; with ``timeout_s``, within one deadline."""
        if self.timeout_s is not None:
            deadline = asyncio.get_running_loop().time() + self.timeout_s
            return [await self._call(e, branch, instruction, deadline) for e in self._entries]
        calls: list[Call] = []
        clock = time.perf_counter
        start = clock()  # one reading a provider: where one call ends, the next begins
        for entry in self._entries:  # the common case, inlined: no coroutine per provider
            try:
                result = await entry.provider.provide(branch, instruction)
            except Exception as error:
                logger.warning("context provider %r raised; skipping", entry.name, exc_info=True)
                end = clock()
                calls.append((None, error, (end - start) * 1000))
                start = end
                continue
            end = clock()
            calls.append((result, None, (end - start) * 1000))
            start = end
        return calls

    async def _call_concurrently(
        self, branch: BranchLike, instruction: InstructionLike
    ) -> list[Call]:
        """Every provider at once; each result stays in its registration slot.

        A ``BaseException`` from one provider (or this turn being cancelled) cancels the
        others, waits for them, and propagates from here, in the caller's task, as in the
        sequential pass; no task outlives the gather. At the deadline the providers still
        running are cancelled and recorded as timed out.
        """
        loop = asyncio.get_running_loop()
        escaped: asyncio.Future[BaseException] = loop.create_future()
        all_done: asyncio.Future[None] = loop.create_future()
        left = len(self._entries)

        def finished(_: object) -> None:
            nonlocal left
            left -= 1
            if left == 0 and not all_done.done():
                all_done.set_result(None)

        tasks = []
        for entry in self._entries:
            task = asyncio.ensure_future(self._contained(entry, branch, instruction, escaped))
            task.add_done_callback(finished)
            tasks.append(task)
        try:
            waiters: set[asyncio.Future[Any]] = {all_done, escaped}
            await asyncio.wait(waiters, timeout=self.timeout_s, return_when=asyncio.FIRST_COMPLETED)
            if escaped.done():
                raise escaped.result()
        finally:
            pending = [task for task in tasks if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
            for future in (all_done, escaped):
                future.cancel()
        calls = []
        for entry, task in zip(self._entries, tasks, strict=True):
            result = None if task.cancelled() else task.result()
            if result is not None:
                calls.append(result)
            else:  # cancelled at the deadline
                logger.warning("context provider %r timed out; skipping", entry.name)
                calls.append((None, TimeoutError("the gather timed out"), None))
        return calls

    async def _contained(
        self,
        entry: _Entry,
        branch: BranchLike,
        instruction: InstructionLike,
        escaped: asyncio.Future[BaseException],
    ) -> Call | None:
        """``_call`` in its own task; a ``BaseException`` is handed to the gather to raise.

        asyncio lets ``KeyboardInterrupt`` and ``SystemExit`` out of a task straight into the
        event loop, so they are caught here and raised by the gather in the caller's task.
        """
        try:
            return await self._call(entry, branch, instruction)
        except BaseException as error:  # not an Exception: _call contains those
            task = asyncio.current_task()
            if isinstance(error, asyncio.CancelledError) and task and task.cancelling():
                raise  # this task was cancelled (the deadline, or another's escape)
            if not escaped.done():
                escaped.set_result(error)
            return None

    async def gather_writeback(self, branch: BranchLike, action_responses: list[Any]) -> None:
        """Call each provider's optional ``writeback`` in order, containing failures (ADR D7)."""
        for entry in self._entries:
            hook = getattr(entry.provider, "writeback", None)
            if hook is None:
                continue
            try:
                await hook(branch, action_responses)
            except Exception:
                logger.warning(
                    "context provider %r writeback raised; skipping", entry.name, exc_info=True
                )


_outcome = tuple.__new__
"""``_outcome(ProviderOutcome, (six fields))``: an outcome record as ``ProviderOutcome(...)``
makes it, without its Python-level ``__new__`` (a third of a small provider's share of the
gather); used for the rows every turn has, ``fired`` and ``empty``."""


def _counters() -> tuple[Callable[[str], int], Callable[[str], int], int]:
    """The tokenizer's counters (``count_tokens``, ``count_short_text`` and the length it takes),
    imported on the first non-empty gather (ADR D2: an empty registry imports no tokenizer),
    then kept."""
    global _COUNTERS
    if _COUNTERS is None:
        from composer.tokens import SHORT_TEXT_CHARS, count_short_text, count_tokens

        _COUNTERS = (count_tokens, count_short_text, SHORT_TEXT_CHARS)
    return _COUNTERS


_COUNTERS: tuple[Callable[[str], int], Callable[[str], int], int] | None = None
