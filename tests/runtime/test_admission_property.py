"""Asking for rankings changes nothing the ADR decides.

For random provider sets (failures, empty results, sizes, priorities, caps, budgets, some
providers reporting rankings through ``composer.plugin``), a turn that explains itself, and a
turn deduplicated when no two texts repeat, give exactly the report of a plain turn: the four
lists, the outcome records (all but durations) and the tokens used. Only the explanations are
added, one per registered provider.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field

import composer
from composer.build import build_registry
from composer.catalog import ProviderTypes
from composer.manifest.models import Manifest, RuntimeConfig
from composer.outcomes import explain_turns
from composer.plugin import (
    Candidate,
    ProviderConfig,
    ProviderType,
    Ranking,
    ranking_wanted,
    report_ranking,
)


class ScriptedConfig(ProviderConfig):
    type: Literal["scripted"] = "scripted"
    items: list[str] = Field(default_factory=list)
    fail: bool = False
    ranks: bool = False


class Scripted:
    """Answers its items one a line; a ranking one also reports them, best first."""

    def __init__(self, config: ScriptedConfig) -> None:
        self.config = config

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        config = self.config
        if config.fail:
            raise RuntimeError("scripted failure")
        items = config.items
        if config.ranks and ranking_wanted():
            candidates = [
                Candidate(f"{config.name}/{n}", float(len(items) - n), "admitted", text)
                for n, text in enumerate(items)
            ]

            def render(indices: Sequence[int]) -> str:
                return "\n".join(items[i] for i in indices)

            report_ranking(self, Ranking(candidates, render))
        return "\n".join(items) or None


TYPES = ProviderTypes([ProviderType("scripted", ScriptedConfig, lambda c, ctx: Scripted(c))])


@dataclasses.dataclass(frozen=True)
class Spec:
    items: int
    words: int
    fail: bool
    ranks: bool
    priority: int
    max_tokens: int | None


SPECS = st.builds(
    Spec,
    items=st.integers(0, 4),
    words=st.integers(1, 6),
    fail=st.booleans(),
    ranks=st.booleans(),
    priority=st.integers(-2, 2),
    max_tokens=st.one_of(st.none(), st.integers(0, 30)),
)


def manifest_of(specs: list[Spec], budget: int, runtime: RuntimeConfig) -> Manifest:
    """Every item's words are its own (``p3i1w0 ...``): no two texts repeat anywhere."""
    providers = [
        ScriptedConfig(
            name=f"p{i % 3}",
            priority=spec.priority,
            max_tokens=spec.max_tokens,
            items=[" ".join(f"p{i}i{n}w{w}" for w in range(spec.words)) for n in range(spec.items)],
            fail=spec.fail,
            ranks=spec.ranks,
        )
        for i, spec in enumerate(specs)
    ]
    return Manifest(version=1, budget=budget, providers=providers, runtime=runtime)


def report_of(manifest: Manifest, *, explain: bool = False) -> composer.ProviderReport:
    async def turn() -> composer.ProviderReport:
        registry = build_registry(manifest, types=TYPES)
        with explain_turns(explain):
            return await registry.gather(composer.Branch("s"), composer.Instruction("q"))

    return asyncio.run(turn())


def decided(report: composer.ProviderReport) -> list[Any]:
    """Everything the ADR's admission decides, durations aside."""
    outcomes = [o._replace(duration_ms=None) for o in report.outcomes]
    lists = [report.blocks, report.fired, report.skipped, report.failed]
    return [*lists, outcomes, report.tokens_used]


@settings(max_examples=150, deadline=None)
@given(
    specs=st.lists(SPECS, max_size=7),
    budget=st.integers(0, 60),
    gather=st.sampled_from(["sequential", "concurrent"]),
)
def test_an_explained_turn_admits_exactly_what_a_plain_turn_admits(
    specs: list[Spec], budget: int, gather: Literal["sequential", "concurrent"]
) -> None:
    manifest = manifest_of(specs, budget, RuntimeConfig(gather=gather))
    plain = report_of(manifest)
    explained = report_of(manifest, explain=True)
    assert plain.explanations == []
    assert decided(explained) == decided(plain)
    assert [e.provider for e in explained.explanations] == [c.name for c in manifest.providers]
    assert [e.outcome for e in explained.explanations] == [o.outcome for o in plain.outcomes]


@settings(max_examples=150, deadline=None)
@given(
    specs=st.lists(SPECS, max_size=7),
    budget=st.integers(0, 60),
    dedup=st.sampled_from(["exact", "near"]),
)
def test_dedup_without_repeats_admits_exactly_what_the_adr_admits(
    specs: list[Spec], budget: int, dedup: Literal["exact", "near"]
) -> None:
    plain = report_of(manifest_of(specs, budget, RuntimeConfig()))
    deduplicated = report_of(manifest_of(specs, budget, RuntimeConfig(dedup=dedup)))
    assert decided(deduplicated) == decided(plain)
    fates = {c.fate for e in deduplicated.explanations for c in e.candidates or ()}
    assert "duplicate" not in fates
