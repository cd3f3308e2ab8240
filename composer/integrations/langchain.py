"""composer in a LangChain agent: a middleware for ``create_agent`` (LangChain 1, LangGraph).

    agent = create_agent(model, tools, system_prompt="You are on call.\\n",
                         middleware=[ComposerMiddleware(manifest)], checkpointer=InMemorySaver())
    await agent.ainvoke({"messages": [("user", text)]}, {"configurable": {"thread_id": "t1"}})

Before each model call the middleware composes the turn (``Composer.compose``) and hands the
model a changed request: the composed instructions as the system message, and with
``stable_prefix`` placement the turn's context block before the newest user message. It works
in the model-call wrapper, not in a ``before_model`` node: a node's output is written to the
agent's state (and its checkpoints), while a changed request reaches the model only, so nothing
composer injects is ever stored in the thread. A turn is one run (one ``ainvoke``): the model
calls of its tool loop reuse one composition. Tool results (what the model is shown) go to the
providers' writeback, under the identity of the run that called the tool. Async only
(``ainvoke``, ``astream``): the providers are async.

What maps to what: the run config's ``thread_id`` is the branch id (a run without one is a
branch of its own), the agent's ``name`` the branch name, the run config's ``metadata``
(LangChain's and LangGraph's own keys left out) the branch metadata.

Each run (one ``ainvoke``) gets a random token in its state (``before_agent``; private: not
in the agent's input or output), which its model calls and tool calls both see: the run's
composition is kept under it, and its tool results are written back under that composition's
identity (``Composer.writeback``), never under whichever run composed last on the thread.
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, NotRequired

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
    from langchain.agents.middleware.types import PrivateStateAttr
    from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.config import get_config
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime
    from langgraph.types import Command
except ImportError as e:  # pragma: no cover - the test runs it with LangChain hidden
    raise ImportError(
        "composer.integrations.langchain needs LangChain and LangGraph: "
        "pip install 'context-composer[langchain]'"
    ) from e

from composer.integrations.session import Composed, Composer, Placement
from composer.manifest import Manifest
from composer.registry import ProviderReport

__all__ = ["ComposerMiddleware", "RunState"]

logger = logging.getLogger(__name__)

_FRAMEWORK_KEYS = ("langgraph_", "lc_", "ls_", "checkpoint_", "thread_id")
"""Run metadata that LangChain and LangGraph add (not the caller's)."""
_RUN_KEY = "composer_run"
_RUNS_KEPT = 10_000
"""Compositions of unfinished runs kept (a run's is dropped when it ends)."""


class RunState(AgentState[Any]):
    """The agent's state with the middleware's run token (private to it)."""

    composer_run: NotRequired[Annotated[str, PrivateStateAttr]]


class ComposerMiddleware(AgentMiddleware[RunState, Any, Any]):
    """One manifest's context in every model call of a ``create_agent`` agent.

    Give it a loaded manifest (``placement`` overrides its ``runtime.placement``) or a
    ``Composer`` to share; close it (``aclose``) to close the conversations' providers.
    """

    state_schema = RunState

    def __init__(
        self, manifest: Manifest | Composer, *, placement: Placement | None = None
    ) -> None:
        super().__init__()
        if isinstance(manifest, Composer):
            self.composer = manifest
        else:
            self.composer = Composer(manifest, placement=placement)
        self._runs: OrderedDict[str, Composed] = OrderedDict()

    async def abefore_agent(self, state: RunState, runtime: Runtime[Any]) -> dict[str, Any]:
        """A new token for this run, which its model and tool calls read from the state."""
        return {_RUN_KEY: secrets.token_hex(16)}

    async def aafter_agent(self, state: RunState, runtime: Runtime[Any]) -> None:
        """The run is over: its composition is no longer needed."""
        self._runs.pop(_token(state) or "", None)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        newest = _newest_user_message(request.messages)
        user = request.messages[newest] if newest is not None else None
        token = _token(request.state)
        composed = self._runs.get(token) if token is not None else None
        if composed is None:
            config = get_config()
            system = request.system_prompt or ""
            composed = await self.composer.compose(
                _thread(config) or self.composer.new_conversation(),
                str(user.text) if user is not None else "",
                system=system if not system or system.endswith("\n") else system + "\n",
                name=(config.get("metadata") or {}).get("lc_agent_name"),
                metadata=_metadata(config),
                turn=token or (user.id if user is not None else None),
            )
            if token is not None:
                self._runs[token] = composed
                while len(self._runs) > _RUNS_KEPT:
                    self._runs.popitem(last=False)
        messages = _placed(request.messages, newest, composed)
        instructions = SystemMessage(composed.instructions) if composed.instructions else None
        return await handler(request.override(system_message=instructions, messages=messages))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Run the tool; its result, unless it failed, goes to the providers' writeback under
        the identity of the run that called it."""
        result = await handler(request)
        if isinstance(result, ToolMessage) and result.status != "error":
            token = _token(request.state)
            composed = self._runs.get(token) if token is not None else None
            if composed is None:  # no model call of this run composed: whose it is is unknown
                logger.warning("tool %r: its run has no composition; not written back", result.name)
            else:
                await self.composer.writeback(composed, [result.content])
        return result

    def last_report(self, thread_id: str) -> ProviderReport | None:
        """The report of the thread's latest turn: what was injected, skipped, failed, why."""
        return self.composer.last_report(thread_id)

    async def aclose(self) -> None:
        """Close every conversation's providers (the manifest stays open)."""
        await self.composer.aclose()


def _token(state: Any) -> str | None:
    """The run's token in the agent's state (None: ``before_agent`` did not run)."""
    token = state.get(_RUN_KEY) if isinstance(state, Mapping) else None
    return token if isinstance(token, str) else None


def _thread(config: RunnableConfig) -> str | None:
    thread = (config.get("configurable") or {}).get("thread_id")
    return str(thread) if thread is not None else None


def _metadata(config: RunnableConfig) -> Mapping[str, Any]:
    given: Mapping[str, Any] = config.get("metadata") or {}
    return {key: value for key, value in given.items() if not key.startswith(_FRAMEWORK_KEYS)}


def _newest_user_message(messages: list[AnyMessage]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return index
    return None


def _placed(messages: list[AnyMessage], newest: int | None, composed: Composed) -> list[AnyMessage]:
    """The request's messages with the turn's context block (``stable_prefix``) before the
    newest user message's text: a copy, the thread's messages stay as they are."""
    if composed.context is None:
        return messages
    if newest is None:
        return [*messages, HumanMessage(composed.context)]
    user = messages[newest]
    if isinstance(user.content, str):
        content: Any = composed.user_text(user.content)
    else:
        content = [{"type": "text", "text": composed.context + "\n"}, *user.content]
    return [
        *messages[:newest],
        user.model_copy(update={"content": content}),
        *messages[newest + 1 :],
    ]
