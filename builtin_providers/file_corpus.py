"""``type: file_corpus``: BM25 search over a folder of text files, confined to its root.

The index is built on first use (off the event loop; that first turn waits for it), shared by
every registry built from the same loaded manifest (``BuildContext.shared``), and refreshed
when a file under the root changes, checked at most every ``refresh_s`` seconds. A refresh
runs in a background thread (paced, at the lowest CPU priority) while the previous index keeps
serving, and re-reads only the files whose size or modification time changed (passages and
term counts are cached per file);
the new index replaces the old one in one assignment, so a turn never waits for a rebuild
after the first. Ranking is BM25 (bm25s, Lucene variant) over lower-cased alphanumeric words
minus bm25s's wider English stop-word list, stemmed with a Snowball stemmer (PyStemmer;
``stemmer``). The block holds the best passages that fit the provider's ``max_tokens`` and
``max_block_chars`` (``fit``; see ``_fitting``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator

from builtin_providers._bm25 import STEMMERS, Bm25Index, Counts, Terms, Vocabulary, build_index
from builtin_providers._chunking import ChunkBy, Passage, split_passages
from builtin_providers._confined import ConfinedReader, Glob, GlobSet, SkipFile, WalkStats
from builtin_providers._fitting import (
    BLOCK_CHARS,
    MAX_BLOCK_CHARS,
    RENDER_LIMITS,
    pack,
    wrap_reserve,
)
from composer.plugin import (
    CONTEXT_NAMES,
    BuildContext,
    ManifestPath,
    Problem,
    Provider,
    ProviderConfig,
    ProviderError,
    ProviderType,
    Template,
    TemplateShape,
    compile_template,
    template_check,
)

__all__ = [
    "DEFAULT_TEMPLATE",
    "CorpusIndex",
    "CorpusStats",
    "FileCorpusConfig",
    "FileCorpusProvider",
    "Progress",
    "provider_type",
]

logger = logging.getLogger(__name__)

DEFAULT_TEMPLATE = (
    "{% for hit in hits %}[{{ hit.path }}{% if hit.heading %} > {{ hit.heading }}{% endif %}]\n"
    "{{ hit.text }}\n{% endfor %}"
)

Progress = Callable[[int, int], None]
"""``progress(files_read, files_total)``, called from the indexing thread."""

_TEMPLATE_NAMES = CONTEXT_NAMES | {"hits", "query"}
_HIT = TemplateShape.record(
    path=TemplateShape.of(str),
    heading=TemplateShape.of(str, None),
    text=TemplateShape.of(str),
    score=TemplateShape.of(float),
)
_OutputTemplate = Annotated[
    str,
    template_check(shapes={"hits": TemplateShape.list_of(_HIT), "query": TemplateShape.of(str)}),
]
# Entries looked at, at most, when validate checks that the corpus is not empty.
_CHECK_ENTRIES = 100_000
# Rebuild the vocabulary once this many of its terms are in no file any more.
_DEAD_TERMS = 50_000
_SLICE_S = 0.0003
_REFRESH_NICE = 19  # the lowest priority: turns first whenever they want a CPU
_GAP_S = 0.00005


class FileCorpusConfig(ProviderConfig):
    """Search a folder of text files; the best ``top_k`` passages become the block."""

    type: Literal["file_corpus"] = "file_corpus"
    root: ManifestPath = Field(description="The corpus folder, relative to this manifest.")
    include: list[str] = Field(
        default_factory=lambda: ["**/*.md", "**/*.txt"],
        description="Globs of files to index, relative to root (`**` crosses folders).",
    )
    exclude: list[str] = Field(
        default_factory=lambda: ["**/.*", "**/.*/**"],
        description="Globs to leave out (default: hidden files and folders, e.g. .env, .git).",
    )
    chunk_by: ChunkBy = Field(
        default="heading",
        description="`heading`: passages never span a Markdown heading, paragraphs packed; "
        "`paragraph`: one passage per paragraph.",
    )
    chunk_tokens: int = Field(
        default=300, ge=16, le=8192, description="Max o200k tokens per passage."
    )
    query: Template = Field(
        default="{{ instruction.text }}", description="What to search for (empty means no block)."
    )
    top_k: int = Field(default=3, ge=1, le=100, description="At most this many passages.")
    min_score: float | None = Field(default=None, ge=0, description="Drop hits scoring below this.")
    stemmer: str = Field(
        default="english",
        description="Snowball stemmer of the words searched: `english`, another Snowball "
        "language (`french`, `german`, `porter`, ...), or `none`.",
    )
    template: _OutputTemplate = Field(
        default=DEFAULT_TEMPLATE,
        description="The block; sees `hits` (each: path, heading, text, score) and `query`.",
    )
    fit: bool = Field(
        default=True,
        description="Return the best whole passages whose block fits `max_tokens` and "
        "`max_block_chars` (nothing only when not even the best fits). false: all `top_k` "
        "hits, and a block over `max_tokens` is skipped whole by the registry (ADR-0008 D3).",
    )
    max_block_chars: int = Field(
        default=BLOCK_CHARS,
        ge=1,
        le=MAX_BLOCK_CHARS,
        description=f"Render cap on the block, in characters (at most {MAX_BLOCK_CHARS:,}): "
        "with `fit` the passages past it are left out; without, or when the best passage alone "
        "is longer, the provider fails naming this setting.",
    )
    refresh_s: float = Field(
        default=60.0,
        ge=0,
        description="Check files for changes at most this often (0: every turn).",
    )
    max_files: int = Field(default=10_000, ge=1, description="Index at most this many files.")
    max_file_bytes: int = Field(default=1 << 20, ge=1, description="Skip files larger than this.")
    max_total_bytes: int = Field(
        default=64 << 20, ge=1, description="Stop reading after this much."
    )
    allow_hard_links: bool = Field(
        default=False,
        description="Index files that have more than one name (hard links). Off by default: "
        "a hard link in root can be a file from outside it.",
    )

    @field_validator("include", "exclude")
    @classmethod
    def _valid_globs(cls, patterns: list[str]) -> list[str]:
        """A glob that cannot work is a load error, not a crash or a hang while indexing."""
        for pattern in patterns:
            Glob(pattern)
        return patterns

    @field_validator("stemmer")
    @classmethod
    def _known_stemmer(cls, name: str) -> str:
        if name not in STEMMERS:
            known = ", ".join(sorted(STEMMERS))
            raise ValueError(f"unknown stemmer {name!r}; known: {known}")
        return name

    def check(self) -> list[Problem]:
        """``root`` is a folder holding at least one file that ``include`` takes (a warning
        when none is found; a walk stops after ``_CHECK_ENTRIES`` entries)."""
        root = self.root
        if not root.exists():
            return [Problem(("root",), f"no such folder: {root}")]
        if not root.is_dir():
            return [Problem(("root",), f"not a folder: {root}")]
        globs = GlobSet(self.include, self.exclude)
        seen = 0
        for folder, subfolders, files in os.walk(root):
            relative = os.path.relpath(folder, root).replace(os.sep, "/")
            prefix = "" if relative == "." else f"{relative}/"
            subfolders[:] = [d for d in subfolders if not globs.prunes(prefix + d)]
            seen += len(files) + len(subfolders)
            if any(globs.matches(prefix + name) for name in files) or seen > _CHECK_ENTRIES:
                return self._truncation_warning()
        include = ", ".join(self.include)
        return [Problem(("root",), f"empty corpus: no file under {root} matches {include}", False)]

    def _truncation_warning(self) -> list[Problem]:
        """A warning when max_files or max_total_bytes would leave files out (sizes only)."""
        try:
            warning = CorpusIndex(self).survey()
        except Exception:  # the turn meets and reports whatever makes this fail
            return []
        return [Problem(("root",), warning, False)] if warning else []

    def index_key(self) -> str:
        """Providers with equal corpus settings share one index."""
        fields = ("include", "exclude", "chunk_by", "chunk_tokens", "stemmer", "refresh_s")
        caps = ("max_files", "max_file_bytes", "max_total_bytes", "allow_hard_links")
        values = [str(self.root), *(getattr(self, f) for f in fields + caps)]
        return "file_corpus:" + json.dumps(values)


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
    return (
        f"corpus truncated: {over_count + over_bytes} file(s) not indexed "
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

    def __init__(self, config: FileCorpusConfig) -> None:
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
                entry = None if text is None else self._chunk(relative, size, mtime, text, pace)
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

    def _chunk(self, relative: str, size: int, mtime: int, text: str, pace: _Pacer) -> _File:
        config = self.config
        passages = tuple(split_passages(relative, text, config.chunk_by, config.chunk_tokens))
        ids = []
        for p in passages:
            pace()
            ids.append(self._vocabulary.encode(self._terms(p.indexed)))
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


class FileCorpusProvider(Provider[FileCorpusConfig]):
    """Renders the query, searches the shared index, formats the hits that fit; no hit, no
    block."""

    def __init__(
        self, config: FileCorpusConfig, index: CorpusIndex, *, reserve_tokens: int = 0
    ) -> None:
        super().__init__(config)
        self.config: FileCorpusConfig = config
        self.index = index
        self.progress: Progress | None = None
        self.reserve_tokens = reserve_tokens
        self._query = compile_template(config.query)
        self._template = compile_template(config.template, _TEMPLATE_NAMES)

    async def warm_up(self, progress: Progress | None = None) -> CorpusStats:
        """Build (or refresh) the index now, e.g. behind a CLI progress indicator."""
        return await asyncio.to_thread(self.index.refresh, progress or self.progress)

    async def search(self, query: str) -> list[tuple[Passage, float]]:
        """The hits for ``query``. Only the first turn waits, for the first build (in a
        thread); later ones search the index there is, inline, while any refresh runs."""
        index = self.index
        if not index.ready():
            await asyncio.to_thread(index.refresh, self.progress)
        return index.search(query, self.config.top_k, self.config.min_score)

    def cache_key(self, branch: Any, instruction: Any) -> str:
        """The rendered query: two turns asking the same are the same search."""
        return self._query.render(self.context(branch, instruction)).strip()

    def display_query(self, branch: Any, instruction: Any) -> str:
        """The rendered query, for traces."""
        return self.cache_key(branch, instruction)

    async def produce(self, branch: Any, instruction: Any, context: dict[str, Any]) -> str | None:
        query = self._query.render(context).strip()
        if not query:
            return None
        hits = await self.search(query)
        if not hits:
            return None
        views = [
            {"path": p.path, "heading": p.heading, "text": p.text, "score": round(score, 4)}
            for p, score in hits
        ]

        def render(chosen: Sequence[int]) -> str:
            shown = [views[i] for i in chosen]
            return self._template.render(
                {**context, "hits": shown, "query": query}, limits=RENDER_LIMITS
            )

        config = self.config
        cap = config.max_tokens
        return pack(
            len(views),
            render,
            max_tokens=max(cap - self.reserve_tokens, 1) if cap else None,
            max_chars=config.max_block_chars,
            fit=config.fit,
            label=f"file_corpus {self.name!r}",
            setting="max_block_chars",
            advice="or lower `top_k`",
        )

    def __repr__(self) -> str:
        return f"<FileCorpusProvider {self.name!r} root={str(self.config.root)!r}>"


def _factory(config: FileCorpusConfig, context: BuildContext) -> FileCorpusProvider:
    index = context.shared(config.index_key(), lambda: CorpusIndex(config))
    return FileCorpusProvider(config, index, reserve_tokens=wrap_reserve(config, context))


provider_type = ProviderType(
    "file_corpus", FileCorpusConfig, _factory, "BM25 search over a folder of text files."
)
