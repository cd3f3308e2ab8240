"""composer in a LangChain agent: a middleware for ``create_agent`` (LangChain 1, LangGraph).

    agent = create_agent(model, tools, system_prompt="You are on call.\\n",
                         middleware=[ComposerMiddleware(manifest)], checkpointer=InMemorySaver())
    await agent.ainvoke({"messages": [("user", text)]}, {"configurable": {"thread_id": "t1"}})

Before each model call the middleware composes the turn (``Composer.compose``) and hands the
model a changed request: the composed instructions as the system message, and with
``stable_prefix`` placement the turn's context block before the newest user message. It works
in the model-call wrapper, not in a ``before_model`` node: a node's output is written to the
agent's state (and its checkpoints), while a changed request reaches the model only, so nothing
composer injects is ever stored in the thread. A turn is the newest user message: the model
calls of its tool loop reuse one composition. Tool results (what the model is shown) go to the
providers' writeback. Async only (``ainvoke``, ``astream``): the providers are async.

What maps to what: the run config's ``thread_id`` is the branch id (``default`` without one),
the agent's ``name`` the branch name, the run config's ``metadata`` (LangChain's and
LangGraph's own keys left out) the branch metadata.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
    from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.config import get_config
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command
except ImportError as e:  # pragma: no cover - the test runs it with LangChain hidden
    raise ImportError(
        "composer.integrations.langchain needs LangChain and LangGraph: "
        "pip install 'context-composer[langchain]'"
    ) from e

from composer.integrations.session import Composed, Composer, Placement
from composer.manifest import Manifest
from composer.registry import ProviderReport

__all__ = ["ComposerMiddleware"]

DEFAULT_THREAD = "default"
_FRAMEWORK_KEYS = ("langgraph_", "lc_", "ls_", "checkpoint_", "thread_id")
"""Run metadata that LangChain and LangGraph add (not the caller's)."""


class ComposerMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """One manifest's context in every model call of a ``create_agent`` agent.

    Give it a loaded manifest (``placement`` overrides its ``runtime.placement``) or a
    ``Composer`` to share; close it (``aclose``) to close the conversations' providers.
    """

    def __init__(
        self, manifest: Manifest | Composer, *, placement: Placement | None = None
    ) -> None:
        super().__init__()
        if isinstance(manifest, Composer):
            self.composer = manifest
        else:
            self.composer = Composer(manifest, placement=placement)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        config = get_config()
        newest = _newest_user_message(request.messages)
        user = request.messages[newest] if newest is not None else None
        system = request.system_prompt or ""
        composed = await self.composer.compose(
            _thread(config),
            str(user.text) if user is not None else "",
            system=system if not system or system.endswith("\n") else system + "\n",
            name=(config.get("metadata") or {}).get("lc_agent_name"),
            metadata=_metadata(config),
            turn=user.id if user is not None else None,
        )
        messages = _placed(request.messages, newest, composed)
        instructions = SystemMessage(composed.instructions) if composed.instructions else None
        return await handler(request.override(system_message=instructions, messages=messages))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Run the tool; its result, unless it failed, goes to the providers' writeback."""
        result = await handler(request)
        if isinstance(result, ToolMessage) and result.status != "error":
            await self.composer.writeback(_thread(request.runtime.config), [result.content])
        return result

    def last_report(self, thread_id: str = DEFAULT_THREAD) -> ProviderReport | None:
        """The report of the thread's latest turn: what was injected, skipped, failed, why."""
        return self.composer.last_report(thread_id)

    async def aclose(self) -> None:
        """Close every conversation's providers (the manifest stays open)."""
        await self.composer.aclose()


def _thread(config: RunnableConfig) -> str:
    thread = (config.get("configurable") or {}).get("thread_id")
    return str(thread) if thread is not None else DEFAULT_THREAD


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
