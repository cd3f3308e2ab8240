"""BM25 terms of a text, and a bm25s index built from term ids cached per document.

``bm25s.BM25.index`` starts from strings and loops in Python over every document, so a
change to one file would cost a full rebuild holding the interpreter lock. Here each file's
terms are turned into ids once, when the file is read; a rebuild is a few numpy passes over
the cached ids (sorting, counting, one vectorised score), most of which release the lock, so
a turn served meanwhile is not held up. The score matrix is bm25s's own (Lucene variant,
``k1=1.5``, ``b=0.75``, float32, CSC by term), set on a ``bm25s.BM25`` whose scoring the
queries use, and a test holds it equal to ``bm25s.BM25.index`` on the same terms.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import bm25s
import numpy as np
import numpy.typing as npt
import Stemmer
from bm25s.stopwords import STOPWORDS_EN_PLUS

__all__ = ["STEMMERS", "Bm25Index", "Ids", "Terms", "Vocabulary", "build_index"]

STEMMERS = frozenset(Stemmer.algorithms()) | {"none"}
"""The ``stemmer`` names: PyStemmer's Snowball algorithms, and ``none``."""

_STOPWORDS = frozenset(STOPWORDS_EN_PLUS)
_WORD = re.compile(r"[^\W_]+")
# bm25s's defaults, which the equality test pins.
_K1 = 1.5
_B = 0.75

Ids = npt.NDArray[np.int32]


class Terms:
    """Text to BM25 terms: lower-case alphanumeric runs, English stop words dropped, stemmed.

    The stop words are bm25s's wider English list (``STOPWORDS_EN_PLUS``), which measured
    better than its short one. A PyStemmer stemmer keeps state, so each thread gets its own.
    """

    def __init__(self, stemmer: str = "english") -> None:
        if stemmer not in STEMMERS:
            raise ValueError(f"unknown stemmer {stemmer!r}")
        self.stemmer = stemmer
        self._local = threading.local()

    def _stem(self) -> Callable[[list[str]], list[str]] | None:
        if self.stemmer == "none":
            return None
        stem: Callable[[list[str]], list[str]] | None = getattr(self._local, "stem", None)
        if stem is None:
            stem = Stemmer.Stemmer(self.stemmer).stemWords
            self._local.stem = stem
        return stem

    def __call__(self, text: str) -> list[str]:
        words = [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]
        stem = self._stem()
        return stem(words) if stem is not None and words else words


class Vocabulary:
    """Term -> id, assigned once and never changed, so cached ids stay valid.

    Only the index builder adds terms (under its lock); queries only read.
    """

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def encode(self, terms: list[str]) -> Ids:
        ids = self.ids
        return np.fromiter(
            (ids.setdefault(term, len(ids)) for term in terms), dtype=np.int32, count=len(terms)
        )

    def lookup(self, terms: list[str]) -> list[int]:
        """The ids of the terms already known (repeats kept: a repeated word counts twice)."""
        ids = self.ids
        return [i for i in map(ids.get, terms) if i is not None]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Bm25Index:
    """A bm25s retriever over documents; ``columns`` are the vocabulary ids it has, sorted."""

    retriever: Any  # bm25s.BM25 with its score matrix set
    columns: Ids
    documents: int

    def scores(self, ids: Sequence[int]) -> npt.NDArray[np.float64]:
        """BM25 score of every document for the query term ``ids`` (zeros when none is known)."""
        if not ids or not self.documents:
            return np.zeros(self.documents)
        wanted = np.asarray(ids, dtype=np.int32)
        at = np.searchsorted(self.columns, wanted)
        inside = at < len(self.columns)
        found = inside & (self.columns[np.where(inside, at, 0)] == wanted)
        known = at[found]
        if not len(known):
            return np.zeros(self.documents)
        return np.asarray(self.retriever.get_scores_from_ids(known.tolist()), dtype=np.float64)


def build_index(terms: Ids, lengths: npt.NDArray[np.int64]) -> Bm25Index:
    """bm25s's Lucene BM25 score matrix over documents given as one array of term ids, all
    documents end to end, and each document's length (its number of terms)."""
    count = len(lengths)
    if not count or not len(terms):
        empty = np.zeros(0, dtype=np.int32)
        return Bm25Index(None, empty, count)
    rows = np.repeat(np.arange(count, dtype=np.int64), lengths)
    # One key per (term, document), sorted term first: the order of a CSC matrix by term.
    keys, tf = np.unique(terms.astype(np.int64) * count + rows, return_counts=True)
    term_of, doc_of = np.divmod(keys, count)
    columns, column_of = np.unique(term_of, return_inverse=True)
    df = np.bincount(column_of)
    # Computed as bm25s computes it: idf in float64 stored as float32, the rest in float64.
    idf = np.log(1 + (count - df + 0.5) / (df + 0.5)).astype(np.float32)
    tf64 = tf.astype(np.float64)
    norm = _K1 * ((1 - _B) + _B * lengths[doc_of] / lengths.mean())
    data = (idf[column_of].astype(np.float64) * (tf64 / (norm + tf64))).astype(np.float32)
    indptr = np.zeros(len(columns) + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    retriever = bm25s.BM25()
    retriever.scores = {
        "data": data,
        "indices": doc_of.astype(np.int32),
        "indptr": indptr,
        "num_docs": count,
    }
    retriever.nonoccurrence_array = None
    return Bm25Index(retriever, columns.astype(np.int32), count)
