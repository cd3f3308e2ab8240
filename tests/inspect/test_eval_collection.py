"""``composer eval`` on the public test collection gives the retrieval benchmark's own nDCG@10.

The benchmark (``benchmarks/bench_retrieval.py``) runs each Cranfield query through
``prepare_turn`` and ranks documents by their best passage; the same manifest, passages and
graded judgements written as a question file must score the same through ``composer eval``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from composer.inspect.evaluation import evaluate
from composer.inspect.questions import load_questions

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_retrieval  # noqa: E402  (a script folder, not a package)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_collection_through_eval_matches_the_benchmark(tmp_path: Path) -> None:
    collection = bench_retrieval.load_collection(bench_retrieval.DATA)
    root = tmp_path / "docs"
    root.mkdir()
    for doc, text in collection.documents.items():
        (root / f"{doc}.txt").write_text(text + "\n", encoding="utf-8")
    qids = sorted(collection.queries, key=int)
    queries = [collection.queries[q] for q in qids]
    rankings = bench_retrieval.file_corpus_rankings(tmp_path, root, queries)
    scores = [
        bench_retrieval.ndcg(r, collection.gains[q]) for r, q in zip(rankings, qids, strict=True)
    ]
    benchmark = sum(scores) / len(scores)

    manifest = {
        "version": 1,
        "budget": 1_000_000,
        "providers": [
            {
                "name": "corpus",
                "type": "file_corpus",
                "root": str(root),
                "top_k": bench_retrieval.DEPTH,
                "template": bench_retrieval.PATHS_TEMPLATE,
            }
        ],
    }
    (tmp_path / "eval.yaml").write_text(json.dumps(manifest))
    questions = {
        "manifest": "eval.yaml",
        "questions": [
            {
                "instruction": collection.queries[q],
                "relevant": {
                    "corpus": {
                        f"{doc}.txt": gain for doc, gain in collection.gains[q].items() if gain > 0
                    }
                },
            }
            for q in qids
        ],
    }
    (tmp_path / "questions.yaml").write_text(json.dumps(questions))
    result = asyncio.run(evaluate(load_questions(str(tmp_path / "questions.yaml")), k=10))
    assert result.problems == []
    assert result.questions == len(qids)
    assert result.providers["corpus"].ndcg == pytest.approx(benchmark, abs=0.001)
    assert benchmark > 0.3  # a real ranking, not two empty ones agreeing
