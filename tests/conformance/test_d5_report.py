"""ADR-0008 D5: ProviderReport is a frozen dataclass of four mutable lists, a last-turn diagnostic."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from composer import (
    Branch,
    ContextProviderRegistry,
    Instruction,
    ProviderReport,
    count_tokens,
    prepare_turn,
)

if TYPE_CHECKING:
    from conformance.conftest import Raising, Static

FOUR = ("blocks", "fired", "skipped", "failed")


def test_report_attributes_are_frozen() -> None:
    """D5: the dataclass is frozen at the attribute level."""
    report = ProviderReport()
    for attr in FOUR:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(report, attr, [])


def test_report_lists_are_mutable() -> None:
    """D5: the four lists remain mutable; callers can change them afterwards."""
    report = ProviderReport()
    report.blocks.append("b")
    report.fired.append({"provider_name": "p", "tokens": 1})
    report.skipped.append("s")
    report.failed.append("f")
    assert report == ProviderReport(
        blocks=["b"], fired=[{"provider_name": "p", "tokens": 1}], skipped=["s"], failed=["f"]
    )


def test_report_fields_are_the_four_lists_and_extras_have_defaults() -> None:
    """D5: blocks, fired, skipped, failed come first; any added field has a default."""
    fields = dataclasses.fields(ProviderReport)
    assert tuple(f.name for f in fields[:4]) == FOUR
    for f in fields:
        assert (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        ), f.name
    report = ProviderReport()
    assert [getattr(report, attr) for attr in FOUR] == [[], [], [], []]


def test_default_lists_are_not_shared() -> None:
    """D5: each report gets its own lists (default_factory), so one report never leaks into another."""
    a, b = ProviderReport(), ProviderReport()
    for attr in FOUR:
        assert getattr(a, attr) is not getattr(b, attr)


async def test_blocks_and_fired_align_and_fired_rows_have_exactly_two_keys(
    static: Callable[..., Static],
) -> None:
    """D5: blocks[i] and fired[i] describe the same result; a fired row is provider_name + tokens."""
    registry = ContextProviderRegistry(budget=4)
    texts = {"a": "alpha", "b": "alpha beta gamma delta epsilon", "c": "gamma delta", "d": "x"}
    for name, text in texts.items():
        registry.register(static(text), name=name)
    report = await registry.gather(Branch("SYS"), Instruction("q"))
    assert report.blocks == ["alpha", "gamma delta", "x"]
    assert len(report.blocks) == len(report.fired)
    for block, row in zip(report.blocks, report.fired, strict=True):
        assert set(row) == {"provider_name", "tokens"}
        assert type(row["tokens"]) is int
        assert texts[row["provider_name"]] == block
        assert row["tokens"] == count_tokens(block)
    assert report.skipped == ["b"]


async def test_skipped_mixes_reasons_without_detail(static: Callable[..., Static]) -> None:
    """D5: skipped is a plain list of names, overflow and budget exclusion alike."""
    registry = ContextProviderRegistry(budget=1)
    registry.register(static("alpha beta"), name="cap", max_tokens=1)
    registry.register(static("gamma delta"), name="budget")
    report = await registry.gather(Branch("SYS"), Instruction("q"))
    assert report.skipped == ["cap", "budget"]
    assert all(type(name) is str for name in report.skipped)


async def test_failed_holds_only_the_name(raising: Callable[..., Raising]) -> None:
    """D5: failed lists names whose provide raised Exception, without the exception value."""
    registry = ContextProviderRegistry()
    registry.register(raising(ValueError("detail that must not leak")), name="broken")
    report = await registry.gather(Branch("SYS"), Instruction("q"))
    assert report == ProviderReport(failed=["broken"])
    assert "detail" not in repr(report)


async def test_duplicate_names_appear_once_per_entry(
    static: Callable[..., Static], raising: Callable[..., Raising]
) -> None:
    """D5: duplicate names are listed once per entry, which makes correlation ambiguous."""
    registry = ContextProviderRegistry(budget=1)
    registry.register(static("a"), name="dup")
    registry.register(static("b"), name="dup")
    registry.register(raising(RuntimeError()), name="dup")
    report = await registry.gather(Branch("SYS"), Instruction("q"))
    assert report.fired == [{"provider_name": "dup", "tokens": 1}]
    assert report.skipped == ["dup"]
    assert report.failed == ["dup"]


async def test_last_report_is_overwritten_by_the_next_pass(static: Callable[..., Static]) -> None:
    """D5: branch.last_context_report holds one reference, replaced by the next provider pass."""
    branch = Branch("SYS")
    provider = static("A")
    branch.providers.register(provider, name="a")
    first = await prepare_turn(branch, "one")
    assert branch.last_context_report is first.report
    second = await prepare_turn(branch, "two")
    assert branch.last_context_report is second.report
    assert second.report is not first.report


async def test_last_report_is_overwritten_by_a_systemless_pass(
    static: Callable[..., Static],
) -> None:
    """D5: a systemless turn overwrites the last report with skipped=names."""
    branch = Branch("SYS")
    branch.providers.register(static("A"), name="a")
    await prepare_turn(branch, "one")
    assert branch.last_context_report is not None
    assert branch.last_context_report.fired == [{"provider_name": "a", "tokens": 1}]
    branch.system = None
    await prepare_turn(branch, "two")
    assert branch.last_context_report == ProviderReport(skipped=["a"])


async def test_last_report_left_alone_by_a_zero_provider_turn(
    static: Callable[..., Static],
) -> None:
    """D5: a turn with no registered provider leaves the previous report unchanged."""
    branch = Branch("SYS")
    branch.providers.register(static("A"), name="a")
    await prepare_turn(branch, "one")
    kept = branch.last_context_report
    branch._context_providers = ContextProviderRegistry()
    await prepare_turn(branch, "two")
    assert branch.last_context_report is kept
    branch._context_providers = None
    await prepare_turn(branch, "three")
    assert branch.last_context_report is kept


async def test_report_keeps_blocks_after_the_slot_is_cleared(static: Callable[..., Static]) -> None:
    """D5: raw selected blocks stay in the report after the injection slot is cleared."""
    branch = Branch("SYS")
    branch.providers.register(static("raw source text"), name="a")
    await prepare_turn(branch, "q")
    assert branch._context_injection_slot is None
    assert branch.last_context_report is not None
    assert branch.last_context_report.blocks == ["raw source text"]
