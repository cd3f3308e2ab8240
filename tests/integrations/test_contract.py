"""What every framework integration guarantees, LangChain, Pydantic AI, the Agent Framework and
the OpenAI Agents SDK alike: each a real agent (``frameworks.py``) against FakeChat on
127.0.0.1, checked by what the model was sent and what the framework stored.

A turn is composed once, as ``prepare_turn`` composes it, for all its model calls; the blocks
reach each model call once and never the framework's history; a tool result is written back
and found by a later turn; ``stable_prefix`` keeps the system text and the history a cached
prefix and puts the turn's context last; a provider that times out leaves the run answering;
the import without the framework names the extra to install; and each bundled example keeps
every request a prefix of the next, reaching nothing but loopback.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakechat import MODEL, context_blocks, prefix_breaks, serve_chat, split_context

import composer

from .frameworks import (
    CONVERSATION,
    FRAMEWORKS,
    NAME,
    RULES,
    SYSTEM,
    TEAM,
    Framework,
    context_of,
    load,
    remember,
    system_of,
)

ROOT = Path(__file__).parents[2]
MARKERS = ("RULES-r7", "ASKED-t9")
NOTE = "NOTE: db1 disk was replaced in May"
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


@pytest.fixture(params=FRAMEWORKS, ids=[framework.name for framework in FRAMEWORKS])
def framework(request: pytest.FixtureRequest) -> Framework:
    """Each framework whose packages are installed (the extras of ``make test``)."""
    chosen: Framework = request.param
    for module in chosen.needs:
        pytest.importorskip(module, reason=f"pip install 'context-composer[{chosen.extra}]'")
    importlib.import_module(chosen.module)
    return chosen


async def test_the_blocks_reach_each_model_call_once_and_never_the_history(
    tmp_path: Path, framework: Framework
) -> None:
    manifest = load(tmp_path)
    await remember(manifest, NOTE)
    with serve_chat() as chat:
        async with framework.agent(chat, manifest) as agent:
            first = await agent.ask("Is the db1 disk healthy?")
            report = agent.report()
            second = await agent.ask("And db2?")
            later = agent.report()
            stored = await agent.stored()
    local = composer.Branch(SYSTEM + "\n", name=NAME, metadata={"team": TEAM})
    local.id = CONVERSATION
    composer.attach(local, manifest)
    expected = await composer.prepare_turn(local, "And db2?")
    await manifest.aclose()
    assert first == second == "fixed answer"
    assert report is not None
    assert [(o.name, o.outcome) for o in report.outcomes] == [
        ("rules", "fired"),
        ("notes", "fired"),
        ("asked", "fired"),
    ]
    assert len(chat.requests) == 2
    content = SYSTEM + "\n" + "\n".join(report.blocks)
    assert chat.requests[0].messages[0] == {"role": "system", "content": content}
    for request in chat.requests:
        assert [request.text().count(marker) for marker in MARKERS] == [1, 1]
        assert system_of(request).startswith(f"{SYSTEM}\n{RULES}")
    assert chat.requests[0].text().count(NOTE) == 1
    # ADR placement: the system message is prepare_turn's fold of the agent's instructions
    assert system_of(chat.requests[1]) == expected.guidance
    assert later == expected.report
    assert later != report  # the second turn's
    assert prefix_breaks(chat.requests) == ["request 2 does not begin with request 1"]
    assert "Is the db1 disk healthy?" in stored  # the history is there, composer's blocks not
    assert "And db2?" in stored
    assert (SYSTEM in stored) == framework.keeps_instructions
    assert not any(marker in stored for marker in (*MARKERS, "NOTES-n4:"))


async def test_a_turn_is_composed_once_for_all_its_model_calls(
    tmp_path: Path, framework: Framework
) -> None:
    manifest = load(tmp_path, "  - {name: probe, type: probe}\n")
    with serve_chat() as chat:
        chat.reply_tool_call("disk_usage", {"host": "db1"})
        async with framework.agent(chat, manifest) as agent:
            await agent.ask("Check the db1 disk")
            await agent.ask("Thanks")
    await manifest.aclose()
    first, loop, later = chat.requests
    assert len(loop.messages) == len(first.messages) + 2  # the tool call and its output
    assert loop.messages[-1]["role"] == "tool"
    assert first.messages[0] == loop.messages[0]
    assert first.text().count("PROBE call 1") == loop.text().count("PROBE call 1") == 1
    assert "PROBE call 2" in later.text()
    assert "PROBE call 1" not in later.text()


async def test_a_tool_result_is_written_back_and_a_later_turn_finds_it(
    tmp_path: Path, framework: Framework
) -> None:
    manifest = load(tmp_path)
    with serve_chat() as chat:
        chat.reply_tool_call("disk_usage", {"host": "db1"})
        async with framework.agent(chat, manifest) as agent:
            await agent.ask("Check the db1 disk")
            other_answer = await agent.ask("What about the db1 disk?", "c-10")
    await manifest.aclose()
    assert other_answer == "fixed answer"
    calling, answering, other = chat.requests
    assert answering.messages[-1]["role"] == "tool"
    assert answering.messages[-1]["content"] == "db1: disk 91% full"  # the tool ran
    # the turn's second model call reuses its composition: the stored result is not in it yet
    assert system_of(answering) == system_of(calling)
    assert "91% full" not in system_of(answering)
    system = system_of(other)  # another conversation: only memory can tell
    assert "NOTES-n4:" in system
    assert "db1: disk 91% full" in system
    assert ("disk_usage" in system) == framework.writes_call
    assert [m["role"] for m in other.messages] == ["system", "user"]


async def test_stable_prefix_keeps_the_instructions_and_puts_the_context_last(
    tmp_path: Path, framework: Framework
) -> None:
    manifest = load(tmp_path)
    await remember(manifest, NOTE)
    with serve_chat() as chat:
        chat.reply_tool_call("disk_usage", {"host": "db1"})
        async with framework.agent(chat, manifest, "stable_prefix") as agent:
            await agent.ask("Is the db1 disk full?")
            await agent.ask("What did the disk check say about db1?")
            stored = await agent.stored()
    await manifest.aclose()
    first, loop, later = chat.requests
    assert first.messages[0] == loop.messages[0] == later.messages[0]
    assert first.messages[0] == {"role": "system", "content": f"{SYSTEM}\n{RULES}"}
    for request in chat.requests:  # each model call: the block once, right before the user
        labelled = context_blocks(context_of(request, framework))
        assert [source for source, _ in labelled] == ["notes", "asked"]
        assert labelled[1][1].partition(" ")[0] == "ASKED-t9"
        assert request.text().count("ASKED-t9") == 1
    assert "replaced in May" in context_of(first, framework)
    assert "91% full" not in first.text()  # the tool has not run yet
    assert "91% full" in context_of(later, framework)
    assert loop.messages[: len(first.messages)] == first.messages  # within the turn: all of it
    assert prefix_breaks([first, later]) == []  # turn to turn: all but the context block
    assert not any(marker in stored for marker in (*MARKERS, "NOTES-n4:", "<context id="))


async def test_a_provider_that_times_out_leaves_the_run_answering(
    tmp_path: Path, framework: Framework
) -> None:
    manifest = load(tmp_path, "  - {name: slow, type: probe, sleep_s: 60, timeout_s: 0.2}\n")
    with serve_chat() as chat:
        async with framework.agent(chat, manifest) as agent:
            started = time.monotonic()
            answer = await agent.ask("Is there an outage?")
            elapsed = time.monotonic() - started
            report = agent.report()
    await manifest.aclose()
    assert answer == "fixed answer"
    assert elapsed < 30  # the 60 s provider was cut off, not waited for
    assert report is not None
    outcomes = {o.name: o.outcome for o in report.outcomes}
    assert outcomes == {"rules": "fired", "notes": "empty", "asked": "fired", "slow": "timeout"}
    assert report.failed == ["slow"]
    assert chat.requests[0].text().count("RULES-r7") == 1
    assert "ASKED-t9" in chat.requests[0].text()
    assert "PROBE" not in chat.requests[0].text()


def test_without_the_framework_the_import_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, framework: Framework
) -> None:
    monkeypatch.setitem(sys.modules, framework.hidden, None)  # None: the import fails
    monkeypatch.delitem(sys.modules, framework.module)
    hint = f"pip install 'context-composer[{framework.extra}]'"
    with pytest.raises(ImportError, match=re.escape(hint)):
        importlib.import_module(framework.module)


def test_the_example_keeps_each_request_a_prefix_of_the_next(
    tmp_path: Path, framework: Framework
) -> None:
    """``examples/<framework>.py --turns 3 --placement stable_prefix`` against FakeChat, with
    every connection off loopback refused (and reported); an API key is set, so a framework
    that would send traces or telemetry to its vendor would try.

    The example makes one model request per turn (FakeChat answers text). ``prefix_breaks``
    checks that each request begins with the previous one's messages, each the same JSON
    text, once the previous request's context block is taken out: the system text, the
    history and the previous user message are byte-identical. Each request carries its turn's
    context block once, where the framework puts it before or in its newest user message."""
    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs, ignore=shutil.ignore_patterns("*.sqlite*"))
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(LOOPBACK_ONLY)
    path = [str(tmp_path / "site"), str(ROOT), os.environ.get("PYTHONPATH")]
    with serve_chat() as chat:
        for answer in ("first answer", "second answer", "last answer"):
            chat.reply(answer)
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / framework.example),
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
    assert "BLOCKED" not in done.stderr
    assert len(chat.requests) == 3
    assert {r.path for r in chat.requests} == {"/v1/chat/completions"}
    assert prefix_breaks(chat.requests) == []
    assert len({json.dumps(r.messages[0]) for r in chat.requests}) == 1
    assert "House rules for platform" in system_of(chat.requests[0])
    blocks = []
    for request in chat.requests:
        assert request.messages[-1]["role"] == "user"
        parts = split_context(context_of(request, framework))
        assert parts is not None
        blocks.append(parts[0])
    assert len(set(blocks)) == 3  # each turn's runbook and memory blocks differ
