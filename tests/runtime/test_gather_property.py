"""Concurrent gather admits and reports exactly what the sequential pass does.

For random provider sets (delays, failures, empty results, sizes, priorities, caps, budgets),
both modes give the same four lists and the same outcome records (all but the durations),
whatever order the concurrent calls happen to finish in.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import composer
from composer.registry import GatherMode


@dataclasses.dataclass(frozen=True)
class Spec:
    delay_ms: int
    result: str | type[Exception] | None
    priority: int
    max_tokens: int | None


class Scripted:
    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        await asyncio.sleep(self.spec.delay_ms / 1000)
        result = self.spec.result
        if isinstance(result, type):
            raise result("scripted failure")
        return result


RESULTS = st.one_of(
    st.none(),
    st.just(""),
    st.sampled_from(["alpha", "alpha beta", "one two three four five", "x " * 40]),
    st.text(max_size=30),
    st.sampled_from([ValueError, RuntimeError, KeyError]),
)
SPECS = st.builds(
    Spec,
    delay_ms=st.integers(0, 3),
    result=RESULTS,
    priority=st.integers(-2, 2),
    max_tokens=st.one_of(st.none(), st.integers(-1, 12)),
)


def report_of(specs: list[Spec], budget: int, mode: GatherMode) -> composer.ProviderReport:
    registry = composer.ContextProviderRegistry(budget=budget, gather=mode)
    for i, spec in enumerate(specs):
        registry.register(
            Scripted(spec), priority=spec.priority, max_tokens=spec.max_tokens, name=f"p{i % 3}"
        )
    return asyncio.run(registry.gather(composer.Branch("s"), composer.Instruction("q")))


def without_durations(report: composer.ProviderReport) -> list[Any]:
    return [o._replace(duration_ms=None) for o in report.outcomes]


@settings(max_examples=150, deadline=None)
@given(specs=st.lists(SPECS, max_size=8), budget=st.integers(-1, 40))
def test_concurrent_reports_equal_sequential_reports(specs: list[Spec], budget: int) -> None:
    sequential = report_of(specs, budget, "sequential")
    concurrent = report_of(specs, budget, "concurrent")
    assert concurrent == sequential  # the ADR's four lists
    assert without_durations(concurrent) == without_durations(sequential)
    assert (concurrent.budget, concurrent.tokens_used) == (
        sequential.budget,
        sequential.tokens_used,
    )
