"""The measures of ``composer eval`` on hand-worked rankings."""

from __future__ import annotations

import math

import pytest

from composer.inspect.metrics import Judged, Measures, label_of, measure, units


def ranked(*ids: str, injected: int = 0, tokens: int = 10) -> list[Judged]:
    """Candidates best first; the first ``injected`` reached the text."""
    return [Judged(i, tokens, n < injected) for n, i in enumerate(ids)]


def test_a_label_matches_its_passage_or_its_whole_file() -> None:
    gains = {"a.md#A > One": 1.0, "b.md": 2.0}
    assert label_of("a.md#A > One", gains) == "a.md#A > One"
    assert label_of("a.md#A > Two", gains) is None
    assert label_of("b.md#B > Any", gains) == "b.md"
    assert label_of("m7", {"m7": 1.0}) == "m7"


def test_a_whole_file_counts_once_where_its_best_passage_ranks() -> None:
    gains = {"a.md": 1.0, "b.md": 1.0}
    got = units(["a.md#1", "c.md#1", "a.md#2", "c.md#2", "b.md#1"], gains)
    # judged by document: c.md also counts once, as the retrieval benchmark ranks documents
    assert got == [("a.md", 1.0), ("c.md", 0.0), ("b.md", 1.0)]


def test_passage_labels_rank_unlabelled_passages_each_on_its_own() -> None:
    gains = {"a.md#A > One": 1.0}
    got = units(["c.md#1", "c.md#2", "a.md#A > One"], gains)
    assert got == [("c.md#1", 0.0), ("c.md#2", 0.0), ("a.md#A > One", 1.0)]


def test_ndcg_recall_and_mrr_at_k() -> None:
    gains = {"x": 3.0, "y": 1.0}
    result = measure(ranked("n1", "x", "n2", "y"), gains, k=3)
    dcg = 3 / math.log2(3)
    ideal = 3 / math.log2(2) + 1 / math.log2(3)
    assert result.ndcg == pytest.approx(dcg / ideal)
    assert result.recall == 0.5  # y ranks 4th, beyond k
    assert result.mrr == 0.5
    assert measure(ranked("x", "y"), gains, k=10).ndcg == pytest.approx(1.0)
    assert measure(ranked("n1", "n2"), gains, k=10) == Measures(0, 0, 0, 0, 0)


def test_injected_recall_and_token_share_read_what_reached_the_text() -> None:
    gains = {"x": 1.0, "y": 1.0}
    candidates = [
        Judged("x", 30, True),
        Judged("n", 10, True),
        Judged("y", 50, False),  # ranked, but cut: not injected
    ]
    result = measure(candidates, gains, k=10)
    assert result.recall == 1.0
    assert result.injected_recall == 0.5
    assert result.relevant_token_share == pytest.approx(30 / 40)
    assert measure(ranked("x"), gains, k=10).relevant_token_share == 0.0  # nothing injected


def test_the_mean_of_measures() -> None:
    mean = Measures.mean([Measures(1, 1, 1, 1, 1), Measures(0, 0.5, 0, 0, 0)])
    assert mean == Measures(0.5, 0.75, 0.5, 0.5, 0.5)
    assert Measures.mean([]) == Measures(0, 0, 0, 0, 0)
