"""Counting and gathering need no network, ever (design.md "Tokenizer, offline")."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from netblock import BLOCK_SOCKETS, blocked_pythonpath

import composer
import composer.tokens
from composer import Branch, Instruction, ProviderReport, prepare_turn


def offline_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The current environment with an empty tiktoken cache, so nothing cached can help."""
    cache = tmp_path / "empty-tiktoken-cache"
    cache.mkdir(exist_ok=True)
    return {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache), **extra}


def run_python(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=offline_env(tmp_path, **env),
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Block every socket connection in this process and forget the loaded tokenizer."""

    def blocked(*args: object, **kwargs: object) -> None:
        raise OSError("network access blocked by the test")

    monkeypatch.setattr(socket.socket, "connect", blocked)
    monkeypatch.setattr(socket.socket, "connect_ex", blocked)
    monkeypatch.setattr(socket, "create_connection", blocked)
    monkeypatch.setattr(socket, "getaddrinfo", blocked)
    monkeypatch.setattr(composer.tokens, "_encoding", None)
    composer.tokens._count_memoised.cache_clear()  # so counting must load the encoding


class Echo:
    def __init__(self, text: str) -> None:
        self.text = text

    async def provide(self, branch: object, instruction: object) -> str:
        return self.text


async def test_count_and_gather_with_sockets_blocked_in_process(no_network: None) -> None:
    """Item 7: with every connection blocked, the tokenizer loads, counts and a turn gathers."""
    with pytest.raises(OSError, match="blocked"):
        socket.create_connection(("127.0.0.1", 9))
    with socket.socket() as s, pytest.raises(OSError, match="blocked"):
        s.connect(("127.0.0.1", 9))
    assert not composer.tokens.is_loaded()
    assert composer.count_tokens("hello world") == 2
    assert composer.tokens.is_loaded()

    branch = Branch("SYS")
    branch.providers.register(Echo("alpha"), name="a", priority=1)
    branch.providers.register(Echo("alpha beta"), name="b", priority=2)
    branch.providers.register(Echo(" one two three four five"), name="c", priority=0)
    branch.providers.budget = 3
    turn = await prepare_turn(branch, Instruction("q", guidance="G"))
    assert turn.report == ProviderReport(
        blocks=["alpha", "alpha beta"],
        fired=[{"provider_name": "a", "tokens": 1}, {"provider_name": "b", "tokens": 2}],
        skipped=["c"],
    )
    assert turn.guidance == "SYSalpha\nalpha betaG"


def test_count_and_gather_in_a_fresh_process_with_sockets_blocked(tmp_path: Path) -> None:
    """Item 7: a fresh process, sockets blocked before composer is imported, counts and gathers."""
    script = BLOCK_SOCKETS + textwrap.dedent(
        """
        import asyncio, json, socket
        import composer

        try:
            socket.create_connection(("127.0.0.1", 9))
            blocked = False
        except OSError:
            blocked = True

        class Echo:
            def __init__(self, text):
                self.text = text

            async def provide(self, branch, instruction):
                return self.text

        loaded_before = composer.tokens.is_loaded()
        count = composer.count_tokens("hello world")
        branch = composer.Branch("SYS")
        branch.providers.register(Echo("alpha"), name="a")
        branch.providers.register(Echo("alpha beta"), name="b", max_tokens=1)
        turn = asyncio.run(composer.prepare_turn(branch, "q"))
        r = turn.report
        print(json.dumps({
            "blocked": blocked,
            "loaded_before": loaded_before,
            "count": count,
            "report": [r.blocks, r.fired, r.skipped, r.failed],
            "guidance": turn.guidance,
        }))
        """
    )
    result = run_python(tmp_path, script)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "blocked": True,
        "loaded_before": False,
        "count": 2,
        "report": [["alpha"], [{"provider_name": "a", "tokens": 1}], ["b"], []],
        "guidance": "SYSalpha",
    }


def test_command_line_count_prints_2_with_the_network_unplugged(tmp_path: Path) -> None:
    """Done when: python -c "import composer; print(composer.count_tokens('hello world'))" prints 2."""
    pythonpath = blocked_pythonpath(tmp_path / "site", os.environ.get("PYTHONPATH"))

    probe = run_python(
        tmp_path,
        "import socket; print(getattr(socket, 'composer_test_blocked', False))",
        PYTHONPATH=pythonpath,
    )
    assert probe.stdout == "True\n", probe.stderr

    result = run_python(
        tmp_path,
        "import composer; print(composer.count_tokens('hello world'))",
        PYTHONPATH=pythonpath,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2\n"
