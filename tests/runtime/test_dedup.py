"""``runtime.dedup``: one fact reaches the model once, whichever providers carry it.

A runbook passage (file_corpus, priority 50) and memory notes (the real SQLite store, priority
40) that repeat it: with dedup the lower-priority copy is removed before its block is counted
and the explanation names the provider whose copy was kept; without, the ADR's behaviour.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import composer
from composer._admission import NEAR, similarity
from composer.outcomes import Explanation

PASSAGE = (
    "Roll back when a release raises the error rate above 1% or the p95 latency above 800 ms "
    "for more than five minutes, and the cause is not obviously outside the release."
)
OTHER = "Tell the release channel before rolling back the database migrations by hand."


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "rollback.md").write_text(f"# Deploy rollback\n\n## When to roll back\n\n{PASSAGE}\n")
    return root


def load(
    tmp_path: Path,
    corpus: Path,
    notes: list[str],
    *,
    runtime: dict[str, Any] | None = None,
    budget: int = 100_000,
    extra: list[dict[str, Any]] | None = None,
) -> composer.Manifest:
    seed = tmp_path / "notes.jsonl"
    seed.write_text(
        "".join(json.dumps({"id": f"n{i}", "content": n}) + "\n" for i, n in enumerate(notes, 1))
    )
    providers = [
        {"name": "runbooks", "type": "file_corpus", "priority": 50, "root": str(corpus)},
        {
            "name": "team-memory",
            "type": "memory",
            "priority": 40,
            "source": {"sqlite": str(tmp_path / "notes.sqlite"), "seed": str(seed)},
            "query": {"text": "roll back release", "limit": 5},
            "header": "Notes:",
        },
        *(extra or []),
    ]
    document: dict[str, Any] = {"version": 1, "budget": budget, "providers": providers}
    if runtime is not None:
        document["runtime"] = runtime
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps(document), encoding="utf-8")
    return composer.load_manifest(path)


async def turn(manifest: composer.Manifest) -> composer.PreparedTurn:
    async with manifest:
        branch = composer.Branch("sys\n")
        composer.attach(branch, manifest)
        return await composer.prepare_turn(branch, "when do we roll back a release?")


def explained(prepared: composer.PreparedTurn, name: str) -> Explanation:
    assert prepared.report is not None
    (found,) = [e for e in prepared.report.explanations if e.provider == name]
    return found


def times_seen(prepared: composer.PreparedTurn, text: str) -> int:
    assert prepared.guidance is not None
    return prepared.guidance.count(text)


async def test_without_dedup_the_repeated_note_is_injected_twice(
    tmp_path: Path, corpus: Path
) -> None:
    prepared = await turn(load(tmp_path, corpus, [PASSAGE, OTHER]))
    assert times_seen(prepared, PASSAGE) == 2
    assert prepared.report is not None
    assert prepared.report.explanations == []  # nothing beyond the ADR was asked


async def test_exact_dedup_injects_the_note_once_and_names_the_kept_copy(
    tmp_path: Path, corpus: Path
) -> None:
    prepared = await turn(load(tmp_path, corpus, [PASSAGE, OTHER], runtime={"dedup": "exact"}))
    assert times_seen(prepared, PASSAGE) == 1
    assert times_seen(prepared, OTHER) == 1
    memory = explained(prepared, "team-memory")
    (dropped,) = [c for c in memory.candidates or [] if c.fate == "duplicate"]
    assert (dropped.id, dropped.duplicate_of) == ("n1", "runbooks")
    assert dropped.duplicate_of_id == "rollback.md#Deploy rollback > When to roll back"
    assert prepared.report is not None
    assert prepared.report.blocks[1] == f"Notes:\n- {OTHER}"  # re-rendered without it
    assert prepared.report.fired[1]["tokens"] == composer.count_tokens(f"Notes:\n- {OTHER}")


async def test_case_and_punctuation_do_not_hide_a_repeat(tmp_path: Path, corpus: Path) -> None:
    shouted = PASSAGE.upper().replace(",", " ;").replace("%", "")
    plain = await turn(load(tmp_path, corpus, [shouted, OTHER]))
    assert times_seen(plain, shouted) == 1  # the store finds it
    prepared = await turn(load(tmp_path, corpus, [shouted, OTHER], runtime={"dedup": "exact"}))
    assert times_seen(prepared, shouted) == 0


async def test_a_block_left_empty_by_dedup_is_empty_and_leaves_no_row(
    tmp_path: Path, corpus: Path
) -> None:
    prepared = await turn(load(tmp_path, corpus, [PASSAGE], runtime={"dedup": "exact"}))
    report = prepared.report
    assert report is not None
    assert [row["provider_name"] for row in report.fired] == ["runbooks"]
    assert report.skipped == []
    assert [o.outcome for o in report.outcomes] == ["fired", "empty"]
    assert explained(prepared, "team-memory").outcome == "empty"


async def test_the_tokens_saved_go_to_the_budget(tmp_path: Path, corpus: Path) -> None:
    """A later provider that did not fit beside the duplicate fits once it is gone."""
    tail = {"name": "tail", "type": "static", "priority": 10, "text": "Page the release owner."}
    whole = await turn(load(tmp_path, corpus, [PASSAGE, OTHER], extra=[tail]))
    assert whole.report is not None
    budget = whole.report.tokens_used - 1  # the tail does not fit beside both copies
    plain = await turn(load(tmp_path, corpus, [PASSAGE, OTHER], extra=[tail], budget=budget))
    assert plain.report is not None
    assert plain.report.skipped == ["tail"]
    deduplicated = await turn(
        load(
            tmp_path,
            corpus,
            [PASSAGE, OTHER],
            extra=[tail],
            budget=budget,
            runtime={"dedup": "exact"},
        )
    )
    assert deduplicated.report is not None
    assert deduplicated.report.skipped == []
    assert [r["provider_name"] for r in deduplicated.report.fired] == [
        "runbooks",
        "team-memory",
        "tail",
    ]


async def test_a_plain_block_loses_the_paragraph_that_repeats(tmp_path: Path, corpus: Path) -> None:
    rules = {
        "name": "rules",
        "type": "static",
        "priority": 10,
        "text": f"Answer in English.\n\n{PASSAGE}\n\nPut the command first.",
    }
    prepared = await turn(
        load(tmp_path, corpus, [OTHER], extra=[rules], runtime={"dedup": "exact"})
    )
    assert prepared.report is not None
    assert prepared.report.blocks[-1] == "Answer in English.\n\nPut the command first."
    (dropped,) = explained(prepared, "rules").candidates or []
    assert (dropped.id, dropped.fate, dropped.duplicate_of) == (
        "paragraph 2",
        "duplicate",
        "runbooks",
    )


async def test_a_repeat_within_one_block_is_dropped_too(tmp_path: Path, corpus: Path) -> None:
    prepared = await turn(load(tmp_path, corpus, [OTHER, OTHER + "  "], runtime={"dedup": "exact"}))
    assert times_seen(prepared, OTHER) == 1
    memory = explained(prepared, "team-memory")
    assert [(c.fate, c.duplicate_of) for c in memory.candidates or []] == [
        ("admitted", None),
        ("duplicate", "team-memory"),
    ]


def reworded(changes: int) -> str:
    """PASSAGE with ``changes`` words replaced, far apart."""
    found = PASSAGE.split()
    for n in range(changes):
        found[4 + 10 * n] = "zzz"
    return " ".join(found)


async def test_near_dedup_drops_a_slightly_reworded_copy(tmp_path: Path, corpus: Path) -> None:
    close = reworded(1)
    assert NEAR <= similarity(close, PASSAGE) < 1
    exact = await turn(load(tmp_path, corpus, [close, OTHER], runtime={"dedup": "exact"}))
    assert times_seen(exact, close) == 1  # exact keeps it: the words differ
    near = await turn(load(tmp_path, corpus, [close, OTHER], runtime={"dedup": "near"}))
    assert times_seen(near, close) == 0
    (dropped,) = [
        c for c in explained(near, "team-memory").candidates or [] if c.fate == "duplicate"
    ]
    assert dropped.duplicate_of == "runbooks"


async def test_near_dedup_keeps_a_copy_reworded_more(tmp_path: Path, corpus: Path) -> None:
    far = reworded(3)
    assert similarity(far, PASSAGE) < NEAR
    near = await turn(load(tmp_path, corpus, [far, OTHER], runtime={"dedup": "near"}))
    assert times_seen(near, far) == 1


def test_similarity_is_the_jaccard_of_three_word_shingles() -> None:
    assert similarity("a b c d", "a b c d") == 1.0
    assert similarity("a b c d", "a b c e") == pytest.approx(1 / 3)  # {abc, bcd} vs {abc, bce}
    assert similarity("A, b!", "a b") == 1.0
    assert similarity("", "a") == 0.0


async def test_a_notice_left_empty_by_dedup_still_says_its_provider_failed(
    tmp_path: Path, corpus: Path
) -> None:
    """A failing provider whose ``on_failure`` notice repeats what was admitted: no block,
    but its outcome stays ``failed`` and the report lists it as degraded."""
    broken = {
        "name": "broken",
        "type": "static",
        "priority": 5,
        "text": "{{ instruction.context.ticket.title }}",
        "on_failure": {"notice": OTHER},
    }
    prepared = await turn(
        load(tmp_path, corpus, [OTHER], extra=[broken], runtime={"dedup": "exact"})
    )
    report = prepared.report
    assert report is not None
    assert times_seen(prepared, OTHER) == 1
    assert [o.outcome for o in report.outcomes] == ["fired", "fired", "failed"]
    assert [d["provider_name"] for d in report.degraded] == ["broken"]
    assert report.skipped == []
    assert report.failed == []  # a notice stands in: ADR D2's failed list is for no answer
