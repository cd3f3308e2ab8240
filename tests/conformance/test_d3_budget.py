"""ADR-0008 D3: a truthy per-provider cap, then stable priority admission under a total budget."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

import composer
from composer import Branch, ContextProviderRegistry, Instruction, ProviderReport, count_tokens

if TYPE_CHECKING:
    from conformance.conftest import Static

ONE = "alpha"  # 1 token
TWO = "alpha beta"  # 2 tokens
FIVE = " one two three four five"  # 5 tokens
UNENCODABLE = "\x00"  # the tokenizer below fails on it: counts 0


@pytest.fixture
def failing_tokenizer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """o200k_base, except that encoding any text with a NUL in it raises: a tokenizer error."""
    real = composer.tokens.encoding()

    class Failing:
        def encode(self, text: str, **options: Any) -> list[int]:
            if UNENCODABLE in text:
                raise ValueError("tokenizer failure")
            return real.encode(text, **options)

    monkeypatch.setattr(composer.tokens, "encoding", Failing)
    composer.tokens._count_memoised.cache_clear()  # counts made with the real one
    yield
    composer.tokens._count_memoised.cache_clear()  # counts made with this one


def test_fixture_texts_have_the_token_counts_the_tests_assume(failing_tokenizer: None) -> None:
    """D3: tokens = count_tokens(text) with o200k_base; the fixtures below rely on these counts."""
    assert [count_tokens(t) for t in (ONE, TWO, FIVE, UNENCODABLE)] == [1, 2, 5, 0]


def row(name: str, text: str) -> dict[str, object]:
    return {"provider_name": name, "tokens": count_tokens(text)}


async def gather(
    static: Callable[..., Static],
    registrations: Iterable[tuple[str, str, int, int | None]],
    budget: int = 2000,
) -> ProviderReport:
    """Register ``(name, text, priority, max_tokens)`` tuples and gather once."""
    registry = ContextProviderRegistry(budget=budget)
    for name, text, priority, max_tokens in registrations:
        registry.register(
            static(text, label=name), name=name, priority=priority, max_tokens=max_tokens
        )
    return await registry.gather(Branch("SYS"), Instruction("q"))


async def test_max_tokens_none_means_no_cap(static: Callable[..., Static]) -> None:
    """D3: max_tokens=None means no per-provider cap."""
    report = await gather(static, [("a", FIVE, 0, None)])
    assert report == ProviderReport(blocks=[FIVE], fired=[row("a", FIVE)])


async def test_max_tokens_zero_means_no_cap(static: Callable[..., Static]) -> None:
    """D3: max_tokens=0 is falsy and therefore also means no cap."""
    report = await gather(static, [("a", FIVE, 0, 0)])
    assert report == ProviderReport(blocks=[FIVE], fired=[row("a", FIVE)])


async def test_max_tokens_equal_to_tokens_fits(static: Callable[..., Static]) -> None:
    """D3: a positive cap skips only when tokens is strictly greater; equality fits."""
    report = await gather(static, [("eq", FIVE, 0, 5), ("over", FIVE, 0, 4)])
    assert report == ProviderReport(blocks=[FIVE], fired=[row("eq", FIVE)], skipped=["over"])


@pytest.mark.parametrize("cap", [-1, -100])
async def test_negative_max_tokens_skips_any_non_empty_result(
    static: Callable[..., Static], cap: int, failing_tokenizer: None
) -> None:
    """D3: a negative cap is truthy, so any non-empty result exceeds it, even a 0-token one."""
    report = await gather(static, [("one", ONE, 0, cap), ("zero", UNENCODABLE, 0, cap)])
    assert report == ProviderReport(skipped=["one", "zero"])


async def test_cap_overflow_skips_whole_block_without_truncation(
    static: Callable[..., Static],
) -> None:
    """D3: a per-provider overflow does not truncate; the whole block is skipped."""
    report = await gather(static, [("big", FIVE, 0, 2), ("small", TWO, 0, 2)])
    assert report == ProviderReport(blocks=[TWO], fired=[row("small", TWO)], skipped=["big"])


async def test_budget_equality_fits(static: Callable[..., Static]) -> None:
    """D3: greedy admission while total + tokens <= budget; exactly filling the budget fits."""
    report = await gather(static, [("a", TWO, 0, None), ("b", FIVE, 0, None)], budget=7)
    assert report == ProviderReport(blocks=[TWO, FIVE], fired=[row("a", TWO), row("b", FIVE)])


async def test_budget_one_short_skips_the_block_that_overflows(
    static: Callable[..., Static],
) -> None:
    """D3: a block that would take the total past the budget is skipped, not truncated."""
    report = await gather(static, [("a", TWO, 0, None), ("b", FIVE, 0, None)], budget=6)
    assert report == ProviderReport(blocks=[TWO], fired=[row("a", TWO)], skipped=["b"])


async def test_higher_priority_is_admitted_first(static: Callable[..., Static]) -> None:
    """D3: higher numeric priority is considered first under budget pressure."""
    report = await gather(static, [("low", FIVE, 1, None), ("high", FIVE, 2, None)], budget=5)
    assert report == ProviderReport(blocks=[FIVE], fired=[row("high", FIVE)], skipped=["low"])


async def test_negative_priorities_sort_below_zero(static: Callable[..., Static]) -> None:
    """D3: priority is a plain integer; -3 loses to 0 and to -1."""
    report = await gather(
        static,
        [("m3", TWO, -3, None), ("zero", TWO, 0, None), ("m1", TWO, -1, None)],
        budget=4,
    )
    assert report.fired == [row("zero", TWO), row("m1", TWO)]
    assert report.skipped == ["m3"]


async def test_oversized_high_priority_skipped_while_smaller_later_fits(
    static: Callable[..., Static],
) -> None:
    """D3: an oversized high-priority block is skipped while a later smaller block still fits."""
    report = await gather(
        static,
        [("huge", FIVE, 100, None), ("tiny", ONE, 1, None), ("small", TWO, 50, None)],
        budget=3,
    )
    assert report == ProviderReport(
        blocks=[ONE, TWO], fired=[row("tiny", ONE), row("small", TWO)], skipped=["huge"]
    )


async def test_equal_priorities_keep_registration_order(static: Callable[..., Static]) -> None:
    """D3: equal priorities retain registration order (stable sort): earlier ones win."""
    names = ["a", "b", "c", "d", "e", "f"]
    report = await gather(static, [(n, TWO, 7, None) for n in names], budget=6)
    assert report.fired == [row("a", TWO), row("b", TWO), row("c", TWO)]
    assert report.skipped == ["d", "e", "f"]


async def test_equal_priorities_stable_among_mixed_priorities(
    static: Callable[..., Static],
) -> None:
    """D3: the sort is by descending priority only; ties keep registration order."""
    report = await gather(
        static,
        [
            ("low1", ONE, 0, None),
            ("hi1", TWO, 5, None),
            ("low2", ONE, 0, None),
            ("hi2", TWO, 5, None),
            ("low3", ONE, 0, None),
        ],
        budget=5,
    )
    assert report.fired == [row("low1", ONE), row("hi1", TWO), row("hi2", TWO)]
    assert report.skipped == ["low2", "low3"]


async def test_render_order_is_registration_order(static: Callable[..., Static]) -> None:
    """D3: after selection, blocks and fired are rebuilt in registration order, not priority."""
    report = await gather(
        static,
        [("first", ONE, 0, None), ("second", TWO, 10, None), ("third", FIVE, 5, None)],
    )
    assert report.blocks == [ONE, TWO, FIVE]
    assert report.fired == [row("first", ONE), row("second", TWO), row("third", FIVE)]


@pytest.mark.parametrize("budget", [0, -1])
async def test_zero_or_negative_budget_skips_positive_blocks(
    static: Callable[..., Static], budget: int
) -> None:
    """D3: a zero or negative budget skips any block with a positive token count."""
    report = await gather(static, [("a", ONE, 0, None), ("b", FIVE, 9, None)], budget=budget)
    assert report == ProviderReport(skipped=["b", "a"])


async def test_zero_budget_admits_a_zero_token_block(
    static: Callable[..., Static], failing_tokenizer: None
) -> None:
    """D3: tokenizer errors count 0, and a zero-token block fits a zero budget."""
    registrations = [("broken", UNENCODABLE, 0, None), ("word", ONE, 0, None)]
    report = await gather(static, registrations, budget=0)
    assert report == ProviderReport(
        blocks=[UNENCODABLE],
        fired=[{"provider_name": "broken", "tokens": 0}],
        skipped=["word"],
    )


async def test_negative_budget_skips_even_a_zero_token_block(
    static: Callable[..., Static], failing_tokenizer: None
) -> None:
    """D3: total + 0 <= -1 is false, so a negative budget admits nothing."""
    report = await gather(static, [("broken", UNENCODABLE, 0, None)], budget=-1)
    assert report == ProviderReport(skipped=["broken"])


async def test_cap_skips_come_before_budget_skips(static: Callable[..., Static]) -> None:
    """D3/D5: skipped holds cap overflows in registration order, then budget exclusions."""
    report = await gather(
        static,
        [
            ("budget-low", TWO, 1, None),
            ("cap", FIVE, 0, 3),
            ("budget-high", FIVE, 2, None),
            ("kept", ONE, 3, None),
        ],
        budget=1,
    )
    assert report == ProviderReport(
        blocks=[ONE], fired=[row("kept", ONE)], skipped=["cap", "budget-high", "budget-low"]
    )


async def test_budget_is_mutable_on_the_registry(static: Callable[..., Static]) -> None:
    """D3: the total is mutable as registry.budget and read at gather time."""
    registry = ContextProviderRegistry()
    registry.register(static(FIVE), name="a")
    registry.budget = 4
    report = await registry.gather(Branch("SYS"), Instruction("q"))
    assert report == ProviderReport(skipped=["a"])
    registry.budget = 5
    report = await registry.gather(Branch("SYS"), Instruction("q"))
    assert report == ProviderReport(blocks=[FIVE], fired=[row("a", FIVE)])


async def test_default_budget_2000_admits_exactly_2000_tokens(
    static: Callable[..., Static],
) -> None:
    """D3: the default total is 2000 tokens: 2000 fit, one more does not."""
    text = " a" * 1000 + " b" * 1000
    assert count_tokens(text) == 2000
    registry = ContextProviderRegistry()
    registry.register(static(text), name="full")
    registry.register(static(ONE), name="one-more")
    report = await registry.gather(Branch("SYS"), Instruction("q"))
    assert report.fired == [{"provider_name": "full", "tokens": 2000}]
    assert report.skipped == ["one-more"]


async def test_fired_tokens_are_count_tokens_of_the_text(static: Callable[..., Static]) -> None:
    """D3: the recorded token count is count_tokens(text) for the exact returned text."""
    text = "Résumé: naïve café — 日本語のテキスト 🚀 x = f(42)\n\tdone"
    report = await gather(static, [("t", text, 0, None)])
    assert report.fired == [{"provider_name": "t", "tokens": composer.count_tokens(text)}]
    assert report.fired[0]["tokens"] > 10
