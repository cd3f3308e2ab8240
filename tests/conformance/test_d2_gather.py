"""ADR-0008 D2: retrieval is sequential, in registration order, and Exceptions are contained."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import composer
from composer import Branch, ContextProviderRegistry, Instruction, ProviderReport

if TYPE_CHECKING:
    from conformance.conftest import Raising, Static


class CustomInterrupt(BaseException):
    """A BaseException that is not an Exception."""


def fired(*texts_and_names: tuple[str, str]) -> list[dict[str, object]]:
    """The expected ``fired`` rows for ``(text, name)`` pairs."""
    return [{"provider_name": n, "tokens": composer.count_tokens(t)} for t, n in texts_and_names]


@pytest.mark.sequential_only("concurrent gather starts every provider at once by design")
async def test_providers_run_in_registration_order_without_overlap(
    static: Callable[..., Static], log: list[str], branch: Branch, instruction: Instruction
) -> None:
    """D2: each provider is awaited to completion before the next starts, in registration order."""
    registry = ContextProviderRegistry()
    registry.register(static("c", label="c"), priority=0)
    registry.register(static("a", label="a"), priority=9)
    registry.register(static("b", label="b"), priority=5)
    await registry.gather(branch, instruction)
    assert log == ["c:start", "c:end", "a:start", "a:end", "b:start", "b:end"]


@pytest.mark.sequential_only("concurrent gather runs each provider in a task of its own")
async def test_providers_run_in_the_callers_task(branch: Branch, instruction: Instruction) -> None:
    """D2: gather uses no parallel tasks; every provide runs in the awaiting task."""
    seen: list[asyncio.Task[object] | None] = []

    class Where:
        async def provide(self, branch: object, instruction: object) -> None:
            seen.append(asyncio.current_task())

    registry = ContextProviderRegistry()
    registry.register(Where())
    registry.register(Where())
    await registry.gather(branch, instruction)
    assert seen == [asyncio.current_task(), asyncio.current_task()]


async def test_no_timeout_even_when_the_clock_leaps(
    monkeypatch: pytest.MonkeyPatch, branch: Branch, instruction: Instruction
) -> None:
    """D2: no timeout: with the loop clock leaping an hour per reading, a slow provider still ends."""
    loop = asyncio.get_running_loop()
    now = [loop.time()]

    def leaping() -> float:
        now[0] += 3600.0
        return now[0]

    class Slow:
        async def provide(self, branch: object, instruction: object) -> str:
            for _ in range(20):
                await asyncio.sleep(0)
            return "finally"

    registry = ContextProviderRegistry()
    registry.register(Slow(), name="slow")
    with monkeypatch.context() as patch:
        patch.setattr(loop, "time", leaping)
        report = await registry.gather(branch, instruction)
    assert report == ProviderReport(blocks=["finally"], fired=fired(("finally", "slow")))


async def test_every_provider_gets_the_same_branch_and_instruction(
    static: Callable[..., Static], branch: Branch, instruction: Instruction
) -> None:
    """D2: gather invokes provide(branch, instruction) with the objects it was given."""
    providers = [static("one"), static("two"), static("three")]
    registry = ContextProviderRegistry()
    for p in providers:
        registry.register(p)
    await registry.gather(branch, instruction)
    for p in providers:
        assert len(p.calls) == 1
        assert p.calls[0][0] is branch
        assert p.calls[0][1] is instruction


async def test_empty_registry_returns_a_fresh_empty_report(
    branch: Branch, instruction: Instruction
) -> None:
    """D2: an empty registry returns a new report with four empty lists."""
    registry = ContextProviderRegistry()
    first = await registry.gather(branch, instruction)
    second = await registry.gather(branch, instruction)
    assert first == ProviderReport(blocks=[], fired=[], skipped=[], failed=[])
    assert first is not second
    first.blocks.append("leak")
    first.skipped.append("leak")
    assert second == ProviderReport()


def test_empty_registry_loads_no_tokenizer(tmp_path: Path) -> None:
    """D2: gathering an empty registry does not load the tokenizer; a non-empty one does."""
    script = textwrap.dedent(
        """
        import asyncio, json
        import composer

        class P:
            async def provide(self, branch, instruction):
                return "loaded now"

        branch, ins = composer.Branch("SYS"), composer.Instruction("q")
        registry = composer.ContextProviderRegistry()
        report = asyncio.run(registry.gather(branch, ins))
        empty = [report.blocks, report.fired, report.skipped, report.failed]
        after_empty = composer.tokens.is_loaded()
        asyncio.run(composer.prepare_turn(composer.Branch("SYS"), ins))
        after_turn = composer.tokens.is_loaded()
        registry.register(P())
        asyncio.run(registry.gather(branch, ins))
        print(json.dumps([empty, after_empty, after_turn, composer.tokens.is_loaded()]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == [[[], [], [], []], False, False, True]


@pytest.mark.parametrize("falsy", ["", None, 0, False, []], ids=repr)
async def test_falsy_results_leave_no_row(
    falsy: object, static: Callable[..., Static], branch: Branch, instruction: Instruction
) -> None:
    """D2: None or any falsy result contributes no block and no fired/skipped/failed row."""
    registry = ContextProviderRegistry(budget=0)
    empty = static(falsy, label="empty")
    registry.register(empty, name="empty", priority=5, max_tokens=-1)
    registry.register(static("kept"), name="kept", max_tokens=-1)
    report = await registry.gather(branch, instruction)
    assert len(empty.calls) == 1
    assert report == ProviderReport(blocks=[], fired=[], skipped=["kept"], failed=[])

    alone = ContextProviderRegistry()
    alone.register(static(falsy, label="alone"))
    assert await alone.gather(branch, instruction) == ProviderReport()


async def test_exception_is_logged_with_traceback_recorded_and_next_runs(
    static: Callable[..., Static],
    raising: Callable[..., Raising],
    branch: Branch,
    instruction: Instruction,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """D2: an Exception is warned with traceback, its name goes to failed, gather goes on."""
    boom = RuntimeError("source down")
    registry = ContextProviderRegistry()
    registry.register(static("first"), name="first")
    registry.register(raising(boom), name="flaky")
    registry.register(static("last"), name="last")
    with caplog.at_level(logging.WARNING, logger="composer.registry"):
        report = await registry.gather(branch, instruction)
    assert report == ProviderReport(
        blocks=["first", "last"],
        fired=fired(("first", "first"), ("last", "last")),
        skipped=[],
        failed=["flaky"],
    )
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.name == "composer.registry"
    assert "'flaky'" in record.getMessage()
    assert record.exc_info is not None
    assert record.exc_info[1] is boom
    assert record.exc_info[2] is not None


async def test_failed_provider_is_attempted_once(
    raising: Callable[..., Raising], branch: Branch, instruction: Instruction
) -> None:
    """D2: no retry: a failing provider is called exactly once per gather."""
    flaky = raising(ValueError("transient"))
    registry = ContextProviderRegistry()
    registry.register(flaky, name="flaky")
    report = await registry.gather(branch, instruction)
    assert report.failed == ["flaky"]
    assert len(flaky.calls) == 1


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, CustomInterrupt, SystemExit])
async def test_base_exception_propagates(
    exc_type: type[BaseException],
    gather_mode: str,
    static: Callable[..., Static],
    raising: Callable[..., Raising],
    branch: Branch,
    instruction: Instruction,
) -> None:
    """D2: a BaseException outside Exception is not contained; later providers do not run.

    Concurrently, the later provider has already started: it is cancelled, and the gather
    leaves no task running.
    """
    later = static("later")
    registry = ContextProviderRegistry()
    registry.register(static("before"))
    registry.register(raising(exc_type()), name="stop")
    registry.register(later)
    with pytest.raises(exc_type):
        await registry.gather(branch, instruction)
    if gather_mode == "sequential":
        assert later.calls == []
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_cancellation_propagates(
    raising: Callable[..., Raising], branch: Branch, instruction: Instruction
) -> None:
    """D2: asyncio.CancelledError (a BaseException) is not recorded as a failure."""
    registry = ContextProviderRegistry()
    registry.register(raising(asyncio.CancelledError()))
    with pytest.raises(asyncio.CancelledError):
        await registry.gather(branch, instruction)


async def test_processing_of_the_result_is_outside_the_provide_containment(
    static: Callable[..., Static], branch: Branch, instruction: Instruction
) -> None:
    """D2: the result is examined outside the provide try/except, so its errors propagate."""

    class NoTruth:
        def __bool__(self) -> bool:
            raise RuntimeError("no truth value")

    registry = ContextProviderRegistry()
    registry.register(static(NoTruth()))
    with pytest.raises(RuntimeError, match="no truth value"):
        await registry.gather(branch, instruction)


async def test_truthy_non_string_counts_zero_and_is_not_a_failure(
    static: Callable[..., Static], branch: Branch, instruction: Instruction
) -> None:
    """D2/D3: a truthy non-string result is not contained as a failure; the tokenizer gives 0."""
    registry = ContextProviderRegistry(budget=0)
    registry.register(static(12345), name="number")
    report = await registry.gather(branch, instruction)
    assert report == ProviderReport(
        blocks=[12345],  # type: ignore[list-item]
        fired=[{"provider_name": "number", "tokens": 0}],
    )


async def test_all_providers_run_before_the_budget_drops_any(
    static: Callable[..., Static], branch: Branch, instruction: Instruction
) -> None:
    """D2: every provider is invoked even when its result is later dropped by the budget."""
    dropped = static("this will not fit")
    registry = ContextProviderRegistry(budget=0)
    registry.register(dropped, name="dropped")
    report = await registry.gather(branch, instruction)
    assert len(dropped.calls) == 1
    assert report.skipped == ["dropped"]
