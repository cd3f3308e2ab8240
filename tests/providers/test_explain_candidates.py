"""An explained turn lists every passage and memory item a provider considered, with its id,
score, tokens and fate, near misses included; a provider lost with its block says what it
needed, what was left and who took the rest.

Real corpora in ``tmp_path``, the real SQLite and JSONL memory stores, turns through
``prepare_turn`` inside ``explain_turns``; what to expect is read from the same index and
store a turn searches, never written down from a run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import composer
from builtin_providers.file_corpus import CorpusIndex, FileCorpusConfig, passage_id
from composer.outcomes import Candidate, Explanation, explain_turns
from composer.tokens import count_tokens

# Five sections, each about disks; "disk" is denser in the earlier ones, so BM25 ranks them
# roughly in file order (the tests read the order from the index, not from this comment).
SECTIONS = {
    "a.md": ("Disk full", "First steps", "The disk is full. Check the disk with df -h."),
    "b.md": ("Disk full", "Logs", "Old logs fill the disk: rotate them, then check the disk."),
    "c.md": ("Cleanup", "Caches", "Clear build caches when a disk fills up after a release."),
    "d.md": ("Volumes", "Resize", "Grow the volume when cleaning does not free the disk " * 3),
    "e.md": ("Alerts", "Thresholds", "The alert fires at 90 percent of the disk " + "x " * 40),
}
QUERY = "disk full"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    for name, (title, section, text) in SECTIONS.items():
        (root / name).write_text(f"# {title}\n\n## {section}\n\n{text}\n")
    return root


def ranking_of(corpus: Path) -> list[tuple[str, float]]:
    """Every passage the index finds for QUERY, best first: (id, score)."""
    index = CorpusIndex(FileCorpusConfig(name="x", root=corpus))
    index.refresh()
    return [(passage_id(p), score) for p, score in index.search(QUERY, 100)]


def load(tmp_path: Path, providers: list[dict[str, Any]], budget: int = 100_000) -> Any:
    path = tmp_path / "m.yaml"
    document = {"version": 1, "budget": budget, "providers": providers}
    path.write_text(json.dumps(document), encoding="utf-8")  # JSON is YAML
    return composer.load_manifest(path)


async def explained(manifest: composer.Manifest, text: str = QUERY) -> composer.ProviderReport:
    branch = composer.Branch("sys\n")
    composer.attach(branch, manifest)
    with explain_turns():
        prepared = await composer.prepare_turn(branch, composer.Instruction(text))
    assert prepared.report is not None
    return prepared.report


def explanation(report: composer.ProviderReport, name: str) -> Explanation:
    (found,) = [e for e in report.explanations if e.provider == name]
    return found


def fates(candidates: list[Candidate] | None) -> list[tuple[str, str]]:
    return [(c.id, c.fate) for c in candidates or []]


def corpus_provider(corpus: Path, **options: Any) -> dict[str, Any]:
    return {"name": "docs", "type": "file_corpus", "root": str(corpus), **options}


async def test_every_passage_considered_is_listed_with_its_fate(
    tmp_path: Path, corpus: Path
) -> None:
    """top_k 3 explains 6 deep: all five matching passages show, three admitted."""
    ranked = ranking_of(corpus)
    assert len(ranked) == 5
    report = await explained(load(tmp_path, [corpus_provider(corpus, top_k=3)]))
    docs = explanation(report, "docs")
    assert docs.outcome == "fired"
    assert fates(docs.candidates) == [
        (pid, "admitted" if n < 3 else "beyond_top_k") for n, (pid, _) in enumerate(ranked)
    ]
    assert [c.score for c in docs.candidates or []] == [round(s, 4) for _, s in ranked]
    for candidate in docs.candidates or []:  # the default template, one hit alone
        path, heading = candidate.id.split("#")
        assert candidate.tokens == count_tokens(f"[{path} > {heading}]\n{candidate.text}\n")


async def test_an_explanation_changes_nothing_the_turn_admits(tmp_path: Path, corpus: Path) -> None:
    manifest = load(tmp_path, [corpus_provider(corpus, top_k=2, min_score=0.1)])
    branch = composer.Branch("sys\n")
    composer.attach(branch, manifest)
    plain = await composer.prepare_turn(branch, composer.Instruction(QUERY))
    report = await explained(manifest)
    assert plain.report is not None
    assert report.blocks == plain.report.blocks
    assert plain.report.explanations == []


async def test_passages_under_min_score_are_shown_as_such(tmp_path: Path, corpus: Path) -> None:
    ranked = ranking_of(corpus)
    floor = (ranked[1][1] + ranked[2][1]) / 2  # the first two pass, the rest do not
    report = await explained(load(tmp_path, [corpus_provider(corpus, top_k=3, min_score=floor)]))
    docs = explanation(report, "docs")
    assert fates(docs.candidates) == [
        (pid, "admitted" if n < 2 else "below_min_score") for n, (pid, _) in enumerate(ranked)
    ]


async def test_passages_left_out_to_fit_the_cap_are_cut_to_fit(
    tmp_path: Path, corpus: Path
) -> None:
    report = await explained(load(tmp_path, [corpus_provider(corpus, top_k=3)]))
    first = (explanation(report, "docs").candidates or [])[0]
    assert first.tokens is not None
    cap = first.tokens + 1  # the best passage fits, the second does not
    report = await explained(load(tmp_path, [corpus_provider(corpus, top_k=3, max_tokens=cap)]))
    ranked = ranking_of(corpus)
    docs = explanation(report, "docs")
    assert fates(docs.candidates)[:3] == [
        (ranked[0][0], "admitted"),
        (ranked[1][0], "cut_to_fit"),
        (ranked[2][0], "cut_to_fit"),
    ]
    assert {fate for _, fate in fates(docs.candidates)[3:]} == {"beyond_top_k"}


async def test_a_block_lost_to_the_budget_says_what_it_needed_and_who_took_the_rest(
    tmp_path: Path, corpus: Path
) -> None:
    rules = {"name": "rules", "type": "static", "priority": 100, "text": "Be brief. " * 20}
    notes = {"name": "notes", "type": "static", "priority": 80, "text": "Notes. " * 10}
    docs = corpus_provider(corpus, top_k=2, priority=50)
    manifest = load(tmp_path, [rules, docs, notes], budget=100_000)
    whole = await explained(manifest)
    used = whole.tokens_used
    needed = whole.fired[1]["tokens"]
    budget = used - 1  # everything but the corpus block's last token fits
    report = await explained(load(tmp_path, [rules, docs, notes], budget=budget))
    lost = explanation(report, "docs")
    taken = whole.fired[0]["tokens"] + whole.fired[2]["tokens"]
    assert (lost.outcome, lost.needed, lost.left) == ("over_budget", needed, budget - taken)
    assert lost.taken_by == ["rules", "notes"]
    assert {c.fate for c in lost.candidates or [] if c.fate != "beyond_top_k"} == {
        "lost_with_block"
    }
    assert report.skipped == ["docs"]  # the ADR's report, unchanged


async def test_a_block_over_its_own_cap_is_lost_with_its_passages(
    tmp_path: Path, corpus: Path
) -> None:
    report = await explained(
        load(tmp_path, [corpus_provider(corpus, top_k=2, max_tokens=5, fit=False)])
    )
    docs = explanation(report, "docs")
    assert docs.outcome == "over_max_tokens"
    assert docs.cap == 5
    assert docs.needed == report.outcomes[0].tokens
    assert docs.needed is not None
    assert docs.needed > 5
    assert [fate for _, fate in fates(docs.candidates)][:2] == ["lost_with_block"] * 2


async def test_a_turn_with_no_hit_still_shows_what_fell_under_min_score(
    tmp_path: Path, corpus: Path
) -> None:
    best = ranking_of(corpus)[0][1]
    report = await explained(load(tmp_path, [corpus_provider(corpus, top_k=2, min_score=best + 1)]))
    docs = explanation(report, "docs")
    assert docs.outcome == "empty"
    assert {fate for _, fate in fates(docs.candidates)} == {"below_min_score"}
    assert len(docs.candidates or []) == 4  # 2 * top_k deep


# ---- memory ---------------------------------------------------------------------------------

NOTES = [
    {"id": "n1", "content": "Disk alerts: the disk filled with logs twice last month."},
    {"id": "n2", "content": "Clean the disk cache before resizing a disk volume."},
    {"id": "n3", "content": "A full disk stopped the database once."},
    {"id": "n4", "content": "Disk usage is graphed on the storage dashboard."},
    {"id": "n5", "content": "Deploys freeze on Fridays."},
]


def memory_provider(tmp_path: Path, source: str, **options: Any) -> dict[str, Any]:
    seed = tmp_path / "notes.jsonl"
    seed.write_text("".join(json.dumps(n) + "\n" for n in NOTES))
    where: dict[str, Any] = (
        {"sqlite": str(tmp_path / "notes.sqlite"), "seed": str(seed)}
        if source == "sqlite"
        else {"jsonl": str(seed)}
    )
    return {
        "name": "mem",
        "type": "memory",
        "source": where,
        "query": {"text": "{{ instruction.text }}", "limit": 2},
        **options,
    }


async def test_memory_items_past_the_limit_are_near_misses(tmp_path: Path) -> None:
    manifest = load(tmp_path, [memory_provider(tmp_path, "sqlite")])
    async with manifest:
        report = await explained(manifest, "disk")
    mem = explanation(report, "mem")
    found = fates(mem.candidates)
    assert [fate for _, fate in found] == ["admitted", "admitted", "beyond_top_k", "beyond_top_k"]
    assert {pid for pid, _ in found} == {"n1", "n2", "n3", "n4"}  # n5 has no disk
    scores = [c.score for c in mem.candidates or []]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert all(c.tokens == count_tokens(f"- {c.text}") for c in mem.candidates or [])
    admitted = [c.text for c in mem.candidates or [] if c.fate == "admitted"]
    assert report.blocks == ["\n".join(f"- {text}" for text in admitted)]


async def test_memory_items_under_min_score_are_shown_as_such(tmp_path: Path) -> None:
    manifest = load(tmp_path, [memory_provider(tmp_path, "sqlite")])
    async with manifest:
        scored = explanation(await explained(manifest, "disk"), "mem").candidates or []
    floor = ((scored[0].score or 0) + (scored[1].score or 0)) / 2  # only the best passes
    manifest = load(tmp_path, [memory_provider(tmp_path, "sqlite", min_score=floor)])
    async with manifest:
        report = await explained(manifest, "disk")
    mem = explanation(report, "mem")
    assert fates(mem.candidates)[0] == (scored[0].id, "admitted")
    assert {fate for _, fate in fates(mem.candidates)[1:]} == {"below_min_score"}


async def test_an_unscored_store_lists_its_items_in_its_order(tmp_path: Path) -> None:
    manifest = load(tmp_path, [memory_provider(tmp_path, "jsonl")])
    report = await explained(manifest, "disk")
    mem = explanation(report, "mem")
    assert fates(mem.candidates) == [
        ("n1", "admitted"),
        ("n2", "admitted"),
        ("n3", "beyond_top_k"),
        ("n4", "beyond_top_k"),
    ]
    assert {c.score for c in mem.candidates or []} == {None}
