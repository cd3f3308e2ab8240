"""BM25 terms of a text, and a bm25s index built from term counts cached per document.

``bm25s.BM25.index`` starts from strings and loops in Python over every document, so a
change to one file would cost a full rebuild holding the interpreter lock. Here each file's
terms are turned into ids and counted per passage once, when the file is read; a rebuild is a
few numpy passes over the cached counts (concatenating, counting, one vectorised score, one
sort by term), most of which release the lock, so a turn served meanwhile is not held up.
The score matrix is bm25s's own (Lucene variant, ``k1=1.5``, ``b=0.75``, float32, CSC by
term), set on a ``bm25s.BM25`` whose scoring the queries use, and a test holds it equal to
``bm25s.BM25.index`` on the same terms.
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

__all__ = [
    "STEMMERS",
    "Bm25Index",
    "Counts",
    "Ids",
    "TermIds",
    "Terms",
    "Vocabulary",
    "build_index",
]

STEMMERS = frozenset(Stemmer.algorithms()) | {"none"}
"""The ``stemmer`` names: PyStemmer's Snowball algorithms, and ``none``."""

_STOPWORDS = frozenset(STOPWORDS_EN_PLUS)
_WORD = re.compile(r"[^\W_]+")
# bm25s's defaults, which the equality test pins.
_K1 = 1.5
_B = 0.75

Ids = npt.NDArray[np.int32]
_Small = npt.NDArray[np.unsignedinteger[Any]]


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

    def uncached(self) -> Callable[[list[str]], list[str]] | None:
        """A stemmer of its own, without PyStemmer's cache: for a ``TermIds``, which already
        stems each word once, so that cache would only keep 10,000 words alive."""
        return None if self.stemmer == "none" else Stemmer.Stemmer(self.stemmer, 0).stemWords


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


class TermIds:
    """Text to vocabulary ids as ``Vocabulary.encode(Terms()(text))`` gives them, for one
    build: each distinct lower-cased word is checked against the stop words and stemmed
    once, then every occurrence is one dict lookup (bm25s's tokenizer works the same way).
    Stemming every occurrence was a third of a build. Made per build and dropped after it,
    so its words keep no memory between builds; only the builder thread uses it.
    """

    def __init__(self, terms: Terms, vocabulary: Vocabulary) -> None:
        self._known: dict[str, int] = {}  # word -> id, -1 for a stop word
        self._stem = terms.uncached()
        self._vocabulary = vocabulary.ids

    def __call__(self, text: str) -> Ids:
        words = _WORD.findall(text.lower())
        known = self._known
        try:
            ids = np.fromiter(map(known.__getitem__, words), dtype=np.int32, count=len(words))
        except KeyError:
            self._learn(words)
            ids = np.fromiter(map(known.__getitem__, words), dtype=np.int32, count=len(words))
        return ids[ids >= 0]

    def _learn(self, words: list[str]) -> None:
        """Ids for the words not seen yet, given in order of first occurrence, as
        ``Vocabulary.encode`` would give them."""
        known, ids = self._known, self._vocabulary
        new = [w for w in dict.fromkeys(words) if w not in known]
        kept = [w for w in new if w not in _STOPWORDS]
        known.update(dict.fromkeys(new, -1))
        stems = self._stem(kept) if self._stem is not None and kept else kept
        for word, stem in zip(kept, stems, strict=True):
            known[word] = ids.setdefault(stem, len(ids))


@dataclass(frozen=True)
class Counts:
    """The distinct terms of some documents, kept for every file between builds (what makes a
    refresh incremental), so stored compactly: one row per (document, term), by document then
    term, its term id and its count each in the smallest unsigned type that holds the file's
    largest; per document, how many rows it has (``distinct``) and its length (its number of
    terms)."""

    terms: _Small
    tf: _Small
    distinct: Ids
    lengths: Ids

    @classmethod
    def of(cls, documents: Sequence[Ids]) -> Counts:
        """Counted once, when a file is read: a rebuild only concatenates counts."""
        lengths = np.fromiter(map(len, documents), dtype=np.int32, count=len(documents))
        if not lengths.any():
            return cls(_NO_TF, _NO_TF, np.zeros(len(documents), dtype=np.int32), lengths)
        terms = np.concatenate(documents).astype(np.int64)
        width = int(terms.max()) + 1
        rows = np.repeat(np.arange(len(documents), dtype=np.int64), lengths)
        keys, tf = np.unique(rows * width + terms, return_counts=True)
        row, term = np.divmod(keys, width)
        distinct = np.bincount(row, minlength=len(documents)).astype(np.int32)
        return cls(_narrowest(term), _narrowest(tf), distinct, lengths)

    def renumbered(self, new_ids: Ids) -> Counts:
        return Counts(_narrowest(new_ids[self.terms]), self.tf, self.distinct, self.lengths)


def _narrowest(values: npt.NDArray[np.integer[Any]]) -> _Small:
    """``values`` (not negative) in the smallest unsigned type that holds them all."""
    return values.astype(np.min_scalar_type(int(values.max()) if len(values) else 0))


_NO_IDS = np.zeros(0, dtype=np.int32)
_NO_TF: _Small = np.zeros(0, dtype=np.uint8)


@dataclass(frozen=True)
class Bm25Index:
    """A bm25s retriever over ``documents`` documents and the vocabulary ids below ``width``;
    ``in_use``: how many of those ids occur in some document."""

    retriever: Any  # bm25s.BM25 with its score matrix set, or None when nothing is indexed
    width: int
    documents: int
    in_use: int

    def scores(self, ids: Sequence[int]) -> npt.NDArray[np.float64]:
        """BM25 score of every document for the query term ``ids`` (zeros when none is known).

        Ids past ``width`` are terms added to the vocabulary after this index was built."""
        known = [i for i in ids if i < self.width]
        if not known or self.retriever is None:
            return np.zeros(self.documents)
        return np.asarray(self.retriever.get_scores_from_ids(known), dtype=np.float64)


def build_index(parts: Sequence[Counts], width: int) -> Bm25Index:
    """bm25s's Lucene BM25 score matrix over the documents of ``parts``, end to end, for the
    vocabulary ids below ``width``. Only numpy passes over the counts: no Python loop per
    document, and sorting and counting release the interpreter lock."""
    lengths = np.concatenate([p.lengths for p in parts] or [_NO_IDS]).astype(np.int64)
    count = len(lengths)
    if not count or not lengths.sum():
        return Bm25Index(None, width, count, 0)
    rows = np.repeat(np.arange(count, dtype=np.int64), np.concatenate([p.distinct for p in parts]))
    terms = np.concatenate([p.terms for p in parts], dtype=np.int64)
    tf = np.concatenate([p.tf for p in parts]).astype(np.float64)
    df = np.bincount(terms, minlength=width)
    # Computed as bm25s computes it: idf in float64 stored as float32, the rest in float64.
    idf = np.log(1 + (count - df + 0.5) / (df + 0.5)).astype(np.float32)
    norm = _K1 * ((1 - _B) + _B * lengths[rows] / lengths.mean())
    data = (idf[terms].astype(np.float64) * (tf / (norm + tf))).astype(np.float32)
    # A CSC matrix by term: sorting (term, position) keys is faster than an argsort.
    keys = (terms.astype(np.int64) << 32) | np.arange(len(terms), dtype=np.int64)
    keys.sort()
    order = keys & 0xFFFFFFFF
    indptr = np.zeros(width + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    retriever = bm25s.BM25()
    retriever.scores = {
        "data": data[order],
        "indices": rows[order].astype(np.int32),
        "indptr": indptr,
        "num_docs": count,
    }
    retriever.nonoccurrence_array = None
    return Bm25Index(retriever, width, count, int(np.count_nonzero(df)))
