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
the same turn again, for the same name, metadata and principal, gives its first composition, so
providers run once per user turn.

A writeback is the run's, not the conversation's: ``Composed.run`` records whom the turn was
composed for (the conversation, the branch name and metadata, the principal, the turn), and
``writeback`` stores the tool results under exactly that, whatever turn another run composed
on the same conversation since (two runs sharing an id, one of them inside a tool). Each
integration carries its run's ``Composed`` from the model call to the tool result through the
framework's own per-run object. Conversations are kept per principal (``current_principal``,
when the caller sets one), as a server keeps its branches.
"""

from __future__ import annotations

import itertools
import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from composer._closing import AsyncCloseable
from composer.branches import BranchEntry, BranchStore, TurnCounter
from composer.build import WritebackResult, attach
from composer.manifest import Manifest
from composer.principal import Principal, current_principal
from composer.registry import ProviderReport
from composer.turn import Branch, Instruction, prepare_turn

__all__ = ["Composed", "Composer", "Placement", "Run"]

Placement = Literal["adr", "stable_prefix"]

_TURNS_KEPT = 32
"""Recent named turns a conversation remembers (runs interleaved on one conversation)."""


@dataclass(frozen=True)
class Run:
    """Whom one turn was composed for: what its tool results are written back under."""

    conversation: str
    name: str | None
    metadata: Mapping[str, Any]
    principal: Principal | None
    turn_key: str = field(repr=False)


@dataclass(frozen=True)
class Composed:
    """One composed turn: the system text to send, the turn's context block, the report, and
    the run it was composed for (``Composer.writeback`` stores under it)."""

    instructions: str
    context: str | None
    report: ProviderReport | None
    run: Run = field(repr=False)

    def user_text(self, text: str) -> str:
        """The user's text with the turn's context block before it (``stable_prefix``)."""
        return text if self.context is None else f"{self.context}\n{text}"


class _Conversation(Branch):
    """A framework conversation's branch; it counts its turns (``turn_key``) and keeps its
    recent compositions under the framework's names for their turns."""

    turn_key = ""

    def __init__(self) -> None:
        super().__init__(None)
        self.recent: OrderedDict[tuple[str, str], Composed] = OrderedDict()
        """By the turn's name and its caller (branch name and metadata)."""


class Composer(AsyncCloseable):
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

    def _new(self, key: str) -> BranchEntry:
        branch = _Conversation()
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
        the same ``turn`` as one of the conversation's recent compositions, for the same
        ``name``, ``metadata`` and principal, gives that one again.
        """
        metadata = dict(metadata or {})
        key = _key(conversation)
        async with self._branches.use(key) as entry:
            branch = entry.branch
            assert isinstance(branch, _Conversation)
            named = None if turn is None else (turn, _caller(name, metadata))
            kept = branch.recent.get(named) if named is not None else None
            if kept is not None:
                return kept
            branch.id = conversation
            branch.system = system
            branch.name = name
            branch.metadata = metadata
            branch.turn_key = self._turns.next(key)
            try:
                prepared = await prepare_turn(branch, Instruction(text, guidance=guidance))
            finally:
                branch.messages.clear()  # the framework keeps the conversation
            principal = current_principal.get()
            run = Run(
                conversation, name, MappingProxyType(dict(metadata)), principal, branch.turn_key
            )
            composed = Composed(prepared.guidance or "", prepared.context, prepared.report, run)
            if named is not None:
                branch.recent[named] = composed
                while len(branch.recent) > _TURNS_KEPT:
                    branch.recent.popitem(last=False)
        return composed

    def last_report(self, conversation: str) -> ProviderReport | None:
        """The report of the conversation's latest turn (None: no turn yet, or it was dropped)."""
        entry = self._branches.peek(_key(conversation))
        return None if entry is None else entry.branch.last_context_report

    async def writeback(self, composed: Composed, results: list[Any]) -> list[WritebackResult]:
        """Hand a run's tool results to the providers' writeback hooks (ADR D7), each
        contained; what each stored or why it failed.

        ``composed`` is the turn of the run whose tools gave ``results``: they are stored under
        its conversation, branch name, metadata, principal and turn, never under those of a
        turn another run composed on the conversation since.
        """
        if not isinstance(composed, Composed):
            raise TypeError(
                "writeback takes the Composed of the run whose tools gave the results "
                f"(what compose returned for it), not {type(composed).__name__}"
            )
        if not results:
            return []
        run = composed.run
        scope = current_principal.set(run.principal)
        try:
            async with self._branches.use(_key(run.conversation)) as entry:
                branch = entry.branch
                assert isinstance(branch, _Conversation)
                branch.id = run.conversation
                branch.name = run.name
                branch.metadata = dict(run.metadata)
                branch.turn_key = run.turn_key
                return await entry.registry.writeback_results(branch, list(results))
        finally:
            current_principal.reset(scope)

    def new_conversation(self) -> str:
        """An id for a conversation the framework does not name."""
        return f"conversation-{self._turns.run}-{next(self._ids)}"

    async def aclose(self) -> None:
        """Close every conversation's providers (the manifest stays open)."""
        await self._branches.aclose()


def _caller(name: str | None, metadata: Mapping[str, Any]) -> str:
    """Whom a named turn is for, within one principal's conversation."""
    return json.dumps([name, metadata], sort_keys=True, default=repr)


def _key(conversation: str) -> str:
    """Where a conversation is kept: its id, under the running principal's name when the
    caller set one (two principals' ``c-1`` are two branches)."""
    principal = current_principal.get()
    return conversation if principal is None else f"{principal.name}\x1f{conversation}"
