"""Retrieval measures of one provider on one labelled question, for ``composer eval``.

A question labels the passages that should reach the model, per provider, each with a gain
(1 unless given): a corpus passage as ``path#Title > Section``, a whole file as its bare
``path`` (any passage of it), a memory item as its id. A candidate (``Candidate.id``)
matches the label equal to its id, else the label equal to its path (the part before ``#``).

The provider's ranked candidates are read as a ranking of *units*: a label counts once, where
its best passage ranks (later passages matching it are not another hit), and when every label
of the question names a whole file, the question is judged by document, so every file counts
once where its best passage ranks, matched or not, as the retrieval benchmark
(``benchmarks/bench_retrieval.py``) ranks documents. Measures at ``k`` units:

- ``ndcg``: DCG of the first ``k`` units' gains (``gain / log2(rank + 1)``) over the ideal's;
- ``recall``: the share of labels found in the first ``k`` units;
- ``mrr``: 1 / the rank of the first labelled unit within ``k``, 0 when none;
- ``injected_recall``: the share of labels matched by a candidate that reached the
  model-visible text (its fate ``admitted``), whatever its rank;
- ``relevant_token_share``: of the tokens of the candidates that reached the text, the share
  that came from labelled ones (0 when none reached it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["MEASURES", "Judged", "Measures", "label_of", "measure", "units"]

MEASURES = ("ndcg", "recall", "mrr", "injected_recall", "relevant_token_share")
"""The measures, in the order they are printed and named in ``--min``."""


@dataclass(frozen=True)
class Judged:
    """One candidate as ``composer eval`` reads it: its id, tokens, and whether it reached
    the model-visible text."""

    id: str
    tokens: int
    injected: bool


@dataclass(frozen=True)
class Measures:
    """The five measures of one provider on one question (or a mean of them)."""

    ndcg: float
    recall: float
    mrr: float
    injected_recall: float
    relevant_token_share: float

    def as_dict(self) -> dict[str, float]:
        return {name: round(getattr(self, name), 6) for name in MEASURES}

    @classmethod
    def mean(cls, many: Sequence[Measures]) -> Measures:
        """The mean of each measure (all zero for none)."""
        count = len(many) or 1
        return cls(*(sum(getattr(m, name) for m in many) / count for name in MEASURES))


def label_of(candidate: str, gains: Mapping[str, float]) -> str | None:
    """The label ``candidate`` matches: its own id, else its path (a whole file), else none."""
    if candidate in gains:
        return candidate
    path = candidate.partition("#")[0]
    return path if path in gains else None


def units(ranked: Sequence[str], gains: Mapping[str, float]) -> list[tuple[str, float]]:
    """The ranking as units, each with its gain: a label once, where it first ranks; by file
    when every label names a whole file (see the module's docstring)."""
    by_document = all("#" not in label for label in gains)
    seen: set[str] = set()
    ranking: list[tuple[str, float]] = []
    for candidate in ranked:
        label = label_of(candidate, gains)
        unit = candidate.partition("#")[0] if by_document else (label or candidate)
        if unit in seen:
            continue
        seen.add(unit)
        ranking.append((unit, gains[label] if label is not None else 0.0))
    return ranking


def measure(candidates: Sequence[Judged], gains: Mapping[str, float], k: int) -> Measures:
    """The measures of one provider's ``candidates`` (best first) against ``gains`` (label ->
    gain above zero) at ``k``."""
    relevant = {label for label, gain in gains.items() if gain > 0}
    top = units([c.id for c in candidates], gains)[:k]
    dcg = sum(gain / math.log2(rank + 2) for rank, (_, gain) in enumerate(top))
    ideal = sorted((gains[label] for label in relevant), reverse=True)[:k]
    best = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal))
    found = {unit for unit, gain in top if gain > 0}
    first = next((rank for rank, (_, gain) in enumerate(top, 1) if gain > 0), None)
    injected = [c for c in candidates if c.injected]
    reached = {label for c in injected if (label := label_of(c.id, gains)) in relevant}
    spent = sum(c.tokens for c in injected)
    useful = sum(c.tokens for c in injected if label_of(c.id, gains) in relevant)
    count = len(relevant) or 1
    return Measures(
        ndcg=dcg / best if best else 0.0,
        recall=len(found & relevant) / count,
        mrr=1 / first if first else 0.0,
        injected_recall=len(reached) / count,
        relevant_token_share=useful / spent if spent else 0.0,
    )
