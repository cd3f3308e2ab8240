"""A corpus block holds the best whole passages that fit its caps; cap failures say how to fix.

Turns run through ``prepare_turn`` with a loaded manifest, so the registry's own count
decides whether a block was admitted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import composer
from builtin_providers.file_corpus import CorpusIndex, FileCorpusConfig, FileCorpusProvider
from composer.errors import ProviderError
from composer.tokens import count_tokens

# Three sections, each a different size, all about rollbacks; "rollback" is rarer in the
# longer ones, so BM25 ranks them small, medium, large.
SMALL = "Rollback: run helm rollback."
MEDIUM = "The rollback of a release " + "uses the previous revision of the chart " * 8
LARGE = "A rollback " + "restores the earlier deployment and its configuration " * 30


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "a.md").write_text(f"# Small\n\n{SMALL}\n")
    (root / "b.md").write_text(f"# Medium\n\n{MEDIUM}\n")
    (root / "c.md").write_text(f"# Large\n\n{LARGE}\n")
    return root


def manifest(
    tmp_path: Path, corpus: Path, *, runtime: dict[str, object] | None = None, **options: object
) -> composer.Manifest:
    """A manifest of one corpus provider named docs (written as YAML, loaded as users do)."""
    provider = {"name": "docs", "type": "file_corpus", "root": str(corpus), **options}
    document: dict[str, object] = {"version": 1, "budget": 100_000, "providers": [provider]}
    if runtime is not None:
        document["runtime"] = runtime
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps(document), encoding="utf-8")  # JSON is YAML
    return composer.load_manifest(path)


async def turn(m: composer.Manifest, text: str = "rollback") -> composer.PreparedTurn:
    branch = composer.Branch("sys\n")
    composer.attach(branch, m)
    return await composer.prepare_turn(branch, composer.Instruction(text))


def block_of(prepared: composer.PreparedTurn) -> str:
    assert prepared.report is not None
    assert len(prepared.report.blocks) == 1, prepared.report
    return prepared.report.blocks[0]


def section_tokens(heading: str, text: str) -> int:
    return count_tokens(f"[{heading[0].lower()}.md > {heading}]\n{text.strip()}\n")


async def test_the_passages_that_fit_are_returned_best_first(tmp_path: Path, corpus: Path) -> None:
    cap = section_tokens("Small", SMALL) + section_tokens("Medium", MEDIUM) + 5
    prepared = await turn(manifest(tmp_path, corpus, max_tokens=cap))
    block = block_of(prepared)
    assert block.startswith("[a.md > Small]\n")
    assert "[b.md > Medium]" in block
    assert "[c.md > Large]" not in block
    assert prepared.report is not None
    assert prepared.report.fired[0]["tokens"] <= cap


async def test_a_smaller_later_passage_still_fits(tmp_path: Path, corpus: Path) -> None:
    """The best passage that does not fit is left out, and a smaller one after it goes in."""
    large = section_tokens("Large", LARGE)
    small = section_tokens("Small", SMALL)
    prepared = await turn(
        manifest(tmp_path, corpus, max_tokens=large + small + 5),
        "restores earlier deployment configuration rollback run helm",
    )
    block = block_of(prepared)
    assert block.startswith("[c.md > Large]\n")
    assert "[a.md > Small]" in block
    assert "[b.md > Medium]" not in block


async def test_nothing_only_when_not_even_the_best_passage_fits(
    tmp_path: Path, corpus: Path
) -> None:
    prepared = await turn(manifest(tmp_path, corpus, max_tokens=3))
    assert prepared.report is not None
    assert prepared.report.blocks == []
    assert prepared.report.skipped == []  # the provider chose nothing; the registry saw no block
    exact = section_tokens("Small", SMALL)
    fits = await turn(manifest(tmp_path, corpus, max_tokens=exact))
    assert block_of(fits) == f"[a.md > Small]\n{SMALL}\n"


async def test_with_fit_off_the_registry_skips_the_block_whole(
    tmp_path: Path, corpus: Path
) -> None:
    cap = section_tokens("Small", SMALL) + 5
    prepared = await turn(manifest(tmp_path, corpus, max_tokens=cap, fit=False))
    assert prepared.report is not None
    assert prepared.report.blocks == []
    assert prepared.report.skipped == ["docs"]


async def test_fitting_leaves_room_for_the_wrap(tmp_path: Path, corpus: Path) -> None:
    wrap = '<context source="{{ provider.name }}" id="{{ nonce }}">\n{{ text }}</context>\n'
    cap = section_tokens("Small", SMALL) + section_tokens("Medium", MEDIUM) + 5
    prepared = await turn(manifest(tmp_path, corpus, max_tokens=cap, runtime={"wrap": wrap}))
    block = block_of(prepared)
    assert block.startswith('<context source="docs"')
    assert "[a.md > Small]" in block
    assert prepared.report is not None
    assert prepared.report.fired[0]["tokens"] <= cap


async def test_the_readme_example_always_gives_a_fitting_best_passage(tmp_path: Path) -> None:
    """top_k 3 under max_tokens 600 with passages near 300 tokens: before fitting, three such
    passages made the block too long and the registry dropped it whole."""
    root = tmp_path / "corpus"
    root.mkdir()
    for i in range(6):
        words = " ".join(f"alpha{i}{j} beta" for j in range(120))
        (root / f"doc{i}.md").write_text(f"# Doc {i}\n\n{words} rollback\n")
    prepared = await turn(manifest(tmp_path, root, top_k=3, max_tokens=600))
    block = block_of(prepared)
    assert 1 <= block.count("[doc") < 3
    assert prepared.report is not None
    assert prepared.report.fired[0]["tokens"] <= 600


async def test_the_render_cap_failure_names_the_cap_the_size_and_the_setting(
    corpus: Path,
) -> None:
    config = FileCorpusConfig(name="docs", root=corpus, top_k=3, fit=False, max_block_chars=200)
    provider = FileCorpusProvider(config, CorpusIndex(config))
    with pytest.raises(ProviderError) as failure:
        await provider.provide(composer.Branch("sys"), composer.Instruction("rollback"))
    message = str(failure.value)
    assert "file_corpus 'docs'" in message
    assert "200-character render cap" in message
    size = len(f"[a.md > Small]\n{SMALL}\n[b.md > Medium]\n{MEDIUM.strip()}\n") + len(
        f"[c.md > Large]\n{LARGE.strip()}\n"
    )
    assert f"the rendered block is {size:,} characters" in message
    assert "raise `max_block_chars` (at most 1,000,000)" in message


async def test_with_fit_the_render_cap_leaves_passages_out(corpus: Path) -> None:
    cap = len(f"[a.md > Small]\n{SMALL}\n") + 10
    config = FileCorpusConfig(name="docs", root=corpus, top_k=3, max_block_chars=cap)
    provider = FileCorpusProvider(config, CorpusIndex(config))
    block = await provider.provide(composer.Branch("sys"), composer.Instruction("rollback"))
    assert block == f"[a.md > Small]\n{SMALL}\n"


async def test_the_render_cap_fails_when_the_best_passage_alone_is_over_it(corpus: Path) -> None:
    config = FileCorpusConfig(name="docs", root=corpus, max_block_chars=10)
    provider = FileCorpusProvider(config, CorpusIndex(config))
    with pytest.raises(ProviderError, match=r"over the 10-character render cap; raise"):
        await provider.provide(composer.Branch("sys"), composer.Instruction("rollback"))


async def test_top_k_100_with_the_default_settings_gives_a_block(tmp_path: Path) -> None:
    """A hundred long passages pass the default render cap: fitting keeps the best that fit
    instead of failing the turn."""
    root = tmp_path / "corpus"
    root.mkdir()
    for i in range(100):
        words = " ".join(f"word{i}x{j}" for j in range(150))
        (root / f"doc{i:03d}.md").write_text(f"# Doc {i}\n\n{words} rollback\n")
    prepared = await turn(manifest(tmp_path, root, top_k=100))
    block = block_of(prepared)
    assert len(block) <= 100_000
    assert block.count("[doc") > 10


def test_the_cap_has_a_hard_ceiling(corpus: Path) -> None:
    with pytest.raises(ValueError, match="max_block_chars"):
        FileCorpusConfig(name="docs", root=corpus, max_block_chars=1_000_001)


async def test_a_template_that_needs_a_hit_is_still_fitted(corpus: Path) -> None:
    """The estimate renders the template without hits; one that cannot is estimated from 0."""
    config = FileCorpusConfig(
        name="docs",
        root=corpus,
        top_k=3,
        max_tokens=section_tokens("Small", SMALL) + 2,
        template="{{ hits[0].path }}{% for hit in hits %}\n{{ hit.text }}{% endfor %}\n",
    )
    provider = FileCorpusProvider(config, CorpusIndex(config))
    block = await provider.provide(composer.Branch("sys"), composer.Instruction("rollback"))
    assert block == f"a.md\n{SMALL}\n"
