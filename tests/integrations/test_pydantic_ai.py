"""A real Pydantic AI agent (OpenAIChatModel, chat completions) against FakeChat on 127.0.0.1,
with ``ComposerCapability``: what the model was sent, and what the run's message history holds
(``all_messages()``, serialised as Pydantic AI stores it)."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest

pytest.importorskip("pydantic_ai", reason="Pydantic AI is not installed (the pydantic-ai extra)")
pytest.importorskip("openai", reason="openai is not installed (Pydantic AI's OpenAI models)")

from fakechat import FakeChat, Request, context_blocks, serve_chat, split_context
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import composer
from composer.catalog import ProviderTypes
from composer.integrations.pydantic_ai import ComposerCapability
from composer.manifest import ProviderConfig
from composer.plugin import BuildContext, ProviderType

ROOT = Path(__file__).parents[2]
SYSTEM = "You are on call."
MARKERS = ("RULES-r7", "ASKED-t9")
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
    match: substring
    header: "NOTES-n4:"
    writeback: true
  - {name: asked, type: static, text: "ASKED-t9 {{ instruction.text }}"}
"""


class SleepyConfig(ProviderConfig):
    """``type: sleepy``: answers only after a minute (its ``timeout_s`` cancels it first)."""

    type: Literal["sleepy"] = "sleepy"


class Sleepy:
    def __init__(self, config: SleepyConfig) -> None:
        self.name = config.name

    async def provide(self, branch: Any, instruction: Any) -> str:
        await asyncio.sleep(60)
        return "SLEEPY-never"


def _sleepy(config: SleepyConfig, context: BuildContext) -> Sleepy:
    return Sleepy(config)


SLEEPY = ProviderType("sleepy", SleepyConfig, _sleepy, "Sleeps past its timeout.")


def load(tmp_path: Path, extra: str = "") -> composer.Manifest:
    path = tmp_path / "manifest.yaml"
    path.write_text(MANIFEST + extra, encoding="utf-8")
    return composer.load_manifest(path, types=ProviderTypes([SLEEPY]).load_entry_points())


def disk(host: str) -> dict[str, str]:
    """How full the disk of a host is."""
    return {"host": host, "disk": "DISK-d2 91% full"}


class Agent:
    """An agent with the capability on one FakeChat (entered: ``async with``); it keeps each
    conversation's history."""

    def __init__(self, chat: FakeChat, capability: ComposerCapability) -> None:
        provider = OpenAIProvider(base_url=chat.base_url, api_key="any")
        self.agent = PydanticAgent(
            OpenAIChatModel("gpt-4.1-mini", provider=provider),
            instructions=SYSTEM,
            capabilities=[capability],
            name="platform",
            tools=[disk],
        )
        self.history: dict[str, list[ModelMessage]] = {}

    async def __aenter__(self) -> Agent:
        await self.agent.__aenter__()  # its HTTP client is closed on the way out
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.agent.__aexit__(*exc)

    async def ask(self, text: str, conversation: str = "c-9") -> str:
        result = await self.agent.run(
            text,
            message_history=self.history.get(conversation),
            conversation_id=conversation,
            metadata={"team": "payments"},
        )
        self.history[conversation] = result.all_messages()
        return str(result.output)

    def stored(self) -> str:
        """Every conversation's message history, serialised."""
        return "\n".join(
            ModelMessagesTypeAdapter.dump_json(history).decode()
            for history in self.history.values()
        )


def system_of(request: Request) -> str:
    first = request.messages[0]
    assert first["role"] == "system"
    return str(first["content"])


def without_context(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with the context block taken off the front of the last one's text."""
    *history, newest = messages
    parts = split_context(newest["content"])
    assert parts is not None
    return [*history, {**newest, "content": parts[1]}]


async def test_the_blocks_reach_each_model_request_once_and_never_the_history(
    tmp_path: Path,
) -> None:
    manifest = load(tmp_path)
    capability = ComposerCapability(manifest)
    with serve_chat() as chat:
        async with Agent(chat, capability) as agent:
            await agent.ask("How do I roll back?")
            answer = await agent.ask("Is the database failover due?")
            report = capability.last_report("c-9")
            local = composer.Branch(SYSTEM + "\n", name="platform", metadata={"team": "payments"})
            local.id = "c-9"
            composer.attach(local, manifest)
            expected = await composer.prepare_turn(local, "Is the database failover due?")
    await capability.aclose()
    await manifest.aclose()
    assert answer == "fixed answer"
    assert len(chat.requests) == 2
    for request in chat.requests:
        assert [request.text().count(marker) for marker in MARKERS] == [1, 1]
    # ADR placement: the system message is prepare_turn's fold of the agent's instructions
    assert system_of(chat.requests[1]) == expected.guidance
    assert "RULES-r7 for platform of payments in c-9." in system_of(chat.requests[1])
    assert report == expected.report
    assert report is not None
    assert [(o.name, o.outcome) for o in report.outcomes] == [
        ("rules", "fired"),
        ("notes", "empty"),
        ("asked", "fired"),
    ]
    stored = agent.stored()
    assert "How do I roll back?" in stored  # the history is there, composer's blocks are not
    assert SYSTEM in stored
    assert not any(marker in stored for marker in MARKERS)


async def test_stable_prefix_keeps_system_text_and_history_and_puts_context_last(
    tmp_path: Path,
) -> None:
    manifest = load(tmp_path)
    capability = ComposerCapability(manifest, placement="stable_prefix")
    with serve_chat() as chat:
        async with Agent(chat, capability) as agent:
            for question in ("How do I roll back?", "Is the failover due?", "Who is on call?"):
                await agent.ask(question)
    await capability.aclose()
    await manifest.aclose()
    first, *later = chat.requests
    assert system_of(first) == f"{SYSTEM}\nRULES-r7 for platform of payments in c-9."
    for previous, request in zip(chat.requests, later, strict=False):
        assert request.messages[0] == first.messages[0]
        assert without_context(previous.messages) == request.messages[: len(previous.messages)]
    for request in chat.requests:
        newest = request.messages[-1]
        assert newest["role"] == "user"
        [(source, text)] = context_blocks(newest["content"])
        assert (source, text.partition(" ")[0]) == ("asked", "ASKED-t9")
        assert request.text().count("ASKED-t9") == 1
    stored = agent.stored()
    assert not any(marker in stored for marker in MARKERS)


async def test_a_tool_result_is_written_back_and_a_later_turn_finds_it(tmp_path: Path) -> None:
    manifest = load(tmp_path)
    capability = ComposerCapability(manifest)
    with serve_chat() as chat:
        async with Agent(chat, capability) as agent:
            chat.reply_tool_call("disk", {"host": "db1"})
            await agent.ask("db1")  # the memory query: the result matches it
            later = await agent.ask("db1", conversation="c-10")  # no tool return in its history
    await capability.aclose()
    await manifest.aclose()
    assert later == "fixed answer"
    calling, answering, other = chat.requests
    assert answering.messages[-1]["role"] == "tool"
    # the turn's second model call reuses its composition: the stored result is not in it yet
    assert system_of(answering) == system_of(calling)
    assert "DISK-d2" not in system_of(answering)
    assert "NOTES-n4:" in system_of(other)
    assert "DISK-d2 91% full" in system_of(other)
    assert [m["role"] for m in other.messages] == ["system", "user"]


async def test_a_provider_that_times_out_leaves_the_turn_running(tmp_path: Path) -> None:
    manifest = load(tmp_path, "  - {name: slow, type: sleepy, timeout_s: 0.2}\n")
    capability = ComposerCapability(manifest)
    with serve_chat() as chat:
        async with Agent(chat, capability) as agent:
            answer = await agent.ask("How do I roll back?")
        report = capability.last_report("c-9")
    await capability.aclose()
    await manifest.aclose()
    assert answer == "fixed answer"
    assert report is not None
    outcomes = {o.name: o.outcome for o in report.outcomes}
    assert outcomes == {"rules": "fired", "notes": "empty", "asked": "fired", "slow": "timeout"}
    assert report.failed == ["slow"]
    assert "ASKED-t9" in chat.requests[0].text()
    assert "SLEEPY" not in chat.requests[0].text()


def test_without_pydantic_ai_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    monkeypatch.delitem(sys.modules, "composer.integrations.pydantic_ai")
    with pytest.raises(ImportError, match=r"pip install 'context-composer\[pydantic-ai\]'"):
        importlib.import_module("composer.integrations.pydantic_ai")


def test_the_example_keeps_each_request_a_prefix_of_the_next(tmp_path: Path) -> None:
    """examples/pydantic_ai.py, 3 turns with stable_prefix against FakeChat.

    For each request after the first, with P the previous request's messages whose last
    (user) message has its context block (``<context id=…>`` … ``</context id=…>`` and the newline after
    it) taken off: the request's first ``len(P)`` messages equal P. So the system message is
    the same and the history is as it was sent, byte for byte (the JSON the server received,
    message by message), and only the newest user message carries the turn's context."""
    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs, ignore=shutil.ignore_patterns("memory.sqlite*"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_API_KEY", None)
    with serve_chat() as chat:
        for number in range(3):
            chat.reply(f"answer {number + 1}")
        run = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "pydantic_ai.py"), "--base-url",
             chat.base_url, "--model", "gpt-4.1-mini", "--turns", "3", "--placement",
             "stable_prefix", "--configs", str(configs)],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "answer 3"
    assert len(chat.requests) == 3
    for previous, request in zip(chat.requests, chat.requests[1:], strict=False):
        assert without_context(previous.messages) == request.messages[: len(previous.messages)]
        assert json.dumps(request.messages[0]) == json.dumps(previous.messages[0])
    blocks = [split_context(request.messages[-1]["content"]) for request in chat.requests]
    assert len(set(blocks)) == 3  # each turn's runbook and memory blocks differ
    assert "House rules for platform" in system_of(chat.requests[0])
