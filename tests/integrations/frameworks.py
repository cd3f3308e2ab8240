"""The four agent frameworks behind one face, for the contract test (``test_contract.py``).

Each adapter is a real agent of its framework (its OpenAI chat-completions model, against a
FakeChat on 127.0.0.1) composing through composer's integration for it: named ``platform``,
with the branch metadata ``{"team": "payments"}``, the instructions ``SYSTEM``, and one tool,
``disk_usage``. ``ask(text, conversation)`` runs one turn of a conversation (the framework's
thread, conversation or session id); ``report`` is the integration's own report of the
conversation's last turn; ``stored`` is everything the framework keeps of its conversations.
The frameworks are imported inside the adapters, so this module imports without them.

What differs between the integrations, and the contract states as such:

- ``context_message``: with ``stable_prefix``, the turn's context block is a user message of its
  own right before the newest user message (Agent Framework, OpenAI Agents), or opens that
  message's text (LangChain, Pydantic AI);
- ``writes_call``: a tool result is written back as the call it answers (``function``,
  ``arguments``, ``output``; Agent Framework, OpenAI Agents), or as the result alone;
- ``keeps_instructions``: the framework's own history holds the agent's instructions
  (Pydantic AI), never what composer added to them.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from fakechat import MODEL, FakeChat, Request

import composer
from builtin_providers.memory import provider_type as memory_type
from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.integrations import Composer
from composer.integrations.session import Placement
from composer.manifest import ProviderConfig
from composer.plugin import BuildContext, ProviderType
from composer.registry import ProviderReport
from composer.turn import CONTEXT_BLOCK

__all__ = [
    "CONVERSATION",
    "FRAMEWORKS",
    "NAME",
    "RULES",
    "SYSTEM",
    "TEAM",
    "Agent",
    "Framework",
    "context_of",
    "disk_usage",
    "load",
    "remember",
    "system_of",
]

SYSTEM = "You are on call."
NAME = "platform"
TEAM = "payments"
CONVERSATION = "c-9"
RULES = f"RULES-r7 for {NAME} of {TEAM} in {CONVERSATION}."
"""The stable block as conversation ``c-9`` sees it."""
MANIFEST = """\
version: 1
providers:
  - name: rules
    type: static
    stable: true
    text: "RULES-r7 for {{ branch.name }} of {{ branch.metadata.team }} in {{ branch.id }}."
  - name: notes
    type: memory
    source: {sqlite: notes.sqlite}
    query: {text: "{{ instruction.text }}"}
    header: "NOTES-n4:"
    template: "- {{ item.content }}"
    writeback: true
  - {name: asked, type: static, text: "ASKED-t9 {{ instruction.text }}"}
"""


class ProbeConfig(ProviderConfig):
    """``type: probe``: counts its calls, answers ``PROBE call N`` after ``sleep_s``."""

    type: Literal["probe"] = "probe"
    sleep_s: float = 0.0


class ProbeProvider:
    def __init__(self, config: ProbeConfig) -> None:
        self.name = config.name
        self.sleep_s = config.sleep_s
        self.calls = 0

    async def provide(self, branch: Any, instruction: Any) -> str:
        self.calls += 1
        await asyncio.sleep(self.sleep_s)
        return f"PROBE call {self.calls}"


def _probe(config: ProbeConfig, context: BuildContext) -> ProbeProvider:
    return ProbeProvider(config)


PROBE = ProviderType("probe", ProbeConfig, _probe, "Test provider that counts its calls.")


def load(tmp_path: Path, extra: str = "") -> composer.Manifest:
    """The contract's manifest (rules, notes, asked), with ``extra`` provider lines after it."""
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(MANIFEST) + extra, encoding="utf-8")
    return composer.load_manifest(path, types=ProviderTypes([static_type, memory_type, PROBE]))


async def remember(manifest: composer.Manifest, note: str) -> None:
    """Put ``note`` in the manifest's memory store, as a writeback of another conversation."""
    async with Composer(manifest) as composing:
        turn = await composing.compose("earlier", note, name=NAME, metadata={"team": TEAM})
        await composing.writeback(turn, [note])


def disk_usage(host: str) -> str:
    """How full the disks of ``host`` are."""
    return f"{host}: disk 91% full"


def system_of(request: Request) -> str:
    """The text of the request's system message (its first)."""
    first = request.messages[0]
    assert first["role"] == "system"
    return str(first["content"])


class Agent(Protocol):
    """One framework's agent, composing through composer, on one FakeChat."""

    async def ask(self, text: str, conversation: str = CONVERSATION) -> str: ...

    def report(self, conversation: str = CONVERSATION) -> ProviderReport | None: ...

    async def stored(self) -> str: ...


@dataclass(frozen=True)
class Framework:
    """One agent framework and composer's integration for it."""

    name: str
    module: str  # composer's integration
    needs: tuple[str, ...]  # what must import for it to run
    hidden: str  # made unimportable to see the install hint
    extra: str
    example: str  # under examples/
    context_message: bool
    writes_call: bool
    keeps_instructions: bool
    start: Callable[
        [FakeChat, composer.Manifest, Placement | None], AbstractAsyncContextManager[Agent]
    ]

    def agent(
        self, chat: FakeChat, manifest: composer.Manifest, placement: Placement | None = None
    ) -> AbstractAsyncContextManager[Agent]:
        """The framework's agent on ``chat``, composing from ``manifest`` (``async with``: it
        is closed, with what the integration opened, on the way out)."""
        return self.start(chat, manifest, placement)


def context_of(request: Request, framework: Framework) -> str:
    """The request's context block, found once, where ``framework`` puts it (asserted)."""
    holding = [
        at
        for at, message in enumerate(request.messages)
        if isinstance(message.get("content"), str) and "<context id=" in message["content"]
    ]
    assert len(holding) == 1, holding
    (at,) = holding
    newest_user = max(i for i, m in enumerate(request.messages) if m["role"] == "user")
    content: str = request.messages[at]["content"]
    found = CONTEXT_BLOCK.match(content)
    assert found is not None
    if framework.context_message:
        assert at == newest_user - 1
        assert CONTEXT_BLOCK.fullmatch(content)
    else:
        assert at == newest_user
    return found[0]


class LangChainAgent:
    """``create_agent`` with ``ComposerMiddleware`` and an in-memory checkpointer."""

    def __init__(
        self, chat: FakeChat, manifest: composer.Manifest, placement: Placement | None
    ) -> None:
        from langchain.agents import create_agent
        from langchain_core.tools import tool
        from langchain_openai import ChatOpenAI
        from langgraph.checkpoint.memory import InMemorySaver

        from composer.integrations.langchain import ComposerMiddleware

        self.middleware = ComposerMiddleware(manifest, placement=placement)
        model = ChatOpenAI(
            model=MODEL, base_url=chat.base_url, api_key="any", use_responses_api=False
        )
        self.saver = InMemorySaver()
        self.agent: Any = create_agent(
            model,
            [tool(disk_usage)],
            system_prompt=SYSTEM,
            middleware=[self.middleware],
            checkpointer=self.saver,
            name=NAME,
        )

    async def ask(self, text: str, conversation: str = CONVERSATION) -> str:
        from langchain_core.messages import HumanMessage

        config: Any = {"configurable": {"thread_id": conversation}, "metadata": {"team": TEAM}}
        state = await self.agent.ainvoke({"messages": [HumanMessage(text)]}, config)
        return str(state["messages"][-1].text)

    def report(self, conversation: str = CONVERSATION) -> ProviderReport | None:
        return self.middleware.last_report(conversation)

    async def stored(self) -> str:
        """Every checkpoint of every thread."""
        return "\n".join(repr(saved) for saved in self.saver.list(None))


@asynccontextmanager
async def _langchain(
    chat: FakeChat, manifest: composer.Manifest, placement: Placement | None
) -> AsyncIterator[Agent]:
    agent = LangChainAgent(chat, manifest, placement)
    try:
        yield agent
    finally:
        await agent.middleware.aclose()


class PydanticAIAgent:
    """A Pydantic AI ``Agent`` with ``ComposerCapability``; each conversation's history kept."""

    def __init__(
        self, chat: FakeChat, manifest: composer.Manifest, placement: Placement | None
    ) -> None:
        from pydantic_ai import Agent as PydanticAgent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        from composer.integrations.pydantic_ai import ComposerCapability

        self.capability = ComposerCapability(manifest, placement=placement)
        provider = OpenAIProvider(base_url=chat.base_url, api_key="any")
        self.agent: Any = PydanticAgent(
            OpenAIChatModel(MODEL, provider=provider),
            instructions=SYSTEM,
            capabilities=[self.capability],
            name=NAME,
            tools=[disk_usage],
        )
        self.history: dict[str, Any] = {}

    async def ask(self, text: str, conversation: str = CONVERSATION) -> str:
        result = await self.agent.run(
            text,
            message_history=self.history.get(conversation),
            conversation_id=conversation,
            metadata={"team": TEAM},
        )
        self.history[conversation] = result.all_messages()
        return str(result.output)

    def report(self, conversation: str = CONVERSATION) -> ProviderReport | None:
        return self.capability.last_report(conversation)

    async def stored(self) -> str:
        """Every conversation's message history, serialised as Pydantic AI stores it."""
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        return "\n".join(
            ModelMessagesTypeAdapter.dump_json(history).decode()
            for history in self.history.values()
        )


@asynccontextmanager
async def _pydantic_ai(
    chat: FakeChat, manifest: composer.Manifest, placement: Placement | None
) -> AsyncIterator[Agent]:
    agent = PydanticAIAgent(chat, manifest, placement)
    try:
        async with agent.agent:  # its HTTP client is closed on the way out
            yield agent
    finally:
        await agent.capability.aclose()


class AgentFrameworkAgent:
    """A Microsoft Agent Framework ``Agent`` with ``ComposerContextProvider``; one session
    per conversation."""

    def __init__(
        self, openai: Any, manifest: composer.Manifest, placement: Placement | None
    ) -> None:
        from agent_framework import Agent as FrameworkAgent
        from agent_framework import tool
        from agent_framework.openai import OpenAIChatCompletionClient

        from composer.integrations.agent_framework import ComposerContextProvider

        self.provider = ComposerContextProvider(
            manifest, placement=placement, metadata={"team": TEAM}
        )
        client = OpenAIChatCompletionClient(model=MODEL, async_client=openai)
        self.agent: Any = FrameworkAgent(
            client=client,
            name=NAME,
            instructions=SYSTEM,
            context_providers=[self.provider],
            tools=[tool(disk_usage)],
        )
        self.sessions: dict[str, Any] = {}

    async def ask(self, text: str, conversation: str = CONVERSATION) -> str:
        if conversation not in self.sessions:
            self.sessions[conversation] = self.agent.create_session(session_id=conversation)
        response = await self.agent.run(text, session=self.sessions[conversation])
        return str(response.text)

    def report(self, conversation: str = CONVERSATION) -> ProviderReport | None:
        return self.provider.report(conversation)

    async def stored(self) -> str:
        """Everything each session keeps (its history provider's messages), as JSON."""
        return "\n".join(
            json.dumps(session.to_dict(), default=str) for session in self.sessions.values()
        )


@asynccontextmanager
async def _agent_framework(
    chat: FakeChat, manifest: composer.Manifest, placement: Placement | None
) -> AsyncIterator[Agent]:
    from openai import AsyncOpenAI

    # the client the agent's chat client uses (the Agent Framework does not close it)
    async with AsyncOpenAI(base_url=chat.base_url, api_key="test") as openai:
        agent = AgentFrameworkAgent(openai, manifest, placement)
        async with agent.provider, agent.agent:
            yield agent


class OpenAIAgentsAgent:
    """An OpenAI Agents SDK ``Agent`` run with ``ComposerInputFilter`` (tracing off): one
    ``SQLiteSession`` per conversation, and one filter over the manifest, which owns its
    ``Composer``. (Filters sharing one ``Composer`` are in ``test_run_identity.py``.)"""

    def __init__(
        self, openai: Any, manifest: composer.Manifest, placement: Placement | None
    ) -> None:
        from agents import Agent as SdkAgent
        from agents import OpenAIChatCompletionsModel, function_tool

        self.manifest = manifest
        self.placement = placement
        model = OpenAIChatCompletionsModel(model=MODEL, openai_client=openai)
        self.agent: Any = SdkAgent(
            name=NAME, instructions=SYSTEM, model=model, tools=[function_tool(disk_usage)]
        )
        self.sessions: dict[str, tuple[Any, Any]] = {}

    async def ask(self, text: str, conversation: str = CONVERSATION) -> str:
        from agents import RunConfig, Runner, SQLiteSession

        from composer.integrations.openai_agents import ComposerInputFilter

        if conversation not in self.sessions:
            session = SQLiteSession(conversation)
            composing = ComposerInputFilter(
                self.manifest, session, placement=self.placement, metadata={"team": TEAM}
            )
            self.sessions[conversation] = (session, composing)
        session, composing = self.sessions[conversation]
        config = RunConfig(call_model_input_filter=composing, tracing_disabled=True)
        result = await Runner.run(self.agent, text, session=session, run_config=config)
        return str(result.final_output)

    def report(self, conversation: str = CONVERSATION) -> ProviderReport | None:
        if conversation not in self.sessions:
            return None
        report: ProviderReport | None = self.sessions[conversation][1].report
        return report

    async def stored(self) -> str:
        """Everything each session keeps, as JSON."""
        return "\n".join(
            [json.dumps(await session.get_items()) for session, _ in self.sessions.values()]
        )

    async def aclose(self) -> None:
        """Close each conversation's filter (and so its Composer) and session."""
        for session, composing in self.sessions.values():
            await composing.aclose()
            session.close()


@asynccontextmanager
async def _openai_agents(
    chat: FakeChat, manifest: composer.Manifest, placement: Placement | None
) -> AsyncIterator[Agent]:
    from openai import AsyncOpenAI

    async with AsyncOpenAI(base_url=chat.base_url, api_key="test") as openai:
        agent = OpenAIAgentsAgent(openai, manifest, placement)
        try:
            yield agent
        finally:
            await agent.aclose()


FRAMEWORKS = [
    Framework(
        name="langchain",
        module="composer.integrations.langchain",
        needs=("langchain", "langchain_openai"),
        hidden="langchain.agents.middleware",
        extra="langchain",
        example="langchain.py",
        context_message=False,
        writes_call=False,
        keeps_instructions=False,
        start=_langchain,
    ),
    Framework(
        name="pydantic_ai",
        module="composer.integrations.pydantic_ai",
        needs=("pydantic_ai", "openai"),
        hidden="pydantic_ai",
        extra="pydantic-ai",
        example="pydantic_ai.py",
        context_message=False,
        writes_call=False,
        keeps_instructions=True,
        start=_pydantic_ai,
    ),
    Framework(
        name="agent_framework",
        module="composer.integrations.agent_framework",
        needs=("agent_framework_openai",),
        hidden="agent_framework",
        extra="agent-framework",
        example="agent_framework.py",
        context_message=True,
        writes_call=True,
        keeps_instructions=False,
        start=_agent_framework,
    ),
    Framework(
        name="openai_agents",
        module="composer.integrations.openai_agents",
        needs=("agents",),
        hidden="agents",
        extra="openai-agents",
        example="openai_agents.py",
        context_message=True,
        writes_call=True,
        keeps_instructions=False,
        start=_openai_agents,
    ),
]
"""Every framework composer integrates, as the contract test runs them."""
