"""A real Microsoft Agent Framework ``Agent`` (its OpenAI chat-completions client) composing
its turns through ``ComposerContextProvider``, against FakeChat on 127.0.0.1."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

pytest.importorskip(
    "agent_framework_openai",
    reason="the Agent Framework is not installed (pip install 'context-composer[agent-framework]')",
)

from agent_framework import Agent, AgentSession, tool
from agent_framework.openai import OpenAIChatCompletionClient
from fakechat import MODEL, FakeChat, Request, prefix_breaks, serve_chat
from openai import AsyncOpenAI

import composer
from builtin_providers.memory import provider_type as memory_type
from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.integrations import Composer
from composer.integrations.agent_framework import ComposerContextProvider
from composer.manifest import ProviderConfig
from composer.plugin import BuildContext, ProviderType
from composer.turn import CONTEXT_BLOCK

ROOT = Path(__file__).parents[2]
SYSTEM = "You are the on-call assistant."
RULES = "RULES for ops: put the exact command first."
MANIFEST = """\
version: 1
providers:
  - name: rules
    type: static
    stable: true
    text: "RULES for {{ branch.name }}: put the exact command first."
  - name: notes
    type: memory
    source: {sqlite: notes.sqlite}
    query: {text: "{{ instruction.text }}"}
    header: "NOTES:"
    template: "- {{ item.content }}"
    writeback: true
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
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(MANIFEST) + extra)
    return composer.load_manifest(path, types=ProviderTypes([static_type, memory_type, PROBE]))


async def remember(manifest: composer.Manifest, note: str) -> None:
    """Put ``note`` in the manifest's memory store, as a writeback of another conversation."""
    async with Composer(manifest) as composing:
        turn = await composing.compose("earlier", note)
        await composing.writeback(turn, [note])


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    with serve_chat() as server:
        yield server


@pytest.fixture
async def openai(chat: FakeChat) -> AsyncIterator[AsyncOpenAI]:
    """The OpenAI client the agents' chat client uses (the Agent Framework does not close it)."""
    async with AsyncOpenAI(base_url=chat.base_url, api_key="test") as client:
        yield client


@tool
def disk_usage(host: str) -> str:
    """How full the disks of ``host`` are."""
    return f"{host}: disk 91% full"


def agent(openai: AsyncOpenAI, provider: ComposerContextProvider) -> Agent:
    client = OpenAIChatCompletionClient(model=MODEL, async_client=openai)
    return Agent(
        client=client,
        name="ops",
        instructions=SYSTEM,
        context_providers=[provider],
        tools=[disk_usage],
    )


def stored(session: AgentSession) -> str:
    """Everything the session keeps (its history provider's messages), as JSON."""
    return json.dumps(session.to_dict(), default=str)


def context_messages(request: Request) -> list[int]:
    """Positions of the messages that are a composed context block."""
    return [
        i
        for i, m in enumerate(request.messages)
        if isinstance(m.get("content"), str) and CONTEXT_BLOCK.match(m["content"])
    ]


async def test_the_blocks_reach_each_model_request_once_and_the_session_stores_none(
    tmp_path: Path, chat: FakeChat, openai: AsyncOpenAI
) -> None:
    manifest = load(tmp_path)
    await remember(manifest, "NOTE: db1 disk was replaced in May")
    async with Composer(manifest) as composing:
        provider = ComposerContextProvider(composing)
        async with agent(openai, provider) as ops:
            session = ops.create_session(session_id="thread-7")
            first = await ops.run("Is the db1 disk healthy?", session=session)
            report = provider.report(session)
            second = await ops.run("And db2?", session=session)
    await manifest.aclose()
    assert first.text == second.text == "fixed answer"
    assert report is not None
    assert [(o.name, o.outcome) for o in report.outcomes] == [
        ("rules", "fired"),
        ("notes", "fired"),
    ]
    sent = chat.requests[0].messages[0]
    assert sent == {"role": "system", "content": SYSTEM + "\n" + "\n".join(report.blocks)}
    for request in chat.requests:
        assert request.text().count(RULES) == 1
        assert request.messages[0]["content"].startswith(SYSTEM + "\n" + RULES)
    assert chat.requests[0].text().count("NOTE: db1 disk was replaced in May") == 1
    assert prefix_breaks(chat.requests) == ["request 2 does not begin with request 1"]  # adr
    kept = stored(session)
    assert "Is the db1 disk healthy?" in kept
    assert "And db2?" in kept
    assert "RULES" not in kept
    assert "NOTES:" not in kept
    assert provider.report("thread-7") is not None
    assert provider.report("thread-7") != report  # the second turn's


async def test_a_run_is_composed_once_for_all_its_model_calls(
    tmp_path: Path, chat: FakeChat, openai: AsyncOpenAI
) -> None:
    manifest = load(tmp_path, "  - {name: probe, type: probe}\n")
    chat.reply_tool_call("disk_usage", {"host": "db1"})
    provider = ComposerContextProvider(manifest)
    async with provider, agent(openai, provider) as ops:
        session = ops.create_session()
        await ops.run("Check the db1 disk", session=session)
        await ops.run("Thanks", session=session)
    await manifest.aclose()
    first, loop, later = chat.requests
    assert len(loop.messages) == len(first.messages) + 2  # the tool call and its output
    assert first.messages[0] == loop.messages[0]
    assert first.text().count("PROBE call 1") == loop.text().count("PROBE call 1") == 1
    assert "PROBE call 2" in later.text()
    assert "PROBE call 1" not in later.text()


async def test_stable_prefix_keeps_the_instructions_and_puts_the_context_before_the_user(
    tmp_path: Path, chat: FakeChat, openai: AsyncOpenAI
) -> None:
    manifest = load(tmp_path)
    await remember(manifest, "NOTE: db1 disk was replaced in May")
    chat.reply_tool_call("disk_usage", {"host": "db1"})
    provider = ComposerContextProvider(manifest, placement="stable_prefix")
    async with provider, agent(openai, provider) as ops:
        session = ops.create_session()
        await ops.run("Is the db1 disk full?", session=session)
        await ops.run("What did the disk check say about db1?", session=session)
    await manifest.aclose()
    first, loop, later = chat.requests
    assert first.messages[0] == loop.messages[0] == later.messages[0]
    assert first.messages[0] == {"role": "system", "content": SYSTEM + "\n" + RULES}
    for request in chat.requests:  # each model call: the block once, right before the user
        (at,) = context_messages(request)
        newest_user = max(i for i, m in enumerate(request.messages) if m["role"] == "user")
        assert at == newest_user - 1
        assert CONTEXT_BLOCK.fullmatch(request.messages[at]["content"])
    assert "replaced in May" in first.messages[context_messages(first)[0]]["content"]
    assert "91% full" not in first.text()  # the tool has not run yet
    assert "91% full" in later.messages[context_messages(later)[0]]["content"]
    assert loop.messages[: len(first.messages)] == first.messages  # within the turn: all of it
    assert prefix_breaks([first, later]) == []  # turn to turn: all but the context block
    assert "<context id=" not in stored(session)
    assert "NOTES:" not in stored(session)


async def test_a_tool_result_reaches_memory_writeback_and_a_later_turn(
    tmp_path: Path, chat: FakeChat, openai: AsyncOpenAI
) -> None:
    manifest = load(tmp_path)
    chat.reply_tool_call("disk_usage", {"host": "db1"})
    async with ComposerContextProvider(manifest) as provider, agent(openai, provider) as ops:
        await ops.run("Check the db1 disk", session=ops.create_session())
        await ops.run("What about the db1 disk?", session=ops.create_session())
    await manifest.aclose()
    assert chat.requests[1].messages[-1]["content"] == "db1: disk 91% full"  # the tool ran
    system = chat.requests[2].messages[0]["content"]  # a new session: only memory can tell
    assert "NOTES:" in system
    assert "db1: disk 91% full" in system
    assert '"function": "disk_usage"' in system or "'function': 'disk_usage'" in system


async def test_a_provider_that_times_out_leaves_the_run_answering(
    tmp_path: Path, chat: FakeChat, openai: AsyncOpenAI
) -> None:
    manifest = load(tmp_path, "  - {name: status, type: probe, sleep_s: 30, timeout_s: 0.2}\n")
    async with ComposerContextProvider(manifest) as provider, agent(openai, provider) as ops:
        session = ops.create_session()
        started = time.monotonic()
        answer = await ops.run("Is there an outage?", session=session)
        elapsed = time.monotonic() - started
    await manifest.aclose()
    report = provider.report(session)
    assert answer.text == "fixed answer"
    assert elapsed < 10  # the 30 s provider was cut off, not waited for
    assert report is not None
    assert [(o.name, o.outcome) for o in report.outcomes][-1] == ("status", "timeout")
    assert chat.requests[0].text().count(RULES) == 1
    assert "PROBE" not in chat.requests[0].text()


async def test_a_streamed_run_is_composed_and_written_back_like_any_run(
    tmp_path: Path, chat: FakeChat, openai: AsyncOpenAI
) -> None:
    manifest = load(tmp_path)
    await remember(manifest, "NOTE: db7 disk is new")
    chat.reply_tool_call("disk_usage", {"host": "db7"})
    provider = ComposerContextProvider(manifest, placement="stable_prefix")
    async with provider, agent(openai, provider) as ops:
        session = ops.create_session()
        stream = ops.run("Check the db7 disk", session=session, stream=True)
        answer = await stream.get_final_response()
        await ops.run("And the db7 disk now?", session=ops.create_session())
    await manifest.aclose()
    assert answer.text == "fixed answer"
    assert [len(context_messages(r)) for r in chat.requests] == [1, 1, 1]
    (at,) = context_messages(chat.requests[2])
    assert "db7: disk 91% full" in chat.requests[2].messages[at]["content"]
    assert "<context id=" not in stored(session)


def test_without_the_framework_the_import_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "agent_framework", None)  # None: the import fails
    monkeypatch.delitem(sys.modules, "composer.integrations.agent_framework")
    with pytest.raises(
        ImportError, match=re.escape("pip install 'context-composer[agent-framework]'")
    ):
        importlib.import_module("composer.integrations.agent_framework")


def test_the_example_keeps_each_request_a_prefix_of_the_next(
    tmp_path: Path, chat: FakeChat
) -> None:
    """``examples/agent_framework.py --turns 3 --placement stable_prefix``, against FakeChat.

    The example makes one model request per turn (FakeChat answers text). ``prefix_breaks``
    checks that each request begins with the previous one's messages, each the same JSON
    text, once the previous request's context block (a user message of its own) is taken
    out: the system text, the history and the previous user message are byte-identical. And
    each request carries its turn's context block once, right before its newest user message.
    """
    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs, ignore=shutil.ignore_patterns("*.sqlite*"))
    chat.reply("first answer")
    chat.reply("second answer")
    chat.reply("last answer")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "agent_framework.py"),
            *("--base-url", chat.base_url, "--model", MODEL, "--turns", "3"),
            *("--placement", "stable_prefix", "--configs", str(configs)),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "last answer"
    assert len(chat.requests) == 3
    assert prefix_breaks(chat.requests) == []
    for request in chat.requests:
        (at,) = context_messages(request)
        assert at == len(request.messages) - 2
    assert "House rules for platform" in chat.requests[0].messages[0]["content"]
    assert len({json.dumps(r.messages[0]) for r in chat.requests}) == 1
    assert len({r.messages[-2]["content"] for r in chat.requests}) == 3  # the blocks change
