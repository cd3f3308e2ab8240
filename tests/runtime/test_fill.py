"""``runtime.admission: fill``: a ranking provider's block that does not fit what is left of
the budget is refitted to it (its best whole passages) instead of being dropped whole.

Real corpora in ``tmp_path``; the sizes come from a first turn with a large budget, so the
budgets below leave room for some passages and not all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import composer
from composer.outcomes import Explanation, explain_turns

RULES = {"name": "rules", "type": "static", "priority": 100, "text": "Be brief. " * 12}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    for n in range(5):
        words = " ".join(f"detail{n}x{w}" for w in range(20))
        (root / f"r{n}.md").write_text(
            f"# Restart {n}\n\n## Steps\n\nRestart the api {n}: {words}\n"
        )
    return root


def load(
    tmp_path: Path,
    corpus: Path,
    *,
    budget: int = 100_000,
    runtime: dict[str, Any] | None = None,
    **options: Any,
) -> composer.Manifest:
    docs = {"name": "docs", "type": "file_corpus", "priority": 50, "root": str(corpus), "top_k": 5}
    document: dict[str, Any] = {
        "version": 1,
        "budget": budget,
        "providers": [RULES, {**docs, **options}],
    }
    if runtime is not None:
        document["runtime"] = runtime
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps(document), encoding="utf-8")
    return composer.load_manifest(path)


async def turn(manifest: composer.Manifest, *, explain: bool = False) -> composer.ProviderReport:
    branch = composer.Branch("sys\n")
    composer.attach(branch, manifest)
    with explain_turns(explain):
        prepared = await composer.prepare_turn(branch, "restart the api")
    assert prepared.report is not None
    return prepared.report


def of(report: composer.ProviderReport, name: str) -> Explanation:
    (found,) = [e for e in report.explanations if e.provider == name]
    return found


async def sizes(tmp_path: Path, corpus: Path) -> tuple[int, int, list[int]]:
    """The rules' tokens, the whole corpus block's, and each passage's (rank order)."""
    report = await turn(load(tmp_path, corpus), explain=True)
    tokens = [c.tokens or 0 for c in of(report, "docs").candidates or []]
    return report.fired[0]["tokens"], report.fired[1]["tokens"], tokens


async def test_without_fill_a_block_over_what_is_left_is_skipped_whole(
    tmp_path: Path, corpus: Path
) -> None:
    rules, whole, _ = await sizes(tmp_path, corpus)
    report = await turn(load(tmp_path, corpus, budget=rules + whole - 1))
    assert report.skipped == ["docs"]
    assert [o.outcome for o in report.outcomes] == ["fired", "over_budget"]


async def test_with_fill_the_block_is_refitted_to_what_is_left(
    tmp_path: Path, corpus: Path
) -> None:
    rules, whole, passages = await sizes(tmp_path, corpus)
    budget = rules + sum(passages[:3]) + 2  # room for three passages, not five
    report = await turn(load(tmp_path, corpus, budget=budget, runtime={"admission": "fill"}))
    assert report.skipped == []
    assert [o.outcome for o in report.outcomes] == ["fired", "fired"]
    docs = of(report, "docs")
    assert docs.refitted
    assert (docs.needed, docs.left) == (whole, budget - rules)
    assert docs.tokens == report.fired[1]["tokens"] <= budget - rules
    assert report.tokens_used <= budget
    fates = [c.fate for c in docs.candidates or []]
    assert fates == ["admitted"] * 3 + ["cut_to_fit"] * 2
    for candidate in docs.candidates or []:
        shown = candidate.id.replace("#", " > ")
        assert (f"[{shown}]" in report.blocks[1]) == (candidate.fate == "admitted")


async def test_fill_explains_itself_without_being_asked(tmp_path: Path, corpus: Path) -> None:
    """The refit note is in the report of every turn, explained or not."""
    rules, _, passages = await sizes(tmp_path, corpus)
    report = await turn(
        load(tmp_path, corpus, budget=rules + passages[0] + 1, runtime={"admission": "fill"})
    )
    docs = of(report, "docs")
    assert docs.refitted
    assert [c.fate for c in docs.candidates or []] == ["admitted"] + ["cut_to_fit"] * 4
    assert {c.tokens for c in docs.candidates or []} == {None}  # counted only when explained


async def test_fill_cannot_make_room_that_is_not_there(tmp_path: Path, corpus: Path) -> None:
    rules, whole, passages = await sizes(tmp_path, corpus)
    budget = rules + min(passages) - 1
    report = await turn(
        load(tmp_path, corpus, budget=budget, runtime={"admission": "fill"}), explain=True
    )
    assert report.skipped == ["docs"]
    docs = of(report, "docs")
    assert (docs.outcome, docs.refitted, docs.needed, docs.left) == (
        "over_budget",
        False,
        whole,
        budget - rules,
    )
    assert docs.taken_by == ["rules"]


async def test_fill_leaves_a_provider_that_does_not_rank_to_the_adr(tmp_path: Path) -> None:
    big = {"name": "big", "type": "static", "priority": 10, "text": "Long notes. " * 50}
    path = tmp_path / "m.yaml"
    document = {
        "version": 1,
        "budget": 40,
        "providers": [RULES, big],
        "runtime": {"admission": "fill"},
    }
    path.write_text(json.dumps(document))
    report = await turn(composer.load_manifest(path))
    assert report.skipped == ["big"]
    assert of(report, "big").outcome == "over_budget"


async def test_a_refitted_block_keeps_its_wrap_and_the_turn_nonce(
    tmp_path: Path, corpus: Path
) -> None:
    rules, _, passages = await sizes(tmp_path, corpus)
    wrap = '<doc from="{{ provider.name }}" id="{{ nonce }}">\n{{ text }}\n</doc id="{{ nonce }}">'
    budget = rules + sum(passages[:2]) + 40
    report = await turn(
        load(tmp_path, corpus, budget=budget, runtime={"admission": "fill", "wrap": wrap})
    )
    docs = of(report, "docs")
    assert docs.refitted
    block = report.blocks[1]
    assert block.startswith('<doc from="docs" id="')
    nonce = block.split('id="', 1)[1][:16]
    assert block.endswith(f'</doc id="{nonce}">')
    assert report.fired[1]["tokens"] == composer.count_tokens(block) <= budget - rules
