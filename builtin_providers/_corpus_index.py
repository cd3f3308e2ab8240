"""The BM25 index of one ``file_corpus`` root: built in a thread, refreshed in the background.

``CorpusIndex`` is shared by every provider with equal corpus settings in a loaded manifest
(``FileCorpusConfig.index_key``). One build runs at a time; a background refresh is paced and
runs at the lowest CPU priority while the previous index keeps serving, re-reading only the
files whose size or modification time changed (passages and term counts are cached per file);
the new index replaces the old one in one assignment, so a turn never waits for a rebuild
after the first.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from builtin_providers._bm25 import Bm25Index, Counts, TermIds, Terms, Vocabulary, build_index
from builtin_providers._chunking import ChunkBy, Passage, split_passages
from builtin_providers._confined import ConfinedReader, GlobSet, SkipFile, WalkStats
from composer.plugin import Progress, ProviderError

__all__ = ["CorpusIndex", "CorpusSettings", "CorpusStats"]

logger = logging.getLogger("builtin_providers.file_corpus")

# Rebuild the vocabulary once this many of its terms are in no file any more.
_DEAD_TERMS = 50_000
_SLICE_S = 0.0003
_REFRESH_NICE = 19  # the lowest priority: turns first whenever they want a CPU
_GAP_S = 0.00005


class CorpusSettings(Protocol):
    """What an index reads of its provider's config (``FileCorpusConfig``)."""

    @property
    def root(self) -> Path: ...
    @property
    def include(self) -> list[str]: ...
    @property
    def exclude(self) -> list[str]: ...
    @property
    def chunk_by(self) -> ChunkBy: ...
    @property
    def chunk_tokens(self) -> int: ...
    @property
    def stemmer(self) -> str: ...
    @property
    def refresh_s(self) -> float: ...
    @property
    def max_files(self) -> int: ...
    @property
    def max_file_bytes(self) -> int: ...
    @property
    def max_total_bytes(self) -> int: ...
    @property
    def allow_hard_links(self) -> bool: ...


@dataclass(frozen=True)
class CorpusStats:
    """What the last build indexed and skipped (each skip was also logged as a warning).

    ``reread``: files read and chunked by this build; the others came from the per-file cache.
    """

    files: int
    passages: int
    bytes: int
    skipped: WalkStats
    build_seconds: float
    reread: int = 0

    @property
    def truncation(self) -> str | None:
        """Why the corpus is incomplete, naming the cap and its setting; None when it is not."""
        return _truncation(self.skipped)


def _truncation(skipped: WalkStats) -> str | None:
    over_count, over_bytes = skipped.over_file_count, skipped.over_total_bytes
    if not over_count and not over_bytes:
        return None
    caps = []
    if over_count:
        caps.append(f"{over_count} over max_files")
    if over_bytes:
        caps.append(f"{over_bytes} over max_total_bytes")
    left = over_count + over_bytes
    return (
        f"corpus truncated: {left} {'file' if left == 1 else 'files'} not indexed "
        f"({', '.join(caps)}); raise the setting to index them"
    )


@dataclass(frozen=True)
class _File:
    """One file's passages and their term counts, valid while its size and mtime are the
    same."""

    size: int
    mtime_ns: int
    nbytes: int
    passages: tuple[Passage, ...]
    counts: Counts


class _Pacer:
    """Steps the interpreter aside every ``_SLICE_S`` of indexing work, for ``_GAP_S``.

    A refresh runs in a thread while turns run on the event loop, and Python lets one thread
    run at a time. Left alone, a turn that arrives while the refresh holds the interpreter
    lock waits for the thread switch interval (5 ms, some ten turns' worth); with short
    slices it waits at most one slice. ``time.sleep(0)`` would not do: the thread takes the
    lock back before the waiting one wakes up. Only a background refresh is paced: a build
    that a caller waits for (the first turn, ``warm_up``) runs flat out.
    """

    __slots__ = ("_until",)

    def __init__(self, paced: bool = True) -> None:
        self._until = time.perf_counter() + _SLICE_S if paced else math.inf

    def __call__(self) -> None:
        if time.perf_counter() >= self._until:
            time.sleep(_GAP_S)
            self._until = time.perf_counter() + _SLICE_S


def _lower_priority() -> None:
    """Make the calling thread yield the CPU to others (Linux: a nice value per thread).

    On a busy machine a refresh competes with the turns for CPU time, not only for the
    interpreter lock; the scheduler then runs the turns first.
    """
    if sys.platform == "linux":  # elsewhere the call would renice the whole process
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _REFRESH_NICE)


@dataclass(frozen=True)
class _Snapshot:
    """One built index: never changed, replaced whole by the next build."""

    passages: list[Passage]
    vocabulary: Vocabulary
    index: Bm25Index
    fingerprint: tuple[tuple[str, int, int], ...]
    stats: CorpusStats


class CorpusIndex:
    """A BM25 index over one corpus root; searched by any thread, refreshed in the background.

    One build runs at a time (``_build_lock``). ``refresh`` builds now and waits for any build
    under way; ``ready``, called by each turn, only starts a background refresh when one is
    due, and ``search`` uses the index there is.
    """

    def __init__(self, config: CorpusSettings) -> None:
        self.config = config
        self._globs = GlobSet(config.include, config.exclude)
        self._terms = Terms(config.stemmer)
        self._vocabulary = Vocabulary()
        self._files: dict[str, _File] = {}
        self._build_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._background: threading.Thread | None = None
        self._snapshot: _Snapshot | None = None
        self._checked_at = 0.0
        self._live_terms = 0  # vocabulary ids some file had at the last build

    @property
    def stats(self) -> CorpusStats | None:
        snapshot = self._snapshot
        return snapshot.stats if snapshot else None

    def _reader(self) -> ConfinedReader:
        try:
            return ConfinedReader(
                Path(self.config.root), allow_hard_links=self.config.allow_hard_links
            )
        except OSError as e:
            raise ProviderError(f"corpus root {self.config.root}: {e.strerror or e}") from e

    def _candidates(
        self, reader: ConfinedReader, skipped: WalkStats, pace: _Pacer
    ) -> list[tuple[str, int, int]]:
        found: list[tuple[str, int, int]] = []
        for relative, info in reader.walk(self._globs, skipped):
            pace()
            if len(found) >= self.config.max_files:
                skipped.count("over_file_count", relative)
                continue
            found.append((relative, info.st_size, info.st_mtime_ns))
        return found

    def survey(self) -> str | None:
        """The truncation warning the caps would cause, from file sizes alone (nothing is
        read or indexed): for checks ahead of the first turn, such as ``validate``."""
        config = self.config
        skipped = WalkStats()
        total = 0
        for relative, size, _ in self._candidates(self._reader(), skipped, _Pacer(False)):
            if size > config.max_file_bytes:
                continue
            if size > config.max_total_bytes - total:
                skipped.count("over_total_bytes", relative)
                continue
            total += size
        return _truncation(skipped)

    def _due(self) -> bool:
        return time.monotonic() - self._checked_at >= self.config.refresh_s

    def refresh(self, progress: Progress | None = None, *, force: bool = False) -> CorpusStats:
        """Build the index, or bring it up to date, now (unless checked within refresh_s).

        Waits for a build under way first. ``force`` re-reads every file.
        """
        with self._build_lock:
            snapshot = self._snapshot
            if snapshot is not None and not force and not self._due():
                return snapshot.stats
            return self._update(progress, force=force)

    def ready(self) -> bool:
        """Whether there is an index to search (False before the first build); starts a
        background refresh when one is due and none is running, and never waits for it."""
        if self._snapshot is None:
            return False
        if self._due():
            self._start_refresh()
        return True

    def join(self, timeout: float | None = None) -> None:
        """Wait for the background refresh under way, if any (tests, orderly shutdown)."""
        thread = self._background
        if thread is not None:
            thread.join(timeout)

    def _start_refresh(self) -> None:
        with self._start_lock:
            running = self._background
            if (running is not None and running.is_alive()) or not self._due():
                return
            self._checked_at = time.monotonic()  # one refresh per period, however many turns
            thread = threading.Thread(
                target=self._refresh_in_background, name="file_corpus refresh", daemon=True
            )
            self._background = thread
            thread.start()

    def _refresh_in_background(self) -> None:
        _lower_priority()
        try:
            with self._build_lock:
                self._update(None, paced=True)
        except Exception:
            logger.warning(
                "file_corpus %s: refresh failed; the previous index keeps serving",
                self.config.root,
                exc_info=True,
            )

    def _update(
        self, progress: Progress | None, *, force: bool = False, paced: bool = False
    ) -> CorpusStats:
        """Walk the root; rebuild from the per-file cache when any file changed. Holds the
        build lock."""
        self._checked_at = time.monotonic()
        reader = self._reader()
        skipped = WalkStats()
        pace = _Pacer(paced)
        candidates = self._candidates(reader, skipped, pace)
        snapshot = self._snapshot
        if snapshot is not None and not force and tuple(candidates) == snapshot.fingerprint:
            return snapshot.stats
        built = self._build(reader, candidates, skipped, progress, force, pace)
        truncation = built.stats.truncation
        if truncation and (snapshot is None or snapshot.stats.truncation != truncation):
            logger.warning("file_corpus %s: %s", self.config.root, truncation)
        self._snapshot = built  # one assignment: a turn sees the old index or the new one
        return built.stats

    def _build(
        self,
        reader: ConfinedReader,
        candidates: list[tuple[str, int, int]],
        skipped: WalkStats,
        progress: Progress | None,
        force: bool,
        pace: _Pacer,
    ) -> _Snapshot:
        started = time.perf_counter()
        config = self.config
        files: dict[str, _File] = {}
        passages: list[Passage] = []
        parts: list[Counts] = []
        total = 0
        reread = 0
        term_ids = TermIds(self._terms, self._vocabulary)
        for done, (relative, size, mtime) in enumerate(candidates, 1):
            pace()
            entry = None if force else self._files.get(relative)
            if entry is not None and (entry.size, entry.mtime_ns) == (size, mtime):
                if entry.nbytes > config.max_total_bytes - total:
                    skipped.count("over_total_bytes", relative)
                    entry = None
            else:
                remaining = config.max_total_bytes - total
                text = self._read_text(reader, relative, size, remaining, skipped)
                entry = (
                    None
                    if text is None
                    else self._chunk(relative, size, mtime, text, term_ids, pace)
                )
                reread += entry is not None
            if entry is not None:
                files[relative] = entry
                total += entry.nbytes
                passages.extend(entry.passages)
                parts.append(entry.counts)
            if progress is not None:
                progress(done, len(candidates))
        self._files = files
        pace()
        if len(self._vocabulary) - self._live_terms > _DEAD_TERMS:
            parts = self._compact()
        vocabulary = self._vocabulary
        index = build_index(parts, len(vocabulary))
        self._live_terms = index.in_use
        stats = CorpusStats(
            len(files), len(passages), total, skipped, time.perf_counter() - started, reread
        )
        return _Snapshot(passages, vocabulary, index, tuple(candidates), stats)

    def _chunk(
        self, relative: str, size: int, mtime: int, text: str, term_ids: TermIds, pace: _Pacer
    ) -> _File:
        config = self.config
        passages = tuple(split_passages(relative, text, config.chunk_by, config.chunk_tokens))
        ids = []
        for p in passages:
            pace()
            ids.append(term_ids(p.indexed))
        return _File(size, mtime, len(text.encode()), passages, Counts.of(ids))

    def _compact(self) -> list[Counts]:
        """A new vocabulary of only the terms some file has, in the same order, and the cache
        renumbered to it; the running snapshot keeps the vocabulary it was built with."""
        old = self._vocabulary
        used = np.zeros(len(old), dtype=bool)
        for entry in self._files.values():
            used[entry.counts.terms] = True
        renumber = (np.cumsum(used) - 1).astype(np.int32)
        fresh = Vocabulary()
        fresh.ids = {term: int(renumber[i]) for term, i in old.ids.items() if used[i]}
        self._files = {
            path: replace(entry, counts=entry.counts.renumbered(renumber))
            for path, entry in self._files.items()
        }
        self._vocabulary = fresh
        return [entry.counts for entry in self._files.values()]

    def _read_text(
        self, reader: ConfinedReader, relative: str, size: int, remaining: int, skipped: WalkStats
    ) -> str | None:
        """One file's text, or None (counted and logged) when it is skipped."""
        if size <= self.config.max_file_bytes and size > remaining:
            skipped.count("over_total_bytes", relative)
            return None
        try:
            data = reader.read(relative, self.config.max_file_bytes)
            if len(data) > remaining:
                skipped.count("over_total_bytes", relative)
                return None
            if b"\0" in data[:8192]:
                raise SkipFile("undecodable", "binary (NUL byte)")
            try:
                return data.decode("utf-8-sig")
            except UnicodeDecodeError as e:
                raise SkipFile("undecodable", f"not UTF-8 ({e.reason})") from e
        except SkipFile as skip:
            skipped.count(skip.reason, relative, str(skip))
            return None

    def search(
        self, query: str, top_k: int, min_score: float | None = None
    ) -> list[tuple[Passage, float]]:
        """The best passages for ``query`` with a positive score, best first."""
        snapshot = self._snapshot
        if snapshot is None:
            return []
        ids = snapshot.vocabulary.lookup(self._terms(query))
        scores = snapshot.index.scores(ids)
        if not ids or not len(scores):
            return []
        k = min(top_k, len(scores))
        best = np.argpartition(-scores, k - 1)[:k]
        ranked = sorted(best.tolist(), key=lambda i: (-scores[i], i))
        floor = min_score if min_score is not None else 0.0
        return [
            (snapshot.passages[i], float(scores[i]))
            for i in ranked
            if scores[i] > 0 and scores[i] >= floor
        ]
