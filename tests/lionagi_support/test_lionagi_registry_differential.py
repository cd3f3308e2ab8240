"""composer's registry against lionagi's own, on generated provider sets.

For outputs that are strings, None or exceptions, both registries must produce the same
``blocks``, ``fired``, ``skipped`` and ``failed`` and call the providers in the same order.
Both count tokens with o200k_base: lionagi through ``TIKTOKEN_CACHE_DIR`` (see conftest),
composer from its vendored file.

Where lionagi 0.36 departs from ADR-0008, the ADR wins; each departure has its own test
below, which shows what lionagi does and what composer (ADR-exact) does instead:

1. a truthy non-string output: lionagi raises TypeError inside its try, so the provider is
   *failed*; the ADR tokenizes outside the try and the tokenizer contains the error, so the
   result is *fired* with 0 tokens (composer keeps it as the block; rendering it is a protocol
   violation the ADR does not contain);
2. a falsy non-string output (0, False, [], b"", {}): lionagi marks it *failed*; the ADR makes
   any falsy result invisible (no row in any list);
3. ``degradation_reason``: lionagi reads it after ``provide`` and adds a fifth report list,
   ``degraded`` (and, should reading it raise, fails a provider whose ``provide`` succeeded);
   the ADR report has exactly four lists (composer's ``degraded``, outside ``==``, is filled
   by its engine's ``on_failure`` notices only);
4. ``stats``: lionagi's registry counts turns, blocks, failures and writeback records; the ADR
   registry keeps no statistics (the report is the only diagnostic) and ignores what a
   writeback hook returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from .support import LIONAGI_MISSING

pytest.importorskip("lionagi", reason=LIONAGI_MISSING)

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lionagi.protocols.context_providers import ContextProviderRegistry as LionagiRegistry
from lionagi.protocols.context_providers import ProviderReport as LionagiReport

import composer

# two unrelated classes, driven alike through the methods they share
REGISTRIES: dict[str, Callable[..., Any]] = {
    "composer": composer.ContextProviderRegistry,
    "lionagi": LionagiRegistry,
}
BRANCH, INSTRUCTION = object(), object()  # the registries only pass these through


@pytest.fixture(autouse=True)
def _quiet_provider_warnings(caplog: pytest.LogCaptureFixture) -> None:
    """Failures are logged with tracebacks by both registries; keep them out of the report."""
    caplog.set_level(logging.CRITICAL)


# --- generated provider sets -----------------------------------------------------------


@dataclass(frozen=True)
class Raise:
    """The provider raises this Exception type."""

    kind: type[Exception]


@dataclass(frozen=True)
class Spec:
    """One registration: how it is named, what provide() does, and its limits."""

    naming: str  # "explicit" | "attribute" | "class"
    name: str
    outcome: str | Raise | None
    priority: int
    max_tokens: int | None


class Provider:
    """Returns or raises the spec's outcome and logs the call."""

    def __init__(self, spec: Spec, log: list[int], index: int) -> None:
        self.spec = spec
        self.log = log
        self.index = index
        if spec.naming == "attribute":
            self.name = spec.name
        elif spec.naming == "class":
            self.name = ""  # falsy: the registry falls back to the class name

    async def provide(self, branch: Any, instruction: Any) -> Any:
        assert branch is BRANCH
        assert instruction is INSTRUCTION
        self.log.append(self.index)
        if isinstance(self.spec.outcome, Raise):
            raise self.spec.outcome.kind(f"provider {self.index} fails")
        return self.spec.outcome


class Alpha(Provider):
    pass


class Beta(Provider):
    pass


TEXTS = st.one_of(
    st.text(max_size=60),  # any unicode, empty included
    st.sampled_from(
        [
            "",
            " ",
            "\n\n",
            "ledger " * 30,
            "日本語のテキストです。",
            "🎉🧾" * 4,
            "x" * 200,
        ]
    ),
)
OUTCOMES = st.one_of(
    TEXTS,
    st.none(),
    st.sampled_from([ValueError, RuntimeError, KeyError, ZeroDivisionError]).map(Raise),
)
SPECS = st.builds(
    Spec,
    naming=st.sampled_from(["explicit", "attribute", "class"]),
    name=st.sampled_from(["a", "b", "c", "dup", "dup", "é"]),  # duplicates are allowed (D1)
    outcome=OUTCOMES,
    priority=st.integers(-3, 3),
    max_tokens=st.one_of(st.none(), st.integers(-3, 40)),
)
BUDGETS = st.one_of(st.integers(-10, 120), st.just(2000))


def build(kind: str, specs: list[Spec], budget: int) -> tuple[Any, list[int]]:
    registry = REGISTRIES[kind](budget=budget)
    log: list[int] = []
    for index, spec in enumerate(specs):
        cls = Alpha if index % 2 else Beta
        registry.register(
            cls(spec, log, index),
            priority=spec.priority,
            max_tokens=spec.max_tokens,
            name=spec.name if spec.naming == "explicit" else None,
        )
    return registry, log


def gather(kind: str, specs: list[Spec], budget: int) -> dict[str, Any]:
    registry, log = build(kind, specs, budget)
    report = asyncio.run(registry.gather(BRANCH, INSTRUCTION))
    return {
        "blocks": report.blocks,
        "fired": report.fired,
        "skipped": report.skipped,
        "failed": report.failed,
        "calls": log,
        "names": registry.names,
        "len": len(registry),
        "bool": bool(registry),
    }


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(SPECS, max_size=8), budget=BUDGETS)
def test_same_report_as_lionagi(specs: list[Spec], budget: int) -> None:
    assert gather("composer", specs, budget) == gather("lionagi", specs, budget)


def test_lionagis_token_counts_are_composers() -> None:
    """The shared tokenizer the differential relies on (lionagi offline via the cache)."""
    from lionagi.service.token_calculator import TokenCalculator

    for text in ["hello world", "日本語", "🎉🧾", "ledger " * 30]:
        assert TokenCalculator.tokenize(text) == composer.count_tokens(text)


@pytest.mark.parametrize("text", ["<|endoftext|>", "refund <|endofprompt|> ledger"])
def test_difference_special_token_text_is_counted_not_zero(text: str) -> None:
    """4. lionagi 0.36: tiktoken refuses special-token text, the error counts 0, and the block
    passes any cap and budget. composer counts it as the ordinary text a model API reads, so a
    cap of 2 tokens skips it."""
    from lionagi.service.token_calculator import TokenCalculator

    assert TokenCalculator.tokenize(text) == 0
    assert composer.count_tokens(text) > 2

    def capped(kind: str) -> Any:
        registry = REGISTRIES[kind]()
        registry.register(Returns(text), max_tokens=2)
        return asyncio.run(registry.gather(BRANCH, INSTRUCTION))

    assert lists(capped("lionagi")) == ([text], [{"provider_name": "p", "tokens": 0}], [], [])
    assert lists(capped("composer")) == ([], [], ["p"], [])


# --- where lionagi departs from the ADR --------------------------------------------------


class Returns:
    def __init__(self, value: Any, name: str = "p") -> None:
        self.value = value
        self.name = name

    async def provide(self, branch: Any, instruction: Any) -> Any:
        return self.value


def report_of(kind: str, *providers: Any) -> Any:
    registry = REGISTRIES[kind]()
    for provider in providers:
        registry.register(provider)
    return asyncio.run(registry.gather(BRANCH, INSTRUCTION))


def lists(report: Any) -> tuple[list[Any], ...]:
    return report.blocks, report.fired, report.skipped, report.failed


@pytest.mark.parametrize("value", [42, 3.5, b"bytes", ["a"], {"k": 1}])
def test_difference_truthy_non_string_output(value: Any) -> None:
    """1. lionagi: failed. ADR D2/D3: tokenized outside the try, the tokenizer error counts 0,
    so the value is retained as a block with 0 tokens."""
    assert lists(report_of("lionagi", Returns(value))) == ([], [], [], ["p"])
    assert lists(report_of("composer", Returns(value))) == (
        [value],
        [{"provider_name": "p", "tokens": 0}],
        [],
        [],
    )


async def test_difference_truthy_non_string_is_not_contained_at_render() -> None:
    """1, continued: the ADR does not promise containment; composer's fold raises, and the
    per-turn slot is still cleared (D4 ``finally``)."""
    branch = composer.Branch("system")
    branch.providers.register(Returns(42))
    with pytest.raises(TypeError):
        await composer.prepare_turn(branch, "hi")
    assert branch._context_injection_slot is None
    assert branch.last_context_report is not None
    # blocks are typed list[str]; a provider breaking that is what this test is about
    assert branch.last_context_report.blocks == [42]  # type: ignore[comparison-overlap]


@pytest.mark.parametrize("value", [0, False, [], b"", {}, 0.0])
def test_difference_falsy_non_string_output(value: Any) -> None:
    """2. lionagi: failed. ADR D2: any falsy result leaves no row in any list."""
    assert lists(report_of("lionagi", Returns(value))) == ([], [], [], ["p"])
    assert lists(report_of("composer", Returns(value))) == ([], [], [], [])


def test_difference_degraded_list() -> None:
    """3. lionagi adds a fifth list from ``degradation_reason``; the ADR report has four."""
    provider = Returns("stale but usable")
    provider.degradation_reason = "index is 3 days old"  # type: ignore[attr-defined]

    lionagi_report = report_of("lionagi", provider)
    composer_report = report_of("composer", provider)

    assert lionagi_report.degraded == [{"provider_name": "p", "reason": "index is 3 days old"}]
    assert [f.name for f in dataclasses.fields(LionagiReport)] == [
        "blocks",
        "fired",
        "skipped",
        "failed",
        "degraded",
    ]
    composer_fields = {f.name: f for f in dataclasses.fields(composer.ProviderReport)}
    assert list(composer_fields)[:4] == ["blocks", "fired", "skipped", "failed"]
    # composer has lionagi's list too, outside == (as every field it adds), filled only by
    # the engine's on_failure notices: the ADR registry never reads degradation_reason
    assert not composer_fields["degraded"].compare
    assert composer_report.degraded == []
    assert lists(lionagi_report) == lists(composer_report)


def test_difference_degradation_reason_that_raises_fails_the_provider() -> None:
    """3, continued: lionagi reads the attribute inside its try; the ADR never reads it."""

    class Fragile(Returns):
        @property
        def degradation_reason(self) -> str:
            raise RuntimeError("health check down")

    assert lists(report_of("lionagi", Fragile("text"))) == ([], [], [], ["p"])
    assert report_of("composer", Fragile("text")).fired == [
        {"provider_name": "p", "tokens": composer.count_tokens("text")}
    ]


class Writes:
    """A provider whose writeback returns a record count, or raises."""

    def __init__(self, name: str, log: list[str], result: Any = 1, fail: bool = False) -> None:
        self.name = name
        self.log = log
        self.result = result
        self.fail = fail

    async def provide(self, branch: Any, instruction: Any) -> str:
        return f"from {self.name}"

    async def writeback(self, branch: Any, action_responses: list[Any]) -> Any:
        self.log.append(self.name)
        if self.fail:
            raise RuntimeError("store down")
        return self.result


def test_difference_stats() -> None:
    """4. lionagi keeps counters on the registry; the ADR registry has none and D7 writeback
    returns nothing and reports nothing. Call order and containment are the same."""
    outcomes: dict[str, Any] = {}
    for kind, cls in REGISTRIES.items():
        log: list[str] = []
        registry = cls()
        for provider in (Writes("a", log, 2), Writes("b", log, fail=True), Writes("c", log, 3)):
            registry.register(provider)
        asyncio.run(registry.gather(BRANCH, INSTRUCTION))
        returned = asyncio.run(registry.gather_writeback(BRANCH, ["response"]))
        outcomes[kind] = (returned, log, getattr(registry, "stats", None))

    assert outcomes["composer"] == (None, ["a", "b", "c"], None)
    assert outcomes["lionagi"] == (
        None,
        ["a", "b", "c"],
        {
            "recall_turns": 1,
            "blocks_injected": 3,
            "failed": 0,
            "degraded_turns": 0,
            "writeback_records": 5,
            "writeback_failed": 1,
        },
    )


@pytest.mark.parametrize("kind", sorted(REGISTRIES))
def test_same_base_exception_propagates(kind: str) -> None:
    """D2 holds in both: a BaseException that is not an Exception is not contained."""

    class Stop(BaseException):
        pass

    class Stops:
        async def provide(self, branch: Any, instruction: Any) -> str:
            raise Stop

    registry = REGISTRIES[kind]()
    registry.register(Stops())
    with pytest.raises(Stop):
        asyncio.run(registry.gather(BRANCH, INSTRUCTION))
