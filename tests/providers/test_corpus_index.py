"""The corpus index: bm25s's own scores, Snowball stemming, per-file refresh off the turn."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import bm25s
import numpy as np
import pytest

from builtin_providers._bm25 import Counts, TermIds, Terms, Vocabulary, build_index
from builtin_providers.file_corpus import CorpusIndex, FileCorpusConfig, FileCorpusProvider
from composer.turn import Branch, Instruction


def test_the_index_scores_exactly_as_bm25s_index_does() -> None:
    """The matrix built from cached ids is bm25s's own, bit for bit (empty documents too);
    this fails loudly if a bm25s release changes its scoring or its internals."""
    rng = random.Random(3)
    words = [f"w{i}" for i in range(400)]
    documents = [[rng.choice(words) for _ in range(rng.randint(0, 60))] for _ in range(700)]
    vocabulary = Vocabulary()
    counts = Counts.of([vocabulary.encode(d) for d in documents])
    index = build_index([counts], len(vocabulary))
    reference = bm25s.BM25()
    reference.index(documents, show_progress=False)
    for query in (["w1", "w2"], ["w5", "w5", "w9"], ["w399"], ["w7", "absent"]):
        ours = index.scores(vocabulary.lookup(query)).astype(np.float32)
        known = [w for w in query if w in reference.vocab_dict]
        assert np.array_equal(ours, reference.get_scores(known))


def test_counts_of_any_width_score_as_bm25s_does() -> None:
    """Files' counts keep ids and counts in the narrowest type each file needs (here 8, 16 and
    32 bits side by side); the matrix built from them is still bm25s's, bit for bit."""
    rng = random.Random(5)
    vocabulary = Vocabulary()
    early = [["a"] * 300] + [[rng.choice(["a", "b", "c"]) for _ in range(30)] for _ in range(20)]
    middle = [[f"m{rng.randrange(600)}" for _ in range(40)] for _ in range(40)]
    late = [[rng.choice(["a", "m7", "z1", "z2"]) for _ in range(9)] for _ in range(30)]
    parts = [Counts.of([vocabulary.encode(d) for d in docs]) for docs in (early, middle)]
    vocabulary.encode([f"pad{i}" for i in range(70_000)])  # later terms need 32 bits
    parts.append(Counts.of([vocabulary.encode(d) for d in late]))
    assert [p.terms.dtype for p in parts] == [np.uint8, np.uint16, np.uint32]
    assert parts[0].tf.dtype == np.uint16  # a term 300 times in a document
    index = build_index(parts, len(vocabulary))
    reference = bm25s.BM25()
    reference.index(early + middle + late, show_progress=False)
    for query in (["a"], ["m7", "z1"], ["b", "z2", "m3"]):
        ours = index.scores(vocabulary.lookup(query)).astype(np.float32)
        assert np.array_equal(ours, reference.get_scores(query))


def test_an_unknown_term_scores_nothing() -> None:
    vocabulary = Vocabulary()
    index = build_index([Counts.of([vocabulary.encode(["alpha", "beta"])])], len(vocabulary))
    vocabulary.encode(["gamma"])  # known to the vocabulary, absent from this index
    assert not index.scores(vocabulary.lookup(["gamma", "delta"])).any()


def test_terms_are_snowball_stems_without_stop_words() -> None:
    assert Terms()("The deployments were rolled back quickly") == [
        "deploy",
        "roll",
        "back",
        "quick",
    ]
    assert Terms("none")("Deployments rolled") == ["deployments", "rolled"]
    assert Terms("french")("déploiements") == ["déploi"]


@pytest.mark.parametrize("stemmer", ["english", "none", "french"])
def test_term_ids_are_the_vocabulary_ids_of_the_terms(stemmer: str) -> None:
    """A build's ids (each word stemmed once, then looked up) are what stemming every word
    and encoding the terms gives: same ids, assigned in the same order, stop words dropped."""
    rng = random.Random(4)
    words = ["The", "deployments", "deploying", "rolled", "a", "Roll", "déploiements", "x_y"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 12))) for _ in range(50)]
    terms = Terms(stemmer)
    expected, vocabulary = Vocabulary(), Vocabulary()
    term_ids = TermIds(terms, vocabulary)
    for text in texts:
        assert term_ids(text).tolist() == expected.encode(terms(text)).tolist()
    assert vocabulary.ids == expected.ids


def test_an_unknown_stemmer_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown stemmer 'klingon'; known: .*english"):
        FileCorpusConfig(name="d", root=tmp_path, stemmer="klingon")


async def test_a_stemmed_query_finds_other_forms_of_its_words(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Deploys\n\nWe deployed the service twice.\n")
    config = FileCorpusConfig(name="d", root=tmp_path)
    stemmed = FileCorpusProvider(config, CorpusIndex(config))
    assert await stemmed.provide(Branch("s"), Instruction("deploying")) is not None
    plain = FileCorpusConfig(name="d", root=tmp_path, stemmer="none")
    unstemmed = FileCorpusProvider(plain, CorpusIndex(plain))
    assert await unstemmed.provide(Branch("s"), Instruction("deploying")) is None


def write_corpus(root: Path, files: int) -> None:
    for i in range(files):
        (root / f"f{i:02d}.md").write_text(f"# File {i}\n\nword{i} common text\n")


def test_a_refresh_rereads_only_the_changed_files(tmp_path: Path) -> None:
    write_corpus(tmp_path, 20)
    index = CorpusIndex(FileCorpusConfig(name="d", root=tmp_path, refresh_s=0))
    first = index.refresh()
    assert first.reread == 20
    assert index.refresh() is first  # nothing changed: the index is kept
    changed = tmp_path / "f03.md"
    changed.write_text("# File 3\n\nzeppelin now\n")
    os.utime(changed, ns=(1, 1))  # a new mtime whatever the clock's resolution
    (tmp_path / "f04.md").unlink()
    (tmp_path / "new.md").write_text("# New\n\nairship\n")
    stats = index.refresh()
    assert stats.reread == 2
    assert stats.files == 20
    assert [p.path for p, _ in index.search("zeppelin", 3)] == ["f03.md"]
    assert index.search("word3", 3) == []
    assert index.search("word4", 3) == []
    assert [p.path for p, _ in index.search("airship", 3)] == ["new.md"]
    assert index.refresh(force=True).reread == 20


async def test_turns_are_served_by_the_old_index_while_a_refresh_runs(tmp_path: Path) -> None:
    """While a rebuild holds the build lock, turns keep answering from the index there is."""
    write_corpus(tmp_path, 5)
    config = FileCorpusConfig(name="d", root=tmp_path, refresh_s=0)
    index = CorpusIndex(config)
    provider = FileCorpusProvider(config, index)
    assert await provider.provide(Branch("s"), Instruction("word1")) is not None
    (tmp_path / "late.md").write_text("# Late\n\nzeppelin\n")
    with index._build_lock:  # as if a rebuild were under way
        for _ in range(3):
            block = await asyncio.wait_for(
                provider.provide(Branch("s"), Instruction("word1 zeppelin")), timeout=30
            )
            assert block is not None
            assert "zeppelin" not in block
    index.join(timeout=30)
    block = await provider.provide(Branch("s"), Instruction("zeppelin"))
    assert block is not None
    assert "late.md" in block


async def test_one_background_refresh_at_a_time(tmp_path: Path) -> None:
    write_corpus(tmp_path, 3)
    config = FileCorpusConfig(name="d", root=tmp_path, refresh_s=0)
    index = CorpusIndex(config)
    index.refresh()
    before = threading.active_count()
    with index._build_lock:
        for _ in range(20):
            index.ready()
        assert threading.active_count() <= before + 1
    index.join(timeout=30)


async def test_a_failed_background_refresh_keeps_the_old_index(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    write_corpus(root, 2)
    index = CorpusIndex(FileCorpusConfig(name="d", root=root, refresh_s=0))
    index.refresh()
    root.rename(tmp_path / "moved")
    with caplog.at_level(logging.WARNING):
        assert index.ready()
        index.join(timeout=30)
    assert "refresh failed; the previous index keeps serving" in caplog.text
    assert [p.path for p, _ in index.search("word1", 3)] == ["f01.md"]


def test_a_truncated_corpus_is_warned_about_naming_the_setting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_corpus(tmp_path, 6)
    index = CorpusIndex(FileCorpusConfig(name="d", root=tmp_path, max_files=4, refresh_s=0))
    with caplog.at_level(logging.WARNING):
        stats = index.refresh()
    assert stats.truncation == (
        "corpus truncated: 2 files not indexed (2 over max_files); raise the setting to index them"
    )
    assert stats.truncation in caplog.text
    caplog.clear()
    (tmp_path / "f00.md").write_text("# Changed\n\nchanged\n")
    with caplog.at_level(logging.WARNING):
        index.refresh(force=True)
    assert "truncated" not in caplog.text  # said once, not on every refresh
    capped = CorpusIndex(FileCorpusConfig(name="d", root=tmp_path, max_total_bytes=60))
    truncation = capped.refresh().truncation
    assert truncation is not None
    assert "over max_total_bytes" in truncation


def test_a_survey_predicts_the_truncation_without_building(tmp_path: Path) -> None:
    write_corpus(tmp_path, 6)
    by_count = CorpusIndex(FileCorpusConfig(name="d", root=tmp_path, max_files=4))
    assert by_count.survey() == by_count.refresh().truncation
    by_bytes = CorpusIndex(FileCorpusConfig(name="d", root=tmp_path, max_total_bytes=100))
    assert by_bytes.survey() is not None
    assert by_bytes.survey() == by_bytes.refresh().truncation
    whole = CorpusIndex(FileCorpusConfig(name="d", root=tmp_path))
    assert whole.survey() is None
    assert whole.stats is None  # nothing was built


def test_the_vocabulary_is_compacted_when_most_terms_are_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builtin_providers._corpus_index as corpus_index

    monkeypatch.setattr(corpus_index, "_DEAD_TERMS", 10)
    page = tmp_path / "page.md"
    other = tmp_path / "other.md"
    page.write_text(" ".join(f"old{i}" for i in range(50)) + " kept\n")
    other.write_text("unchanged words\n")
    index = CorpusIndex(FileCorpusConfig(name="d", root=tmp_path, refresh_s=0))
    index.refresh()
    for n, text in enumerate(("kept fresh\n", "kept fresh renewed\n"), 1):
        page.write_text(text)
        os.utime(page, ns=(n, n))
        index.refresh()
    snapshot = index._snapshot
    assert snapshot is not None
    assert set(snapshot.vocabulary.ids) == {"kept", "fresh", "renew", "unchang", "word", "page"}
    assert [p.path for p, _ in index.search("fresh kept renewed", 3)] == ["page.md"]
    assert [p.path for p, _ in index.search("unchanged", 3)] == ["other.md"]
    assert index.search("old3", 3) == []
    page.write_text("kept fresh renewed newest\n")
    os.utime(page, ns=(9, 9))
    index.refresh()
    assert [p.path for p, _ in index.search("newest", 3)] == ["page.md"]


def test_preview_shows_the_truncation_warning(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    write_corpus(root, 3)
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "version: 1\nproviders:\n  - {name: docs, type: file_corpus, root: corpus, max_files: 2}\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "composer", "preview", str(manifest), "--instruction", "word1"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert run.returncode == 0, run.stderr
    assert "corpus truncated: 1 file not indexed (1 over max_files)" in run.stderr


def test_a_query_of_a_runbooks_title_finds_it_and_the_hit_shows_the_heading_path(
    tmp_path: Path,
) -> None:
    """H1 title, then sections (the usual runbook): every passage is indexed with the title
    and its parent headings, so the title alone finds the file."""
    (tmp_path / "postgres-disk-full.md").write_text(
        "# PostgreSQL disk almost full\n\n## Symptoms\nThe alert fires above 90 %.\n\n"
        "## First steps\nCheck the WAL folder and old backups.\n"
    )
    (tmp_path / "api.md").write_text("# API outage\n\n## Symptoms\nThe API answers 502.\n")
    index = CorpusIndex(FileCorpusConfig(name="d", root=tmp_path))
    index.refresh()
    hits = index.search("PostgreSQL disk almost full", 3)
    assert hits
    assert {p.path for p, _ in hits} == {"postgres-disk-full.md"}
    assert hits[0][0].heading in {
        "PostgreSQL disk almost full > Symptoms",
        "PostgreSQL disk almost full > First steps",
    }
