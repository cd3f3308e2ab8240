"""An audit line read back gives the report's own lists: ``fired``, ``skipped`` (in the
registry's order: over their cap, then over the budget by priority) and ``failed``.

The line does not store the lists; a property test over random provider sets holds the
derivation to what the registry (ADR-0008 D3) built.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import composer
from builtin_providers.static import StaticConfig
from composer.manifest import Manifest
from composer.observe.record import AuditLine, AuditManifest, LineContext, ProviderInfo, json_line
from composer.observe.record import snapshot as take_snapshot

WORDS = ["alpha ", "beta gamma ", "delta epsilon zeta ", "x "]


class Broken:
    name = "broken"

    async def provide(self, branch: Any, instruction: Any) -> str:
        raise RuntimeError("down")


providers = st.lists(
    st.tuples(
        st.integers(-2, 2),  # priority
        st.one_of(st.none(), st.integers(1, 12)),  # max_tokens
        st.sampled_from(WORDS),
        st.integers(1, 6),  # repeats of the word
    ),
    min_size=1,
    max_size=7,
)


@settings(max_examples=150, deadline=None)
@given(providers, st.integers(0, 30), st.booleans())
def test_the_report_lists_follow_from_the_written_outcomes(
    specs: list[tuple[int, int | None, str, int]], budget: int, with_failure: bool
) -> None:
    configs = [
        StaticConfig(name=f"p{i}", text=word * n, priority=priority, max_tokens=cap)
        for i, (priority, cap, word, n) in enumerate(specs)
    ]
    manifest = Manifest(version=1, budget=budget, providers=configs)
    registry = composer.build_registry(manifest)
    infos = [ProviderInfo(c.type, c.priority, c.max_tokens, False) for c in configs]
    names = [c.name for c in configs]
    if with_failure:
        registry.register(Broken(), priority=1)
        infos.append(ProviderInfo("plugin", 1, None, False))
        names.append("broken")
    branch = composer.Branch("sys\n")
    branch._context_providers = registry
    turn = asyncio.run(composer.prepare_turn(branch, "q"))
    report = turn.report
    assert report is not None

    context = LineContext.of(AuditManifest(), infos, names, keep_text=True, redact=str)
    line = AuditLine.model_validate_json(
        json_line(take_snapshot(0.0, report, branch, "q", context))
    )
    assert [(f.provider_name, f.tokens) for f in line.fired] == [
        (r["provider_name"], r["tokens"]) for r in report.fired
    ]
    assert line.skipped == report.skipped
    assert line.failed == report.failed
    assert [p.block.text for p in line.providers if p.block is not None] == report.blocks
