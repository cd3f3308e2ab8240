"""ADR-0008 D7: optional writeback hooks, walked in order, each Exception contained."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from composer import Branch, ContextProviderRegistry, prepare_turn


class Writer:
    """A provider with a writeback hook that logs its calls and may raise."""

    def __init__(self, label: str, log: list[str], exc: BaseException | None = None) -> None:
        self.label = label
        self.log = log
        self.exc = exc
        self.calls: list[tuple[Any, Any]] = []
        self.provided = 0

    async def provide(self, branch: Any, instruction: Any) -> str:
        self.provided += 1
        return self.label

    async def writeback(self, branch: Any, action_responses: list[Any]) -> int:
        self.log.append(f"{self.label}:start")
        self.calls.append((branch, action_responses))
        for _ in range(3):
            await asyncio.sleep(0)
        self.log.append(f"{self.label}:end")
        if self.exc is not None:
            raise self.exc
        return 7


class ReadOnly:
    """A provider without writeback."""

    def __init__(self) -> None:
        self.provided = 0

    async def provide(self, branch: Any, instruction: Any) -> str:
        self.provided += 1
        return "read-only"


async def test_writeback_walks_entries_in_order_sequentially(log: list[str]) -> None:
    """D7: hooks run one after another in registration order, with the given arguments."""
    branch, responses = Branch("SYS"), [{"tool": "x", "output": 1}]
    writers = [Writer("c", log), Writer("a", log), Writer("b", log)]
    registry = ContextProviderRegistry()
    for priority, w in enumerate(writers):
        registry.register(w, priority=-priority)
    await registry.gather_writeback(branch, responses)
    assert log == ["c:start", "c:end", "a:start", "a:end", "b:start", "b:end"]
    for w in writers:
        assert len(w.calls) == 1
        assert w.calls[0][0] is branch
        assert w.calls[0][1] is responses


async def test_provider_without_writeback_is_passed_over(log: list[str]) -> None:
    """D7: a provider without writeback is skipped; its provide is not called either."""
    plain, first, last = ReadOnly(), Writer("first", log), Writer("last", log)
    registry = ContextProviderRegistry()
    registry.register(first)
    registry.register(plain)
    registry.register(object(), name="not-even-a-provider")
    registry.register(last)
    await registry.gather_writeback(Branch("SYS"), [1])
    assert log == ["first:start", "first:end", "last:start", "last:end"]
    assert plain.provided == first.provided == last.provided == 0


async def test_raising_writeback_is_contained_and_the_next_runs(
    log: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """D7: an Exception from one hook is warned with traceback; later hooks still run."""
    boom = OSError("store unavailable")
    registry = ContextProviderRegistry()
    registry.register(Writer("broken", log, boom), name="broken")
    registry.register(Writer("next", log), name="next")
    with caplog.at_level(logging.WARNING, logger="composer.registry"):
        result = await registry.gather_writeback(Branch("SYS"), ["r"])  # type: ignore[func-returns-value]
    assert result is None  # the typed None is checked at run time too
    assert log == ["broken:start", "broken:end", "next:start", "next:end"]
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "'broken'" in record.getMessage()
    assert record.exc_info is not None
    assert record.exc_info[1] is boom


async def test_writeback_base_exception_propagates(log: list[str]) -> None:
    """D7: only Exception is contained; a KeyboardInterrupt stops the walk."""
    registry = ContextProviderRegistry()
    registry.register(Writer("stop", log, KeyboardInterrupt()))
    registry.register(Writer("never", log))
    with pytest.raises(KeyboardInterrupt):
        await registry.gather_writeback(Branch("SYS"), ["r"])
    assert log == ["stop:start", "stop:end"]


async def test_writeback_returns_none(log: list[str]) -> None:
    """D7: gather_writeback returns nothing, whatever the hooks return."""
    registry = ContextProviderRegistry()
    registry.register(Writer("w", log))
    # the declared ``-> None`` is what this test checks at run time
    assert await registry.gather_writeback(Branch("SYS"), ["r"]) is None  # type: ignore[func-returns-value]
    assert await ContextProviderRegistry().gather_writeback(Branch("SYS"), []) is None  # type: ignore[func-returns-value]


async def test_turn_preparation_never_calls_writeback(log: list[str]) -> None:
    """D7: only operate's post-action step calls writeback; a chat/run-style turn does not."""
    writer = Writer("w", log)
    branch = Branch("SYS")
    branch.providers.register(writer)
    await prepare_turn(branch, "q")
    await branch.providers.gather(branch, "q")
    assert writer.provided == 2
    assert writer.calls == []
