"""composer in the Microsoft Agent Framework: a ``ContextProvider`` for an ``Agent``.

``Agent(client=..., context_providers=[ComposerContextProvider(manifest)])``. Each run is one
composed turn of the run's session (``session.session_id`` is the conversation, the agent's
name the branch name), with the newest user message as the turn's text:

* ``before_run`` adds the composed instructions, which the Agent Framework appends to the
  agent's own (after a newline) on every model call of the run, and nowhere else;
* with ``stable_prefix`` placement it also adds, for this run only, a chat middleware that puts
  the turn's context block into each model call's messages, as a user message of its own right
  before the newest user message: the history the session stores never holds it, so the
  instructions and the history stay byte-identical from one turn to the next;
* ``after_run`` hands the run's tool results to ``Composer.writeback``, each as
  ``{"function", "arguments", "output"}`` (the shape of a lionagi action response), under the
  identity the run's ``before_run`` composed for (kept by the run's own ``SessionContext``),
  never under that of another run composing on the same session id meanwhile.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from weakref import WeakKeyDictionary

try:
    from agent_framework import (
        AgentSession,
        ChatContext,
        ChatMiddleware,
        ContextProvider,
        Message,
        SessionContext,
        SupportsAgentRun,
    )
except ImportError as error:  # the extra is required
    raise ImportError(
        "composer.integrations.agent_framework needs the Microsoft Agent Framework: "
        "pip install 'context-composer[agent-framework]'"
    ) from error

from composer._closing import AsyncCloseable
from composer.integrations.session import Composed, Composer, Placement
from composer.manifest import Manifest
from composer.registry import ProviderReport

__all__ = ["ComposerContextProvider"]

logger = logging.getLogger(__name__)

_REPORTS_KEPT = 1000


class ComposerContextProvider(AsyncCloseable, ContextProvider):
    """Composes each run's turn from one manifest (or a ``Composer`` the caller keeps).

    ``name`` and ``metadata`` are what templates see as ``branch.name`` (default: the agent's
    name) and ``branch.metadata``. Built from a manifest, it owns its ``Composer``: close it
    (``async with``, or ``aclose``) to close the conversations' providers.
    """

    def __init__(
        self,
        manifest: Manifest | Composer,
        *,
        placement: Placement | None = None,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        source_id: str = "composer",
    ) -> None:
        super().__init__(source_id)
        self.composer, self._owned = Composer.serving(manifest, placement)
        self.name = name
        self.metadata = dict(metadata or {})
        self._reports: OrderedDict[str, ProviderReport | None] = OrderedDict()
        self._runs: WeakKeyDictionary[SessionContext, Composed] = WeakKeyDictionary()
        """Each running run's composition, by the run's own context (gone with it)."""

    def report(self, session: AgentSession | str) -> ProviderReport | None:
        """The report of the session's last composed turn (None: none kept)."""
        key = session if isinstance(session, str) else session.session_id
        return self._reports.get(key)

    async def before_run(
        self,
        *,
        agent: SupportsAgentRun,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        composed = await self.composer.compose(
            session.session_id,
            _newest_user_text(context.input_messages),
            name=self.name if self.name is not None else agent.name,
            metadata=self.metadata,
        )
        self._runs[context] = composed
        self._reports[session.session_id] = composed.report
        self._reports.move_to_end(session.session_id)
        while len(self._reports) > _REPORTS_KEPT:
            self._reports.popitem(last=False)
        if composed.instructions:
            context.extend_instructions(self.source_id, composed.instructions)
        if composed.context is not None:
            context.extend_middleware(self.source_id, [_ContextBeforeUser(composed.context)])

    async def after_run(
        self,
        *,
        agent: SupportsAgentRun,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        response = context.response
        results = _tool_results(response.messages) if response is not None else []
        composed = self._runs.pop(context, None)
        if composed is None:
            if results:  # no before_run of this provider composed this run
                logger.warning(
                    "%d tool result(s) of a run never composed: not written back", len(results)
                )
            return
        await self.composer.writeback(composed, results)

    async def aclose(self) -> None:
        """Close the Composer this provider made (one it was given stays open)."""
        if self._owned:
            await self.composer.aclose()


class _ContextBeforeUser(ChatMiddleware):
    """Puts the turn's context block right before the newest user message of one model call
    (a new list: the run's own messages, which the session stores, are left as they are)."""

    def __init__(self, text: str) -> None:
        self.text = text

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        messages = list(context.messages)
        users = [i for i, message in enumerate(messages) if message.role == "user"]
        at = users[-1] if users else len(messages)
        context.messages = [*messages[:at], Message("user", [self.text]), *messages[at:]]
        await call_next()


def _newest_user_text(messages: Sequence[Message]) -> str:
    return next((m.text for m in reversed(messages) if m.role == "user"), "")


def _tool_results(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Each function result of the run with the call it answers (name and arguments)."""
    contents = [content for message in messages for content in message.contents]
    calls = {c.call_id: c for c in contents if c.type == "function_call" and c.call_id}
    results: list[dict[str, Any]] = []
    for content in contents:
        if content.type != "function_result":
            continue
        call = calls.get(content.call_id or "")
        results.append(
            {
                "function": call.name if call is not None else None,
                "arguments": call.parse_arguments() if call is not None else None,
                "output": content.result,
            }
        )
    return results
