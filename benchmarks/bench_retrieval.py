"""Ranking quality of file_corpus on a public test collection, through prepare_turn.

Run from the repository root:  .venv/bin/python benchmarks/bench_retrieval.py [--collection DIR]

The collection (default: benchmarks/data/cranfield) is a folder with a ``collection.json``
naming its documents and queries (SMART format: ``.I`` records with ``.T``/``.W`` fields),
its judgements (``query doc code`` or TREC's ``query 0 doc code`` lines), the gain of each
code, and whether judgements number queries by position. Each document becomes a file in a
temporary folder; a manifest with one ``file_corpus`` provider (``top_k: 100``, a template
that prints only paths) runs every query through ``prepare_turn`` as a user would, and the
block is read back as a ranking of documents (a document ranks where its best passage does).

Baselines, in the same process on the same passages (``split_passages`` with the provider's
settings, heading and text as the index sees them):

- bm25s used directly: ``bm25s.tokenize`` with its English stop words and PyStemmer's
  English stemmer, ``BM25()``, ``retrieve``;
- bm25s with file_corpus's wider stop-word list and the plural folding (Harman's S-stemmer)
  that file_corpus used before it took a Snowball stemmer;
- rank_bm25's ``BM25Okapi`` over the same tokens as the first baseline.

Reported per system: nDCG@10 (graded gains), MAP and recall@100 (codes with a positive gain
are relevant), each as a ratio to bm25s + PyStemmer, with a paired randomisation test on
nDCG@10. Then two checks of what users see: the README's example settings (``top_k: 3``,
``max_tokens: 600``, default template), and ``top_k: 100`` with the default template, each
with ``fit`` on and off.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import math
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN_PLUS
from rank_bm25 import BM25Okapi

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import composer
from builtin_providers._chunking import split_passages
from composer.tokens import count_tokens, encoding

DATA = Path(__file__).resolve().parent / "data" / "cranfield"
DEPTH = 100
PATHS_TEMPLATE = "{% for hit in hits %}{{ hit.path }}\n{% endfor %}"
PERMUTATIONS = 10_000
_MANIFESTS = itertools.count()


@dataclass
class Collection:
    name: str
    documents: dict[str, str]
    queries: dict[str, str]
    gains: dict[str, dict[str, float]]  # query -> document -> gain (judged documents only)


def smart_records(path: Path) -> list[tuple[str, dict[str, str]]]:
    """``(id, {field: text})`` of each ``.I`` record of a SMART-format file."""
    text = path.read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n")
    records: list[tuple[str, dict[str, str]]] = []
    for chunk in re.split(r"^\.I\s+", text, flags=re.M)[1:]:
        first, _, rest = chunk.partition("\n")
        fields: dict[str, str] = {}
        for match in re.finditer(r"^\.([A-Z])\s*\n(.*?)(?=^\.[A-Z]\s*$|\Z)", rest, re.M | re.S):
            fields[match.group(1)] = match.group(2).strip()
        records.append((first.strip(), fields))
    return records


def load_collection(folder: Path) -> Collection:
    spec = json.loads((folder / "collection.json").read_text())
    documents = {
        str(int(i)): f.get("W") or f.get("T", "")
        for i, f in smart_records(folder / spec["documents"])
    }
    queries: dict[str, str] = {}
    for position, (i, f) in enumerate(smart_records(folder / spec["queries"]), 1):
        key = str(position) if spec.get("query_ids") == "position" else str(int(i))
        queries[key] = " ".join(f.get("W", "").split())
    code_gain = {str(k): float(v) for k, v in spec["gains"].items()}
    gains: dict[str, dict[str, float]] = {}
    for line in (folder / spec["qrels"]).read_text().split("\n"):
        parts = line.split()
        if len(parts) == 4:  # TREC: query, iteration, document, code
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            continue
        query, document, code = str(int(parts[0])), str(int(parts[1])), parts[2]
        gains.setdefault(query, {})[document] = code_gain.get(code, 0.0)
    judged = {q: t for q, t in queries.items() if any(g > 0 for g in gains.get(q, {}).values())}
    return Collection(spec["name"], documents, judged, gains)


# ----------------------------------------------------------------------------- metrics


def ndcg(ranking: Sequence[str], gains: dict[str, float], k: int = 10) -> float:
    dcg = sum(gains.get(d, 0.0) / math.log2(i + 2) for i, d in enumerate(ranking[:k]))
    ideal = sorted((g for g in gains.values() if g > 0), reverse=True)[:k]
    best = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / best if best else 0.0


def average_precision(ranking: Sequence[str], gains: dict[str, float]) -> float:
    relevant = {d for d, g in gains.items() if g > 0}
    found, total = 0, 0.0
    for i, d in enumerate(ranking[:DEPTH], 1):
        if d in relevant:
            found += 1
            total += found / i
    return total / len(relevant) if relevant else 0.0


def recall(ranking: Sequence[str], gains: dict[str, float]) -> float:
    relevant = {d for d, g in gains.items() if g > 0}
    return len(relevant & set(ranking[:DEPTH])) / len(relevant) if relevant else 0.0


def randomisation_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired randomisation test of mean(a) - mean(b) (fixed seed)."""
    diff = np.asarray(a) - np.asarray(b)
    observed = abs(diff.mean())
    signs = np.random.default_rng(13).choice([-1.0, 1.0], size=(PERMUTATIONS, len(diff)))
    return float(
        ((np.abs((signs * diff).mean(axis=1)) >= observed - 1e-12).sum() + 1) / (PERMUTATIONS + 1)
    )


# ----------------------------------------------------------------------------- systems

Ranker = Callable[[str], list[str]]  # query -> document ids, best first


def documents_of(paths: Sequence[str]) -> list[str]:
    """Paths of passages, best first, as documents ranked by their best passage."""
    seen: dict[str, None] = {}
    for path in paths:
        seen.setdefault(Path(path).stem, None)
    return list(seen)


def manifest_at(folder: Path, root: Path, **options: Any) -> composer.Manifest:
    provider = {"name": "corpus", "type": "file_corpus", "root": str(root), "refresh_s": 3600}
    provider.update(options)
    path = folder / f"manifest{next(_MANIFESTS)}.yaml"
    path.write_text(json.dumps({"version": 1, "budget": 1_000_000, "providers": [provider]}))
    return composer.load_manifest(path)


def turns(manifest: composer.Manifest, queries: list[str]) -> list[composer.ProviderReport]:
    """One prepare_turn per query on a branch the manifest is attached to."""
    branch = composer.Branch("You answer questions about aeronautics.\n")
    composer.attach(branch, manifest)

    async def run() -> list[composer.ProviderReport]:
        reports = []
        for query in queries:
            prepared = await composer.prepare_turn(branch, composer.Instruction(query))
            assert prepared.report is not None
            reports.append(prepared.report)
        return reports

    return asyncio.run(run())


def file_corpus_rankings(
    folder: Path, root: Path, queries: list[str], **options: Any
) -> list[list[str]]:
    manifest = manifest_at(folder, root, top_k=DEPTH, template=PATHS_TEMPLATE, **options)
    rankings = []
    for report in turns(manifest, queries):
        block = report.blocks[0] if report.blocks else ""
        rankings.append(documents_of([line for line in block.split("\n") if line]))
    return rankings


def s_stem(word: str) -> str:
    """Harman's S-stemmer, as file_corpus had it: English plurals folded, nothing more."""
    if len(word) > 3 and word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if len(word) > 2 and word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


_WORD = re.compile(r"[^\W_]+")
_PLUS = frozenset(STOPWORDS_EN_PLUS)


def plural_folded(text: str) -> list[str]:
    return [s_stem(w) for w in _WORD.findall(text.lower()) if w not in _PLUS]


_ENGLISH = Stemmer.Stemmer("english")


def pystemmer_tokens(texts: list[str]) -> list[list[str]]:
    """bm25s's own tokenizer with its English stop words and PyStemmer's English stemmer."""
    tokens: list[list[str]] = bm25s.tokenize(
        texts, stopwords="en", stemmer=_ENGLISH.stemWords, show_progress=False, return_ids=False
    )
    return tokens


def best_documents(scores: Any, owners: list[str]) -> list[str]:
    """Documents by their best passage's score (passages scoring 0 left out)."""
    order = np.argsort(-np.asarray(scores), kind="stable")[:DEPTH]
    return documents_of([owners[i] for i in order if scores[i] > 0])


def bm25s_ranker(texts: list[str], owners: list[str], terms: Callable[[str], list[str]]) -> Ranker:
    """bm25s over ``texts`` with the given terms of a text."""
    retriever = bm25s.BM25()
    retriever.index([terms(t) for t in texts], show_progress=False)

    def rank(query: str) -> list[str]:
        known = [t for t in terms(query) if t in retriever.vocab_dict]
        return best_documents(retriever.get_scores(known), owners) if known else []

    return rank


def rank_bm25_ranker(texts: list[str], owners: list[str]) -> Ranker:
    okapi = BM25Okapi(pystemmer_tokens(texts))
    return lambda query: best_documents(okapi.get_scores(pystemmer_tokens([query])[0]), owners)


# ----------------------------------------------------------------------------- checks


def readme_example(folder: Path, root: Path, queries: list[str]) -> list[str]:
    """The README's example (top_k 3, max_tokens 600, default template), fit on and off."""
    lines = []
    for fit in (True, False):
        manifest = manifest_at(folder, root, top_k=3, max_tokens=600, fit=fit)
        # the best passage, as the provider ranks it, rendered alone
        best_fits = []
        probe = manifest_at(folder, root, top_k=1, fit=False)
        for report in turns(probe, queries):
            best_fits.append(bool(report.blocks) and count_tokens(report.blocks[0]) <= 600)
        reports = turns(manifest, queries)
        empty = sum(1 for r in reports if not r.blocks)
        missed = sum(1 for r, fits in zip(reports, best_fits, strict=True) if fits and not r.blocks)
        lines.append(
            f"| top_k 3, max_tokens 600, fit: {str(fit).lower()} | {empty}/{len(queries)} "
            f"| {missed} | {sum(best_fits)} |"
        )
    return lines


def top_k_100(folder: Path, root: Path, queries: list[str]) -> list[str]:
    lines = []
    example = ""
    for fit in (True, False):
        reports = turns(manifest_at(folder, root, top_k=100, fit=fit), queries)
        failed = sum(1 for r in reports if r.failed)
        for r in reports:
            for outcome in r.outcomes:
                if outcome.error and not example:
                    example = outcome.error
        shown = [r.blocks[0].count("\n[") + 1 for r in reports if r.blocks]
        mean = sum(shown) / len(shown) if shown else 0
        lines.append(
            f"| top_k 100, default template, fit: {str(fit).lower()} | {failed}/{len(queries)} "
            f"| {mean:.1f} |"
        )
    if example:
        lines.append(f"\nfailure message: `{example}`")
    return lines


# ----------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--collection", type=Path, default=DATA)
    args = parser.parse_args()
    collection = load_collection(args.collection)
    # fit: false makes turns fail on purpose; the registry logs each with a traceback
    logging.getLogger("composer.registry").setLevel(logging.ERROR)
    encoding()
    qids = sorted(collection.queries, key=int)
    queries = [collection.queries[q] for q in qids]

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        root = folder / "docs"
        root.mkdir()
        for doc, text in collection.documents.items():
            (root / f"{doc}.txt").write_text(text + "\n", encoding="utf-8")
        passages = [
            p
            for path in sorted(root.iterdir())
            for p in split_passages(path.name, path.read_text(encoding="utf-8"), "heading", 300)
        ]
        texts = [f"{p.heading or ''}\n{p.text}" for p in passages]
        owners = [p.path for p in passages]

        systems: dict[str, list[list[str]]] = {}
        systems["file_corpus (prepare_turn)"] = file_corpus_rankings(folder, root, queries)
        systems["file_corpus, stemmer: none"] = file_corpus_rankings(
            folder, root, queries, stemmer="none"
        )
        for name, ranker in (
            ("bm25s + PyStemmer", bm25s_ranker(texts, owners, lambda t: pystemmer_tokens([t])[0])),
            (
                "bm25s, wider stop words + plural folding",
                bm25s_ranker(texts, owners, plural_folded),
            ),
            (
                "rank_bm25 BM25Okapi (same tokens as bm25s + PyStemmer)",
                rank_bm25_ranker(texts, owners),
            ),
        ):
            systems[name] = [ranker(q) for q in queries]
        checks = readme_example(folder, root, queries)
        overflow = top_k_100(folder, root, queries)

    scores = {
        name: (
            [ndcg(r, collection.gains[q]) for r, q in zip(rankings, qids, strict=True)],
            [
                average_precision(r, collection.gains[q])
                for r, q in zip(rankings, qids, strict=True)
            ],
            [recall(r, collection.gains[q]) for r, q in zip(rankings, qids, strict=True)],
        )
        for name, rankings in systems.items()
    }
    baseline = scores["bm25s + PyStemmer"]
    mean = statistics_mean
    print(
        f"{collection.name}: {len(collection.documents)} documents, {len(passages)} passages, "
        f"{len(queries)} judged queries"
    )
    print(
        "| system | nDCG@10 | MAP | recall@100 | nDCG@10 ratio | MAP ratio | recall ratio | p (nDCG@10) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, (n, m, r) in scores.items():
        p = "" if name == "bm25s + PyStemmer" else f"{randomisation_p(n, baseline[0]):.3f}"
        print(
            f"| {name} | {mean(n):.4f} | {mean(m):.4f} | {mean(r):.4f} | "
            f"{mean(n) / mean(baseline[0]):.3f} | {mean(m) / mean(baseline[1]):.3f} | "
            f"{mean(r) / mean(baseline[2]):.3f} | {p} |"
        )
    print()
    print(
        "| settings | turns with no corpus block | of them, best passage fits | best passage fits |"
    )
    print("|---|---|---|---|")
    print("\n".join(checks))
    print()
    print("| settings | turns failed | passages in the block (mean) |")
    print("|---|---|---|")
    print("\n".join(overflow))


def statistics_mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


if __name__ == "__main__":
    main()
