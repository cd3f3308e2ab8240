"""A third-party ranking type opts in to explanations, dedup and fill through
``composer.plugin`` alone, exactly as the built-in file_corpus and memory types do."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

import composer
from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.outcomes import Explanation, explain_turns
from composer.plugin import (
    Candidate,
    ProviderConfig,
    ProviderType,
    Ranking,
    count_tokens,
    explaining,
    ranking_wanted,
    report_ranking,
    search_depth,
)

ENTRIES = {
    "g1": "A canary takes one percent of traffic first.",
    "g2": "A rollback restores the previous release.",
    "g3": "A freeze stops every deploy.",
    "g4": "A hotfix skips the release train.",
}


class GlossaryConfig(ProviderConfig):
    type: Literal["glossary"] = "glossary"
    top_k: int = 2
    entries: dict[str, str] = Field(default_factory=lambda: dict(ENTRIES))


class Glossary:
    """Ranks its entries in their order; the block is one entry a line."""

    def __init__(self, config: GlossaryConfig) -> None:
        self.config = config

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        ids = list(self.config.entries)[: search_depth(self.config.top_k)]
        texts = [self.config.entries[i] for i in ids]
        top = min(self.config.top_k, len(ids))

        def render(indices: Sequence[int]) -> str:
            return "\n".join(texts[i] for i in indices)

        def refit(indices: Sequence[int], tokens: int) -> tuple[str, list[int]] | None:
            held = list(indices)
            while held and count_tokens(render(held)) > tokens:
                held.pop()
            return (render(held), held) if held else None

        if ranking_wanted():
            candidates = [
                Candidate(
                    pid,
                    1.0 / (n + 1),
                    "admitted" if n < top else "beyond_top_k",
                    text,
                    count_tokens(text) if explaining() else None,
                )
                for n, (pid, text) in enumerate(zip(ids, texts, strict=True))
            ]
            report_ranking(self, Ranking(candidates, render, refit))
        return render(range(top))


TYPES = ProviderTypes(
    [ProviderType("glossary", GlossaryConfig, lambda c, ctx: Glossary(c)), static_type]
)


def load(tmp_path: Path, *, budget: int = 1000, runtime: dict[str, Any] | None = None) -> Any:
    rules = {"name": "rules", "type": "static", "priority": 10, "text": ENTRIES["g2"]}
    terms = {"name": "terms", "type": "glossary", "priority": 5}
    document: dict[str, Any] = {"version": 1, "budget": budget, "providers": [rules, terms]}
    if runtime is not None:
        document["runtime"] = runtime
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps(document))
    return composer.load_manifest(path, types=TYPES)


async def turn(manifest: composer.Manifest, *, explain: bool = False) -> composer.ProviderReport:
    branch = composer.Branch("sys\n")
    composer.attach(branch, manifest)
    with explain_turns(explain):
        prepared = await composer.prepare_turn(branch, "deploys")
    assert prepared.report is not None
    return prepared.report


def terms(report: composer.ProviderReport) -> Explanation:
    (found,) = [e for e in report.explanations if e.provider == "terms"]
    return found


async def test_a_plugin_shows_its_candidates_and_near_misses(tmp_path: Path) -> None:
    report = await turn(load(tmp_path), explain=True)
    assert [(c.id, c.fate, c.tokens) for c in terms(report).candidates or []] == [
        (pid, fate, count_tokens(ENTRIES[pid]))
        for pid, fate in zip(ENTRIES, ["admitted"] * 2 + ["beyond_top_k"] * 2, strict=True)
    ]
    assert report.blocks[1] == f"{ENTRIES['g1']}\n{ENTRIES['g2']}"  # searched deeper, same block


async def test_a_plugin_block_is_deduplicated_with_its_own_render(tmp_path: Path) -> None:
    report = await turn(load(tmp_path, runtime={"dedup": "exact"}))
    assert report.blocks == [ENTRIES["g2"], ENTRIES["g1"]]
    dropped = [c for c in terms(report).candidates or [] if c.fate == "duplicate"]
    assert [(c.id, c.duplicate_of) for c in dropped] == [("g2", "rules")]


async def test_a_plugin_block_is_refitted_with_its_own_refit(tmp_path: Path) -> None:
    rules = count_tokens(ENTRIES["g2"])
    budget = rules + count_tokens(ENTRIES["g1"])  # room for one entry of two
    report = await turn(load(tmp_path, budget=budget, runtime={"admission": "fill"}))
    assert report.blocks == [ENTRIES["g2"], ENTRIES["g1"]]
    assert terms(report).refitted
