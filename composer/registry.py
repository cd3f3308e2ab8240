"""The per-branch provider registry, exactly as ADR-0008 D1, D2, D3, D5 and D7 describe it.

Nothing here knows a concrete provider type or a memory store (ADR D6): a provider is any
object with ``async provide(branch, instruction) -> str | None``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DEFAULT_BUDGET",
    "BranchLike",
    "ContextProvider",
    "ContextProviderRegistry",
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


@dataclass(frozen=True)
class ProviderReport:
    """Last-turn diagnostics (ADR D5): frozen attributes, mutable lists.

    ``blocks[i]`` and ``fired[i]`` describe the same retained result, in registration order;
    ``skipped`` mixes per-provider overflow, budget exclusion and systemless turns; ``failed``
    names providers whose ``provide`` raised. Empty results leave no row anywhere.
    """

    blocks: list[str] = field(default_factory=list)
    fired: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


@dataclass
class _Entry:
    provider: Any
    priority: int
    max_tokens: int | None
    name: str


class ContextProviderRegistry:
    """Ordered providers under a total token budget (ADR D1-D3, D7)."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.budget = budget
        self._entries: list[_Entry] = []

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
        report = ProviderReport()
        if not self._entries:
            return report

        from composer.tokens import count_tokens  # ADR D2: an empty registry imports no tokenizer

        successes: list[tuple[_Entry, str, int]] = []
        for entry in self._entries:
            try:
                text = await entry.provider.provide(branch, instruction)
            except Exception:
                logger.warning("context provider %r raised; skipping", entry.name, exc_info=True)
                report.failed.append(entry.name)
                continue
            if not text:
                continue
            tokens = count_tokens(text)
            if entry.max_tokens and tokens > entry.max_tokens:
                report.skipped.append(entry.name)
                continue
            successes.append((entry, text, tokens))

        by_priority = sorted(successes, key=lambda item: item[0].priority, reverse=True)
        kept: set[int] = set()
        total = 0
        for entry, _text, tokens in by_priority:
            if total + tokens <= self.budget:
                total += tokens
                kept.add(id(entry))
            else:
                report.skipped.append(entry.name)

        for entry, text, tokens in successes:
            if id(entry) in kept:
                report.blocks.append(text)
                report.fired.append({"provider_name": entry.name, "tokens": tokens})
        return report

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
