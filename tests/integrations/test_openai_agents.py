"""A real OpenAI Agents SDK agent (``OpenAIChatCompletionsModel`` on an ``AsyncOpenAI`` client)
composing its turns through ``ComposerInputFilter``, against FakeChat on 127.0.0.1. Tracing is
off in every run (``RunConfig(tracing_disabled=True)``): nothing is exported anywhere."""

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
from fakechat import MODEL, FakeChat, Request, prefix_breaks, serve_chat
from openai import AsyncOpenAI

import composer
from builtin_providers.memory import provider_type as memory_type
from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.integrations import Composer
from composer.integrations.openai_agents import ComposerInputFilter
from composer.manifest import ProviderConfig
from composer.plugin import BuildContext, ProviderType
from composer.turn import CONTEXT_BLOCK

ROOT = Path(__file__).parents[2]
LOOPBACK_ONLY = """
import socket, sys

_connect = socket.socket.connect


def _loopback_only(self, address):
    if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1"):
        sys.stderr.write(f"BLOCKED connect {address!r}\\n")
        raise OSError("only loopback in this test")
    return _connect(self, address)


def _loopback_names(host, *args, **kwargs):
    if host not in ("127.0.0.1", "::1", "localhost", None):
        sys.stderr.write(f"BLOCKED lookup {host!r}\\n")
        raise socket.gaierror("only loopback in this test")
    return _getaddrinfo(host, *args, **kwargs)


_getaddrinfo = socket.getaddrinfo
socket.socket.connect = _loopback_only
socket.getaddrinfo = _loopback_names
"""
"""A child's ``sitecustomize``: any connection off loopback is refused and reported."""
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
    async with AsyncOpenAI(base_url=chat.base_url, api_key="test") as client:
        yield client


@function_tool
def disk_usage(host: str) -> str:
    """How full the disks of ``host`` are."""
    return f"{host}: disk 91% full"


def agent(openai: AsyncOpenAI, **kwargs: Any) -> Agent[Any]:
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=openai)
    return Agent(name="ops", instructions=SYSTEM, model=model, tools=[disk_usage], **kwargs)


async def run(
    ops: Agent[Any], text: str, session: SQLiteSession, composing: ComposerInputFilter
) -> str:
    config = RunConfig(call_model_input_filter=composing, tracing_disabled=True)
    result = await Runner.run(ops, text, session=session, run_config=config)
    return str(result.final_output)


async def stored(session: SQLiteSession) -> str:
    """Everything the session keeps, as JSON."""
    return json.dumps(await session.get_items())


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
    session = SQLiteSession("thread-7")
    async with Composer(manifest) as composing:
        composing_filter = ComposerInputFilter(composing, session)
        ops = agent(openai)
        first = await run(ops, "Is the db1 disk healthy?", session, composing_filter)
        report = composing_filter.report
        second = await run(ops, "And db2?", session, composing_filter)
        kept = await stored(session)
    session.close()
    await manifest.aclose()
    assert first == second == "fixed answer"
    assert report is not None
    assert [(o.name, o.outcome) for o in report.outcomes] == [
        ("rules", "fired"),
        ("notes", "fired"),
    ]
    sent = chat.requests[0].messages[0]
    assert sent == {"content": SYSTEM + "\n" + "\n".join(report.blocks), "role": "system"}
    for request in chat.requests:
        assert request.text().count(RULES) == 1
        assert request.messages[0]["content"].startswith(SYSTEM + "\n" + RULES)
    assert chat.requests[0].text().count("NOTE: db1 disk was replaced in May") == 1
    assert prefix_breaks(chat.requests) == ["request 2 does not begin with request 1"]  # adr
    assert "Is the db1 disk healthy?" in kept
    assert "And db2?" in kept
    assert "RULES" not in kept
    assert "NOTES:" not in kept
    assert composing_filter.report is not report  # the second turn's


async def test_a_turn_is_composed_once_for_all_its_model_calls(
    tmp_path: Path, chat: FakeChat, openai: AsyncOpenAI
) -> None:
    manifest = load(tmp_path, "  - {name: probe, type: probe}\n")
    chat.reply_tool_call("disk_usage", {"host": "db1"})
    session = SQLiteSession("thread-8")
    async with ComposerInputFilter(manifest, session) as composing:
        ops = agent(openai)
        await run(ops, "Check the db1 disk", session, composing)
        await run(ops, "Thanks", session, composing)
    session.close()
    await manifest.aclose()
    first, loop, later = chat.requests
    assert len(loop.messages) == len(first.messages) + 2  # the tool call and its output
    assert first.messages[0] == loop.messages[0]
    assert first.text().count("PROBE call 1") == loop.text().count("PROBE call 1") == 1
    assert "PROBE call 2" in later.text()
    assert "PROBE call 1" not in later.text()


async def test_a_retry_of_the_same_input_is_the_same_turn(
    tmp_path: Path, chat: FakeChat, openai: AsyncOpenAI
) -> None:
    manifest = load(tmp_path, "  - {name: probe, type: probe}\n")
    async with ComposerInputFilter(manifest, "stateless") as composing:
        config = RunConfig(call_model_input_filter=composing, tracing_disabled=True)
        for text in ("Check the db1 disk", "Check the db1 disk", "Check the db2 disk"):
            await Runner.run(agent(openai), text, run_config=config)
    await manifest.aclose()
    assert [r.text().count("PROBE call 1") for r in chat.requests] == [1, 1, 0]
    assert "PROBE call 2" in chat.requests[2].text()


async def test_stable_prefix_keeps_the_instructions_and_puts_the_context_before_the_user(
    tmp_path: Path, chat: FakeChat, openai: AsyncOpenAI
) -> None:
    manifest = load(tmp_path)
    await remember(manifest, "NOTE: db1 disk was replaced in May")
    chat.reply_tool_call("disk_usage", {"host": "db1"})
    session = SQLiteSession("thread-9")
    async with ComposerInputFilter(manifest, session, placement="stable_prefix") as composing:
        ops = agent(openai)
        await run(ops, "Is the db1 disk full?", session, composing)
        await run(ops, "What did the disk check say about db1?", session, composing)
        kept = await stored(session)
    session.close()
    await manifest.aclose()
    first, loop, later = chat.requests
    assert first.messages[0] == loop.messages[0] == later.messages[0]
    assert first.messages[0] == {"content": SYSTEM + "\n" + RULES, "role": "system"}
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
    assert "<context id=" not in kept
    assert "NOTES:" not in kept


async def test_a_tool_result_reaches_memory_writeback_and_a_later_turn(
    tmp_path: Path, chat: FakeChat, openai: AsyncOpenAI
) -> None:
    manifest = load(tmp_path)
    chat.reply_tool_call("disk_usage", {"host": "db1"})
    async with Composer(manifest) as composing:
        ops = agent(openai)
        one, other = SQLiteSession("one"), SQLiteSession("other")
        await run(ops, "Check the db1 disk", one, ComposerInputFilter(composing, one))
        await run(ops, "What about the db1 disk?", other, ComposerInputFilter(composing, other))
    one.close()
    other.close()
    await manifest.aclose()
    assert chat.requests[1].messages[-1]["content"] == "db1: disk 91% full"  # the tool ran
    system = chat.requests[2].messages[0]["content"]  # another session: only memory can tell
    assert "NOTES:" in system
    assert "db1: disk 91% full" in system
    assert "disk_usage" in system


async def test_a_run_that_ends_on_a_tool_writes_it_back_at_the_next_turn(
    tmp_path: Path, chat: FakeChat, openai: AsyncOpenAI
) -> None:
    manifest = load(tmp_path)
    chat.reply_tool_call("disk_usage", {"host": "db3"})
    session = SQLiteSession("thread-10")
    async with ComposerInputFilter(manifest, session) as composing:
        ops = agent(openai, tool_use_behavior="stop_on_first_tool")
        answer = await run(ops, "Check the db3 disk", session, composing)
        assert len(chat.requests) == 1  # no model call after the tool
        await run(ops, "Anything else on the db3 disk?", session, composing)
    session.close()
    await manifest.aclose()
    assert answer == "db3: disk 91% full"
    system = chat.requests[1].messages[0]["content"]  # written back before this turn's compose
    assert "NOTES:" in system
    assert "db3: disk 91% full" in system


async def test_a_provider_that_times_out_leaves_the_run_answering(
    tmp_path: Path, chat: FakeChat, openai: AsyncOpenAI
) -> None:
    manifest = load(tmp_path, "  - {name: status, type: probe, sleep_s: 30, timeout_s: 0.2}\n")
    session = SQLiteSession("thread-11")
    async with ComposerInputFilter(manifest, session) as composing:
        started = time.monotonic()
        answer = await run(agent(openai), "Is there an outage?", session, composing)
        elapsed = time.monotonic() - started
        report = composing.report
    session.close()
    await manifest.aclose()
    assert answer == "fixed answer"
    assert elapsed < 10  # the 30 s provider was cut off, not waited for
    assert report is not None
    assert [(o.name, o.outcome) for o in report.outcomes][-1] == ("status", "timeout")
    assert chat.requests[0].text().count(RULES) == 1
    assert "PROBE" not in chat.requests[0].text()


def test_without_the_framework_the_import_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)  # None: the import fails
    monkeypatch.delitem(sys.modules, "composer.integrations.openai_agents")
    with pytest.raises(
        ImportError, match=re.escape("pip install 'context-composer[openai-agents]'")
    ):
        importlib.import_module("composer.integrations.openai_agents")


def test_the_example_keeps_each_request_a_prefix_of_the_next(
    tmp_path: Path, chat: FakeChat
) -> None:
    """``examples/openai_agents.py --turns 3 --placement stable_prefix``, against FakeChat,
    with every connection off loopback refused (and reported).

    The example makes one model request per turn (FakeChat answers text). ``prefix_breaks``
    checks that each request begins with the previous one's messages, each the same JSON
    text, once the previous request's context block (a user message of its own) is taken
    out: the system text, the history and the previous user message are byte-identical. And
    each request carries its turn's context block once, right before its newest user message.
    """
    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs, ignore=shutil.ignore_patterns("*.sqlite*"))
    for answer in ("first answer", "second answer", "last answer"):
        chat.reply(answer)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(LOOPBACK_ONLY)
    path = [str(tmp_path / "site"), str(ROOT), os.environ.get("PYTHONPATH")]
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "openai_agents.py"),
            *("--base-url", chat.base_url, "--model", MODEL, "--turns", "3"),
            *("--placement", "stable_prefix", "--configs", str(configs)),
        ],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, path)),
            "OPENAI_API_KEY": "k",
        },
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "last answer"
    assert "BLOCKED" not in done.stderr  # with a key set, traces would go to OpenAI's API
    assert len(chat.requests) == 3
    assert prefix_breaks(chat.requests) == []
    for request in chat.requests:
        (at,) = context_messages(request)
        assert at == len(request.messages) - 2
    assert "House rules for platform" in chat.requests[0].messages[0]["content"]
    assert len({json.dumps(r.messages[0]) for r in chat.requests}) == 1
    assert len({r.messages[-2]["content"] for r in chat.requests}) == 3  # the blocks change
    assert {r.path for r in chat.requests} == {"/v1/chat/completions"}
