"""``type: file_corpus``: BM25 search over a folder of text files, confined to its root.

The index (``_corpus_index``) is built on first use (off the event loop; that first turn waits
for it), shared by every registry built from the same loaded manifest (``BuildContext.shared``),
and refreshed in the background when a file under the root changes, checked at most every
``refresh_s`` seconds, so a turn never waits for a rebuild after the first. Ranking is BM25 (bm25s, Lucene variant) over lower-cased alphanumeric words
minus bm25s's wider English stop-word list, stemmed with a Snowball stemmer (PyStemmer;
``stemmer``). The block holds the best passages that fit the provider's ``max_tokens`` and
``max_block_chars`` (``fit``; see ``_fitting``). When the engine wants the turn's ranking
(dedup, fill, an explanation) the provider reports each passage it considered, named
``path#Title > Section`` (``passage_id``); while the turn explains itself it also searches
``2 * top_k`` deep without ``min_score``, so the near misses show.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from builtin_providers._bm25 import STEMMERS
from builtin_providers._chunking import ChunkBy, Passage
from builtin_providers._confined import Glob, GlobSet
from builtin_providers._corpus_index import CorpusIndex, CorpusStats
from builtin_providers._fitting import (
    BLOCK_CHARS,
    MAX_BLOCK_CHARS,
    RENDER_LIMITS,
    Item,
    ranked,
    wrap_reserve,
)
from composer.plugin import (
    CONTEXT_NAMES,
    BuildContext,
    Fate,
    ManifestPath,
    Problem,
    Progress,
    Provider,
    ProviderConfig,
    ProviderType,
    Template,
    TemplateShape,
    compile_template,
    explaining,
    search_depth,
    template_check,
)

__all__ = [
    "DEFAULT_TEMPLATE",
    "CorpusIndex",
    "CorpusStats",
    "FileCorpusConfig",
    "FileCorpusProvider",
    "Progress",
    "passage_id",
    "provider_type",
]

DEFAULT_TEMPLATE = (
    "{% for hit in hits %}[{{ hit.path }}{% if hit.heading %} > {{ hit.heading }}{% endif %}]\n"
    "{{ hit.text }}\n{% endfor %}"
)

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


def passage_id(passage: Passage) -> str:
    """A passage's stable id: its file, then ``#`` and its heading path as ``hit.path`` and
    ``hit.heading`` show them (``runbooks/deploy.md#Deploy rollback > When to roll back``);
    the file alone when it has no heading. A section long enough to be cut into several
    passages gives each the same id."""
    return f"{passage.path}#{passage.heading}" if passage.heading else passage.path


def _item(hit: tuple[Passage, float]) -> Item:
    passage, score = hit
    return Item(passage_id(passage), round(score, 4), passage.text)


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
        near = self._near_misses(query, hits) if explaining() else []
        if not hits and not near:
            return None
        found = hits + [hit for hit, _ in near] if near else hits
        views = [
            {"path": p.path, "heading": p.heading, "text": p.text, "score": round(score, 4)}
            for p, score in found
        ]

        def render(chosen: Sequence[int]) -> str:
            shown = [views[i] for i in chosen]
            return self._template.render(
                {**context, "hits": shown, "query": query}, limits=RENDER_LIMITS
            )

        config = self.config
        cap = config.max_tokens
        return ranked(
            self,
            len(hits),
            render,
            lambda: [_item(hit) for hit in hits],
            near=[(_item(hit), fate) for hit, fate in near],
            max_tokens=max(cap - self.reserve_tokens, 1) if cap else None,
            reserve=self.reserve_tokens,
            max_chars=config.max_block_chars,
            fit=config.fit,
            label=f"file_corpus {self.name!r}",
            setting="max_block_chars",
            advice="or lower `top_k`",
        )

    def _near_misses(
        self, query: str, hits: list[tuple[Passage, float]]
    ) -> list[tuple[tuple[Passage, float], Fate]]:
        """The passages a search ``search_depth(top_k)`` deep without ``min_score`` finds
        beyond ``hits``, each with why it is not among them (a second search, so that the
        hits are exactly those of a turn that does not explain itself)."""
        config = self.config
        taken = {(p.path, p.heading, p.text) for p, _ in hits}
        floor = config.min_score
        misses: list[tuple[tuple[Passage, float], Fate]] = []
        for passage, score in self.index.search(query, search_depth(config.top_k)):
            if (passage.path, passage.heading, passage.text) in taken:
                continue
            below = floor is not None and score < floor
            misses.append(((passage, score), "below_min_score" if below else "beyond_top_k"))
        return misses

    def __repr__(self) -> str:
        return f"<FileCorpusProvider {self.name!r} root={str(self.config.root)!r}>"


def _factory(config: FileCorpusConfig, context: BuildContext) -> FileCorpusProvider:
    index = context.shared(config.index_key(), lambda: CorpusIndex(config))
    return FileCorpusProvider(config, index, reserve_tokens=wrap_reserve(config, context))


provider_type = ProviderType(
    "file_corpus",
    FileCorpusConfig,
    _factory,
    "BM25 search over a folder of text files.",
    operation="retrieval",
)
