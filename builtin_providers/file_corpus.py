"""``type: file_corpus``: BM25 search over a folder of text files, confined to its root.

The index is built on first use (off the event loop), shared by every registry built from the
same loaded manifest (``BuildContext.shared``), and rebuilt when a file under the root changes,
which is checked at most every ``refresh_s`` seconds. Ranking is BM25 (``bm25s``, Lucene
variant) over lower-cased alphanumeric words minus English stop words, with plurals folded
(Harman's S-stemmer; no other stemming).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN_PLUS
from pydantic import Field, field_validator

from builtin_providers._chunking import ChunkBy, Passage, split_passages
from builtin_providers._confined import ConfinedReader, Glob, GlobSet, SkipFile, WalkStats
from composer.plugin import (
    CONTEXT_NAMES,
    BuildContext,
    ManifestPath,
    Provider,
    ProviderConfig,
    ProviderError,
    ProviderType,
    Template,
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
_OutputTemplate = Annotated[str, template_check("hits", "query")]

_STOPWORDS = frozenset(STOPWORDS_EN_PLUS)
_WORD = re.compile(r"[^\W_]+")


@functools.lru_cache(maxsize=1 << 16)
def _s_stem(word: str) -> str:
    """Harman's S-stemmer: fold English plurals (``deploys`` -> ``deploy``), nothing more."""
    if len(word) > 3 and word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if len(word) > 2 and word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def _words(text: str) -> list[str]:
    """BM25 terms: lower-case alphanumeric runs, English stop words dropped, plurals folded."""
    return [_s_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


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
    template: _OutputTemplate = Field(
        default=DEFAULT_TEMPLATE,
        description="The block; sees `hits` (each: path, heading, text, score) and `query`.",
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

    def index_key(self) -> str:
        """Providers with equal corpus settings share one index."""
        fields = ("include", "exclude", "chunk_by", "chunk_tokens", "refresh_s")
        caps = ("max_files", "max_file_bytes", "max_total_bytes", "allow_hard_links")
        values = [str(self.root), *(getattr(self, f) for f in fields + caps)]
        return "file_corpus:" + json.dumps(values)


@dataclass(frozen=True)
class CorpusStats:
    """What the last build indexed and skipped (each skip was also logged as a warning)."""

    files: int
    passages: int
    bytes: int
    skipped: WalkStats
    build_seconds: float


@dataclass(frozen=True)
class _Snapshot:
    passages: list[Passage]
    retriever: Any  # bm25s.BM25, or None for an empty corpus
    fingerprint: tuple[tuple[str, int, int], ...]
    stats: CorpusStats


class CorpusIndex:
    """A BM25 index over one corpus root; thread-safe, rebuilt when the files change."""

    def __init__(self, config: FileCorpusConfig) -> None:
        self.config = config
        self._globs = GlobSet(config.include, config.exclude)
        self._lock = threading.Lock()
        self._snapshot: _Snapshot | None = None
        self._checked_at = 0.0

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

    def _candidates(self, reader: ConfinedReader, skipped: WalkStats) -> list[tuple[str, int, int]]:
        found: list[tuple[str, int, int]] = []
        for relative, info in reader.walk(self._globs, skipped):
            if len(found) >= self.config.max_files:
                skipped.count("over_file_count", relative)
                continue
            found.append((relative, info.st_size, info.st_mtime_ns))
        return found

    def refresh(self, progress: Progress | None = None, *, force: bool = False) -> CorpusStats:
        """Build the index, or rebuild it if a file changed (checked at most every refresh_s)."""
        with self._lock:
            now = time.monotonic()
            snapshot = self._snapshot
            if (
                snapshot is not None
                and not force
                and now - self._checked_at < self.config.refresh_s
            ):
                return snapshot.stats
            reader = self._reader()
            skipped = WalkStats()
            candidates = self._candidates(reader, skipped)
            self._checked_at = now
            if snapshot is not None and tuple(candidates) == snapshot.fingerprint and not force:
                return snapshot.stats
            self._snapshot = self._build(reader, candidates, skipped, progress)
            return self._snapshot.stats

    def _build(
        self,
        reader: ConfinedReader,
        candidates: list[tuple[str, int, int]],
        skipped: WalkStats,
        progress: Progress | None,
    ) -> _Snapshot:
        started = time.perf_counter()
        config = self.config
        passages: list[Passage] = []
        total = 0
        files = 0
        for done, (relative, size, _mtime) in enumerate(candidates, 1):
            text = self._read_text(reader, relative, size, config.max_total_bytes - total, skipped)
            if text is not None:
                total += len(text.encode())
                files += 1
                passages.extend(
                    split_passages(relative, text, config.chunk_by, config.chunk_tokens)
                )
            if progress is not None:
                progress(done, len(candidates))
        if skipped.over_file_count or skipped.over_total_bytes:
            logger.warning(
                "file_corpus %s: caps reached, %d file(s) not indexed (max_files=%d, "
                "max_total_bytes=%d)",
                config.root,
                skipped.over_file_count + skipped.over_total_bytes,
                config.max_files,
                config.max_total_bytes,
            )
        retriever = None
        if passages:
            # bm25s sets its own logger to DEBUG at import; keep its per-build chatter quiet.
            logging.getLogger("bm25s").setLevel(logging.WARNING)
            retriever = bm25s.BM25()
            corpus = [_words(f"{p.heading or ''}\n{p.text}") for p in passages]
            retriever.index(corpus, show_progress=False)
        stats = CorpusStats(files, len(passages), total, skipped, time.perf_counter() - started)
        return _Snapshot(passages, retriever, tuple(candidates), stats)

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
        words = _words(query)
        if snapshot is None or snapshot.retriever is None or not words:
            return []
        retriever = snapshot.retriever
        known = [w for w in words if w in retriever.vocab_dict]
        if not known:
            return []
        scores = np.asarray(retriever.get_scores(known), dtype=np.float64)
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
    """Renders the query, searches the shared index, formats the hits; no hit, no block."""

    def __init__(self, config: FileCorpusConfig, index: CorpusIndex) -> None:
        super().__init__(config)
        self.config: FileCorpusConfig = config
        self.index = index
        self.progress: Progress | None = None
        self._query = compile_template(config.query)
        self._template = compile_template(config.template, _TEMPLATE_NAMES)

    async def warm_up(self, progress: Progress | None = None) -> CorpusStats:
        """Build (or refresh) the index now, e.g. behind a CLI progress indicator."""
        return await asyncio.to_thread(self.index.refresh, progress or self.progress)

    def _search(self, query: str) -> list[tuple[Passage, float]]:
        self.index.refresh(self.progress)
        return self.index.search(query, self.config.top_k, self.config.min_score)

    def cache_key(self, branch: Any, instruction: Any) -> str:
        """The rendered query: two turns asking the same are the same search."""
        return self._query.render(self.context(branch, instruction)).strip()

    async def produce(self, branch: Any, instruction: Any, context: dict[str, Any]) -> str | None:
        query = self._query.render(context).strip()
        if not query:
            return None
        hits = await asyncio.to_thread(self._search, query)
        if not hits:
            return None
        views = [
            {"path": p.path, "heading": p.heading, "text": p.text, "score": round(score, 4)}
            for p, score in hits
        ]
        return self._template.render({**context, "hits": views, "query": query})

    def __repr__(self) -> str:
        return f"<FileCorpusProvider {self.name!r} root={str(self.config.root)!r}>"


def _factory(config: FileCorpusConfig, context: BuildContext) -> FileCorpusProvider:
    index = context.shared(config.index_key(), lambda: CorpusIndex(config))
    return FileCorpusProvider(config, index)


provider_type = ProviderType(
    "file_corpus", FileCorpusConfig, _factory, "BM25 search over a folder of text files."
)
