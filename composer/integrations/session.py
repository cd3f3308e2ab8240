"""``Composer``: a loaded manifest composing turns for the conversations of an agent framework.

A framework keeps the conversation; composer keeps, per conversation id, a branch with its own
registry (ADR-0008 D1: ``attach``), bounded like a server's branches (least recently used and
idle ones dropped, their providers closed). Each turn is the ordinary ``prepare_turn`` on that
branch, with the framework's system text and the user's latest text, and gives:

* ``instructions``: what the framework sends as its system text (system + the blocks the
  placement folds + guidance, exactly ADR-0008 D4 with ``adr``);
* ``context``: with ``stable_prefix`` placement, the turn's changing blocks as one delimited
  block, to put just before the user's text (None otherwise);
* ``report``: the turn's ProviderReport (four lists, outcomes, tokens).

Turns are counted per conversation, so a writeback of the same tool result in the same turn
stores once and in a later turn again (``composer.plugin.turn_key``). A framework that calls the
model several times in one user turn (a tool call, then the answer) names the turn: composing
the same turn again gives its first composition, so providers run once per user turn.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

from composer.build import WritebackResult, attach
from composer.manifest import Manifest
from composer.registry import ProviderReport
from composer.serve.branches import BranchEntry, BranchStore, TurnCounter
from composer.turn import Branch, Instruction, prepare_turn

__all__ = ["Composed", "Composer", "Placement"]

Placement = Literal["adr", "stable_prefix"]


@dataclass(frozen=True)
class Composed:
    """One composed turn: the system text to send, the turn's context block, the report."""

    instructions: str
    context: str | None
    report: ProviderReport | None

    def user_text(self, text: str) -> str:
        """The user's text with the turn's context block before it (``stable_prefix``)."""
        return text if self.context is None else f"{self.context}\n{text}"


class _Conversation(Branch):
    """A framework conversation's branch; it counts its turns (``turn_key``) and keeps the
    latest composition with the framework's name for its turn."""

    turn_key = ""
    last: tuple[str, Composed] | None = None


class Composer:
    """One manifest, composing turns for any number of conversations (by id).

    ``placement`` overrides the manifest's ``runtime.placement`` for these conversations.
    Close it (``async with``, or ``aclose``) to close every conversation's providers; the
    manifest is the caller's and stays open.
    """

    def __init__(
        self,
        manifest: Manifest,
        *,
        placement: Placement | None = None,
        max_conversations: int = 1000,
        idle_ttl_s: float = 3600.0,
    ) -> None:
        self.manifest = manifest
        self.placement = placement
        self._branches = BranchStore(
            self._new, max_branches=max_conversations, idle_ttl_s=idle_ttl_s
        )
        self._turns = TurnCounter(max(100_000, 10 * max_conversations))
        self._ids = itertools.count()

    @classmethod
    def serving(
        cls, source: Manifest | Composer, placement: Placement | None = None
    ) -> tuple[Composer, bool]:
        """The Composer an integration composes with, and whether it made it (and so closes
        it): ``source`` itself when it is one (its placement is its own), else a new one over
        the manifest."""
        if isinstance(source, Composer):
            if placement is not None:
                raise TypeError("placement is the Composer's: Composer(manifest, placement=...)")
            return source, False
        return cls(source, placement=placement), True

    def _new(self, conversation: str) -> BranchEntry:
        branch = _Conversation(None)
        branch.id = conversation
        registry = attach(branch, self.manifest)
        if self.placement is not None:
            registry.placement = self.placement
        return BranchEntry(branch, registry)

    async def compose(
        self,
        conversation: str,
        text: str,
        *,
        system: str = "",
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        guidance: Any = None,
        turn: str | None = None,
    ) -> Composed:
        """Compose the turn of ``conversation`` whose user text is ``text``.

        ``turn`` is the framework's name for the user turn (a run id, the user message's id):
        the same ``turn`` as the conversation's latest composition gives that one again.
        """
        async with self._branches.use(conversation) as entry:
            branch = entry.branch
            assert isinstance(branch, _Conversation)
            if turn is not None and branch.last is not None and branch.last[0] == turn:
                return branch.last[1]
            branch.system = system
            branch.name = name
            branch.metadata = dict(metadata or {})
            branch.turn_key = self._turns.next(conversation)
            try:
                prepared = await prepare_turn(branch, Instruction(text, guidance=guidance))
            finally:
                branch.messages.clear()  # the framework keeps the conversation
            composed = Composed(prepared.guidance or "", prepared.context, prepared.report)
            branch.last = None if turn is None else (turn, composed)
        return composed

    def last_report(self, conversation: str) -> ProviderReport | None:
        """The report of the conversation's latest turn (None: no turn yet, or it was dropped)."""
        entry = self._branches.peek(conversation)
        return None if entry is None else entry.branch.last_context_report

    async def writeback(self, conversation: str, results: list[Any]) -> list[WritebackResult]:
        """Hand the turn's tool results to the providers' writeback hooks (ADR D7), each
        contained; what each stored or why it failed."""
        if not results:
            return []
        async with self._branches.use(conversation) as entry:
            branch = entry.branch
            assert isinstance(branch, _Conversation)
            branch.turn_key = self._turns.current(conversation)
            return await entry.registry.writeback_results(branch, list(results))

    def new_conversation(self) -> str:
        """An id for a conversation the framework does not name."""
        return f"conversation-{self._turns.run}-{next(self._ids)}"

    async def aclose(self) -> None:
        """Close every conversation's providers (the manifest stays open)."""
        await self._branches.aclose()

    async def __aenter__(self) -> Composer:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
