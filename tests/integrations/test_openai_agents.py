"""What only the OpenAI Agents SDK integration does, beyond the contract (``test_contract.py``):
a filter keyed by the input retried is the same turn, and a run that ends on a tool writes its
output back at the next turn. Tracing is off in every run (``RunConfig(tracing_disabled=True)``):
nothing is exported anywhere."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "agents",
    reason="the OpenAI Agents SDK is not installed (pip install 'context-composer[openai-agents]')",
)

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    SQLiteSession,
    function_tool,
)
from fakechat import MODEL, FakeChat, serve_chat
from openai import AsyncOpenAI

from composer.integrations.openai_agents import ComposerInputFilter

from .frameworks import NAME, SYSTEM, disk_usage, load, system_of


@pytest.fixture
async def chat() -> AsyncIterator[tuple[FakeChat, AsyncOpenAI]]:
    """A FakeChat and the OpenAI client the agents use on it."""
    with serve_chat() as server:
        async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
            yield server, client


def agent(openai: AsyncOpenAI, **kwargs: Any) -> Agent[Any]:
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=openai)
    return Agent(
        name=NAME, instructions=SYSTEM, model=model, tools=[function_tool(disk_usage)], **kwargs
    )


async def test_a_retry_of_the_same_input_is_the_same_turn(
    tmp_path: Path, chat: tuple[FakeChat, AsyncOpenAI]
) -> None:
    server, openai = chat
    manifest = load(tmp_path, "  - {name: probe, type: probe}\n")
    async with ComposerInputFilter(manifest, "stateless") as composing:
        config = RunConfig(call_model_input_filter=composing, tracing_disabled=True)
        for text in ("Check the db1 disk", "Check the db1 disk", "Check the db2 disk"):
            await Runner.run(agent(openai), text, run_config=config)
    await manifest.aclose()
    assert [r.text().count("PROBE call 1") for r in server.requests] == [1, 1, 0]
    assert "PROBE call 2" in server.requests[2].text()


async def test_a_run_that_ends_on_a_tool_writes_it_back_at_the_next_turn(
    tmp_path: Path, chat: tuple[FakeChat, AsyncOpenAI]
) -> None:
    server, openai = chat
    manifest = load(tmp_path)
    server.reply_tool_call("disk_usage", {"host": "db3"})
    session = SQLiteSession("thread-10")
    async with ComposerInputFilter(manifest, session) as composing:
        ops = agent(openai, tool_use_behavior="stop_on_first_tool")
        config = RunConfig(call_model_input_filter=composing, tracing_disabled=True)
        answer = await Runner.run(ops, "Check the db3 disk", session=session, run_config=config)
        assert len(server.requests) == 1  # no model call after the tool
        await Runner.run(ops, "Anything else on the db3 disk?", session=session, run_config=config)
    session.close()
    await manifest.aclose()
    assert answer.final_output == "db3: disk 91% full"
    system = system_of(server.requests[1])  # written back before this turn's compose
    assert "NOTES-n4:" in system
    assert "db3: disk 91% full" in system
