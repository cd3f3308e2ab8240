"""A real LangChain ``create_agent`` agent (ChatOpenAI, chat completions) against FakeChat on
127.0.0.1, with ``ComposerMiddleware``: what the model was sent, and what the thread stored
(every checkpoint of an in-memory saver)."""

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

pytest.importorskip("langchain", reason="LangChain is not installed (the langchain extra)")
pytest.importorskip("langchain_openai", reason="langchain-openai is not installed")

from fakechat import FakeChat, Request, context_blocks, serve_chat, split_context
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

import composer
from composer.catalog import ProviderTypes
from composer.integrations.langchain import ComposerMiddleware
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


@tool
def disk(host: str) -> dict[str, str]:
    """How full the disk of a host is."""
    return {"host": host, "disk": "DISK-d2 91% full"}


class Agent:
    """An agent with the middleware on one FakeChat, and the thread's checkpoints."""

    def __init__(self, chat: FakeChat, middleware: ComposerMiddleware) -> None:
        model = ChatOpenAI(
            model="gpt-4.1-mini", base_url=chat.base_url, api_key="any", use_responses_api=False
        )
        self.saver = InMemorySaver()
        self.agent = create_agent(
            model,
            [disk],
            system_prompt=SYSTEM,
            middleware=[middleware],
            checkpointer=self.saver,
            name="platform",
        )

    async def ask(self, text: str, thread: str = "t-9") -> str:
        config: Any = {"configurable": {"thread_id": thread}, "metadata": {"team": "payments"}}
        state = await self.agent.ainvoke({"messages": [HumanMessage(text)]}, config)
        return str(state["messages"][-1].text)

    def stored(self) -> str:
        """Every checkpoint of every thread, as text."""
        return "\n".join(repr(saved) for saved in self.saver.list(None))


def system_of(request: Request) -> str:
    first = request.messages[0]
    assert first["role"] == "system"
    return str(first["content"])


async def test_the_blocks_reach_each_model_call_once_and_never_the_thread(
    tmp_path: Path,
) -> None:
    manifest = load(tmp_path)
    middleware = ComposerMiddleware(manifest)
    with serve_chat() as chat:
        agent = Agent(chat, middleware)
        await agent.ask("How do I roll back?")
        answer = await agent.ask("Is the database failover due?")
        report = middleware.last_report("t-9")
        local = composer.Branch(SYSTEM + "\n", name="platform", metadata={"team": "payments"})
        local.id = "t-9"
        composer.attach(local, manifest)
        expected = await composer.prepare_turn(local, "Is the database failover due?")
    await middleware.aclose()
    await manifest.aclose()
    assert answer == "fixed answer"
    assert len(chat.requests) == 2
    for request in chat.requests:
        assert [request.text().count(marker) for marker in MARKERS] == [1, 1]
    # ADR placement: the system message is prepare_turn's fold of the agent's system prompt
    assert system_of(chat.requests[1]) == expected.guidance
    assert "RULES-r7 for platform of payments in t-9." in system_of(chat.requests[1])
    assert report == expected.report
    assert report is not None
    assert [(o.name, o.outcome) for o in report.outcomes] == [
        ("rules", "fired"),
        ("notes", "empty"),
        ("asked", "fired"),
    ]
    stored = agent.stored()
    assert "How do I roll back?" in stored  # the thread is there, composer's blocks are not
    assert not any(marker in stored for marker in MARKERS)


async def test_stable_prefix_keeps_system_text_and_history_and_puts_context_last(
    tmp_path: Path,
) -> None:
    manifest = load(tmp_path)
    middleware = ComposerMiddleware(manifest, placement="stable_prefix")
    with serve_chat() as chat:
        agent = Agent(chat, middleware)
        for question in ("How do I roll back?", "Is the failover due?", "Who is on call?"):
            await agent.ask(question)
    await middleware.aclose()
    await manifest.aclose()
    first, *later = chat.requests
    assert system_of(first) == f"{SYSTEM}\nRULES-r7 for platform of payments in t-9."
    for previous, request in zip(chat.requests, later, strict=False):
        assert request.messages[0] == first.messages[0]
        assert without_context(previous.messages) == request.messages[: len(previous.messages)]
    for request in chat.requests:
        newest = request.messages[-1]
        assert newest["role"] == "user"
        [(source, text)] = context_blocks(newest["content"])
        assert (source, text.partition(" ")[0]) == ("asked", "ASKED-t9")
        assert request.text().count("ASKED-t9") == 1
    assert "ASKED-t9" not in agent.stored()


def without_context(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with the context block taken off the front of the last one's text."""
    *history, newest = messages
    parts = split_context(newest["content"])
    assert parts is not None
    return [*history, {**newest, "content": parts[1]}]


async def test_a_tool_result_is_written_back_and_a_later_turn_finds_it(tmp_path: Path) -> None:
    manifest = load(tmp_path)
    middleware = ComposerMiddleware(manifest)
    with serve_chat() as chat:
        agent = Agent(chat, middleware)
        chat.reply_tool_call("disk", {"host": "db1"})
        await agent.ask("db1")  # the memory query: the result matches it
        later = await agent.ask("db1", thread="t-10")  # another thread: no tool message in it
    await middleware.aclose()
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


async def test_a_run_without_a_thread_id_is_a_branch_of_its_own(tmp_path: Path) -> None:
    """No ``thread_id``: each run composes on a branch no other run shares (no ``default``),
    and its state keeps no trace of composer (the run token is private)."""
    manifest = load(tmp_path)
    middleware = ComposerMiddleware(manifest)
    with serve_chat() as chat:
        model = ChatOpenAI(
            model="gpt-4.1-mini", base_url=chat.base_url, api_key="any", use_responses_api=False
        )  # no checkpointer: nothing needs a thread
        agent = create_agent(
            model, [disk], system_prompt=SYSTEM, middleware=[middleware], name="platform"
        )
        config: Any = {"metadata": {"team": "payments"}}
        states = [
            await agent.ainvoke({"messages": [HumanMessage("How do I roll back?")]}, config)
            for _ in range(2)
        ]
    await middleware.aclose()
    await manifest.aclose()
    first, second = (system_of(request) for request in chat.requests)
    assert "RULES-r7 for platform of payments in conversation-" in first
    assert "in default." not in first + second
    assert first != second  # two branch ids
    assert [sorted(state) for state in states] == [["messages"], ["messages"]]


async def test_a_provider_that_times_out_leaves_the_turn_running(tmp_path: Path) -> None:
    manifest = load(tmp_path, "  - {name: slow, type: sleepy, timeout_s: 0.2}\n")
    middleware = ComposerMiddleware(manifest)
    with serve_chat() as chat:
        answer = await Agent(chat, middleware).ask("How do I roll back?")
        report = middleware.last_report("t-9")
    await middleware.aclose()
    await manifest.aclose()
    assert answer == "fixed answer"
    assert report is not None
    outcomes = {o.name: o.outcome for o in report.outcomes}
    assert outcomes == {"rules": "fired", "notes": "empty", "asked": "fired", "slow": "timeout"}
    assert report.failed == ["slow"]
    assert "ASKED-t9" in chat.requests[0].text()
    assert "SLEEPY" not in chat.requests[0].text()


def test_without_langchain_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain.agents.middleware", None)
    monkeypatch.delitem(sys.modules, "composer.integrations.langchain")
    with pytest.raises(ImportError, match=r"pip install 'context-composer\[langchain\]'"):
        importlib.import_module("composer.integrations.langchain")


def test_the_example_keeps_each_request_a_prefix_of_the_next(tmp_path: Path) -> None:
    """examples/langchain.py, 3 turns with stable_prefix against FakeChat.

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
            [sys.executable, str(ROOT / "examples" / "langchain.py"), "--base-url",
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
