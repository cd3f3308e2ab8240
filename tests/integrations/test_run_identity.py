"""Two teams on one agent, one conversation id (or none): each team's tool result is stored
under its own memory namespace and shown to its own model only, even when team b composes
while team a's run is inside the tool. Every framework runs for real against FakeChat on
127.0.0.1; the store is read back from its SQLite file."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakechat import MODEL, FakeChat, serve_chat

import composer
from builtin_providers.stores import SqliteMemoryStore
from composer.integrations import Composer

SYSTEM = "You are on call."
SECRET = "SECRET-A7 db1 root password rotated to hunter2"
MANIFEST = """\
version: 1
providers:
  - name: notes
    type: memory
    source: {sqlite: team.sqlite}
    namespace: "{{ branch.metadata.team }}"
    header: "NOTES-n4:"
    writeback: true
"""


class Interleaving:
    """Team a's tool: it says it is running, then waits until team b has composed."""

    def __init__(self) -> None:
        self.inside = asyncio.Event()
        self.release = asyncio.Event()

    async def lookup(self, host: str) -> str:
        self.inside.set()
        await self.release.wait()
        return f"{SECRET} ({host})"

    async def play(self, chat: FakeChat, ask: Callable[[str, str], Awaitable[Any]]) -> None:
        """``ask(text, team)`` runs one team's run. Team a's run calls the tool; team b's whole
        run goes while it waits there (requests 0: a, 1: b, 2: a); then team b's later run
        (3) and team a's (4)."""
        chat.reply_tool_call("lookup", {"host": "db1"})
        team_a = asyncio.ensure_future(ask("check db1", "a"))
        await asyncio.wait_for(self.inside.wait(), 60)
        await ask("hello", "b")
        self.release.set()
        await team_a
        await ask("anything new?", "b")
        await ask("anything new?", "a")


def load(tmp_path: Path) -> composer.Manifest:
    path = tmp_path / "teams.yaml"
    path.write_text(MANIFEST, encoding="utf-8")
    return composer.load_manifest(path)


async def namespaces(tmp_path: Path) -> dict[str, str]:
    """Each team's stored items, as JSON text."""
    store = SqliteMemoryStore(tmp_path / "team.sqlite")
    try:
        return {
            team: json.dumps([item.content for item in await store.export(team)])
            for team in ("a", "b")
        }
    finally:
        await store.aclose()


def assert_apart(
    stored: dict[str, str], chat: FakeChat, team_b: tuple[int, ...] = (1, 3), later_a: int = 4
) -> None:
    """Team a's result is in team a's namespace and the model call of team a's later run;
    nowhere in team b's namespace or any of team b's model calls."""
    assert SECRET in stored["a"]
    assert SECRET not in stored["b"]
    for number in team_b:
        assert SECRET not in chat.requests[number].text()
    assert "NOTES-n4:" in chat.requests[later_a].text()
    assert SECRET in chat.requests[later_a].text()


async def test_langchain_runs_without_thread_ids(tmp_path: Path) -> None:
    pytest.importorskip("langchain", reason="LangChain is not installed (the langchain extra)")
    pytest.importorskip("langchain_openai", reason="langchain-openai is not installed")
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    from composer.integrations.langchain import ComposerMiddleware

    manifest = load(tmp_path)
    middleware = ComposerMiddleware(manifest)
    steps = Interleaving()
    lookup = tool(steps.lookup, description="What is known of a host.")
    with serve_chat() as chat:
        async with httpx.AsyncClient() as client:
            model = ChatOpenAI(
                model=MODEL,
                base_url=chat.base_url,
                api_key="x",
                use_responses_api=False,
                http_async_client=client,
            )
            agent = create_agent(model, [lookup], system_prompt=SYSTEM, middleware=[middleware])

            def ask(text: str, team: str) -> Any:
                config: Any = {"metadata": {"team": team}}
                return agent.ainvoke({"messages": [HumanMessage(text)]}, config)

            await steps.play(chat, ask)
    await middleware.aclose()
    await manifest.aclose()
    assert_apart(await namespaces(tmp_path), chat)


async def test_pydantic_ai_conversations_reusing_one_id(tmp_path: Path) -> None:
    pytest.importorskip(
        "pydantic_ai", reason="Pydantic AI is not installed (the pydantic_ai extra)"
    )
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from composer.integrations.pydantic_ai import ComposerCapability

    manifest = load(tmp_path)
    capability = ComposerCapability(manifest)
    steps = Interleaving()
    with serve_chat() as chat:
        provider = OpenAIProvider(base_url=chat.base_url, api_key="x")
        agent = Agent(
            OpenAIChatModel(MODEL, provider=provider),
            instructions=SYSTEM,
            capabilities=[capability],
            tools=[steps.lookup],
        )

        def ask(text: str, team: str) -> Any:
            return agent.run(text, conversation_id="shared-7", metadata={"team": team})

        async with agent:
            await steps.play(chat, ask)
    await capability.aclose()
    await manifest.aclose()
    assert_apart(await namespaces(tmp_path), chat)


async def test_agent_framework_sessions_reusing_one_id(tmp_path: Path) -> None:
    pytest.importorskip("agent_framework_openai", reason="the Agent Framework is not installed")
    from agent_framework import Agent, tool
    from agent_framework.openai import OpenAIChatCompletionClient
    from openai import AsyncOpenAI

    from composer.integrations.agent_framework import ComposerContextProvider

    manifest = load(tmp_path)
    steps = Interleaving()
    lookup = tool(steps.lookup, name="lookup", description="What is known of a host.")
    with serve_chat() as chat:
        async with (
            AsyncOpenAI(base_url=chat.base_url, api_key="x") as openai,
            Composer(manifest) as composing,
        ):
            client = OpenAIChatCompletionClient(model=MODEL, async_client=openai)
            agents = {
                team: Agent(
                    client=client,
                    name="ops",
                    instructions=SYSTEM,
                    context_providers=[ComposerContextProvider(composing, metadata={"team": team})],
                    tools=[lookup],
                )
                for team in ("a", "b")
            }

            def ask(text: str, team: str) -> Any:
                session = agents[team].create_session(session_id="shared-7")
                return agents[team].run(text, session=session)

            await steps.play(chat, ask)
    await manifest.aclose()
    assert_apart(await namespaces(tmp_path), chat)


async def test_openai_agents_filters_sharing_one_composer_and_id(tmp_path: Path) -> None:
    pytest.importorskip("agents", reason="the OpenAI Agents SDK is not installed")
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
    from openai import AsyncOpenAI

    from composer.integrations.openai_agents import ComposerInputFilter

    manifest = load(tmp_path)
    steps = Interleaving()
    lookup = function_tool(steps.lookup, name_override="lookup")
    with serve_chat() as chat:
        async with (
            AsyncOpenAI(base_url=chat.base_url, api_key="x") as openai,
            Composer(manifest) as composing,
        ):
            model = OpenAIChatCompletionsModel(model=MODEL, openai_client=openai)
            agent = Agent(name="ops", instructions=SYSTEM, model=model, tools=[lookup])
            filters = {
                team: ComposerInputFilter(composing, "shared-7", metadata={"team": team})
                for team in ("a", "b")
            }

            def ask(text: str, team: str) -> Any:
                config = RunConfig(call_model_input_filter=filters[team], tracing_disabled=True)
                return Runner.run(agent, text, run_config=config)

            await steps.play(chat, ask)
    await manifest.aclose()
    assert_apart(await namespaces(tmp_path), chat)
