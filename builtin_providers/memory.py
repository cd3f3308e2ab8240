"""``type: memory``: search a memory store and format each hit; optional writeback.

``source: branch`` reads ``branch.memory`` (ADR-0008 D6: a provider may use the branch's
store; the registry knows nothing of it). ``{sqlite: path}``, ``{postgres: {dsn: ...}}`` and
``{jsonl: path}`` use one of composer's stores (``builtin_providers.stores``), shared by every
registry built from the same manifest (where: ``stores.config``). With a LionAGI store the
query and the written items are LionAGI's own ``MemoryQuery`` and ``MemoryItem``, imported only
then (``_lionagi_memory``).

In composer's stores every item has a ``namespace``, rendered per turn from the manifest's
``namespace`` template, so that teams sharing a store never see each other's items;
``query.text`` is ranked full text in SQLite and PostgreSQL (``match: substring`` keeps
LionAGI's substring). Writeback is off by default, and then the provider has no
``writeback`` attribute at all, so the registry's ``getattr(provider, "writeback", None)``
(ADR D7) skips it; when on, each item's id is derived from the branch, the turn and the
content, so a retried writeback stores nothing twice, and each item is bounded
(``writeback.max_item_chars``): a longer tool result is stored cut, with a note of its full
length, counted (``WritebackCount``) and logged, so that no single result can push every later
turn's block over the render cap.

When the engine wants the turn's ranking (dedup, fill, an explanation) the provider reports
each item it found, by item id; while the turn explains itself it also queries
``2 * query.limit`` items without ``min_score``, so the near misses show.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from builtin_providers._fitting import MAX_BLOCK_CHARS, Item, ranked, wrap_reserve
from builtin_providers._lionagi_memory import is_lionagi, lionagi_query, store_lionagi
from builtin_providers.stores import (
    ItemStore,
    JsonlMemoryStore,
    MemoryItem,
    MemoryQuery,
    PostgresMemoryStore,
    SqliteMemoryStore,
)
from builtin_providers.stores.base import Match, body_of, chunks, writeback_id
from builtin_providers.stores.config import (
    JsonlSource,
    PostgresConnection,
    PostgresSource,
    Source,
    SqliteSource,
)
from composer.plugin import (
    CONTEXT_NAMES,
    BuildContext,
    CompiledTemplate,
    Fate,
    Problem,
    Provider,
    ProviderConfig,
    ProviderError,
    ProviderType,
    StoreError,
    StrictModel,
    Template,
    TemplateShape,
    WritebackCount,
    branch_view,
    compile_template,
    dsn_secrets,
    explaining,
    search_depth,
    template_check,
    turn_key,
)

__all__ = [
    "DEFAULT_ITEM_TEMPLATE",
    "DEFAULT_MAX_ITEM_CHARS",
    "JsonlSource",
    "MemoryConfig",
    "MemoryProvider",
    "MemoryQueryConfig",
    "PostgresConnection",
    "PostgresSource",
    "SqliteSource",
    "WritebackConfig",
    "WritebackMemoryProvider",
    "provider_type",
]

logger = logging.getLogger(__name__)

DEFAULT_ITEM_TEMPLATE = "- {{ item.content }}"

DEFAULT_MAX_ITEM_CHARS = 4_000
"""A written-back item's default size cap: about 1,000 tokens, half the default budget, so a
cut item still fits a turn beside the others."""
_MAX_ITEM_CHARS = MAX_BLOCK_CHARS // 2
"""The highest cap: an item at it, rendered with a header, still fits the render cap."""

_ITEM_NAMES = CONTEXT_NAMES | {"item", "index"}
_ITEM = TemplateShape.record(
    id=TemplateShape.of(str),
    content=TemplateShape.anything(),
    tags=TemplateShape.list_of(TemplateShape.anything()),
    metadata=TemplateShape.mapping(),
    score=TemplateShape.of(float, int, None),
)
_ItemTemplate = Annotated[
    str, template_check(shapes={"item": _ITEM, "index": TemplateShape.of(int)})
]


class MemoryQueryConfig(StrictModel):
    """The MemoryQuery to run; every string in it is a template."""

    text: Template | None = Field(
        default=None,
        description=(
            "What to look for, as `match` says: words ranked by relevance (`fulltext`), or a "
            "case-insensitive substring of the content (`substring`); empty means any."
        ),
    )
    tags: list[Template] | None = Field(default=None, description="Items having any of these tags.")
    filters: dict[str, Any] | None = Field(
        default=None, description="Metadata equality; string values are templates."
    )
    limit: int = Field(default=5, ge=1, le=1000, description="At most this many items.")

    @field_validator("filters")
    @classmethod
    def _compile_filters(cls, filters: dict[str, Any] | None) -> dict[str, Any] | None:
        for value in (filters or {}).values():
            if isinstance(value, str):
                compile_template(value)
        return filters


class WritebackConfig(StrictModel):
    """How action responses are stored after an ``operate`` turn (ADR D7)."""

    tags: list[str] = Field(
        default_factory=lambda: ["action_response"], description="Tags of each stored item."
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Extra metadata of each stored item."
    )
    ttl_s: float | None = Field(
        default=None,
        gt=0,
        description="Stored items expire after this many seconds (not with source: branch).",
    )
    max_items: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Keep at most this many written-back items per namespace, oldest deleted first "
            "(sqlite and postgres)."
        ),
    )
    max_item_chars: int = Field(
        default=DEFAULT_MAX_ITEM_CHARS,
        ge=1_000,
        le=_MAX_ITEM_CHARS,
        description=(
            "A written-back item whose text (a string, or structured content as JSON) is "
            "longer is stored as its first characters, ending in a note of its full length "
            "(counted as `cut` in the writeback's result, and logged): one huge tool result "
            f"cannot push later blocks over their render cap. At most {_MAX_ITEM_CHARS:,}."
        ),
    )


class MemoryConfig(ProviderConfig):
    """Memory items matching a query, one template per item."""

    type: Literal["memory"] = "memory"
    source: Source = Field(
        default="branch",
        description=(
            "`branch` (branch.memory), `{sqlite: path}`, `{postgres: {dsn: ...}}` or "
            "`{jsonl: path}`."
        ),
    )
    namespace: Template | None = Field(
        default=None,
        description=(
            "Whose items these are, e.g. `{{ branch.metadata.team }}`: searches and writebacks "
            "see this namespace only. Required when the source is `shared`. Default: the "
            "store's default namespace. Not with source: branch."
        ),
    )
    match: Match | None = Field(
        default=None,
        description=(
            "`fulltext` (words, stemmed, stop words ignored, best first; sqlite and postgres, "
            "their default) or `substring` (the only kind for jsonl and branch)."
        ),
    )
    min_score: float | None = Field(
        default=None,
        description=(
            "With fulltext: leave out items scoring below this (sqlite: bm25, higher is "
            "better; postgres: ts_rank_cd)."
        ),
    )
    query: MemoryQueryConfig = Field(
        default=MemoryQueryConfig(),
        description="The MemoryQuery sent each turn; every string in it is a template.",
    )
    template: _ItemTemplate = Field(
        default=DEFAULT_ITEM_TEMPLATE,
        description=(
            "One hit; sees `item` (id, content, tags, metadata, score) and `index` (1-based)."
        ),
    )
    header: Template | None = Field(
        default=None,
        description="Text before the items, when any match; followed by `separator`.",
    )
    separator: str = Field(default="\n", description="Between rendered items.")
    fit: bool = Field(
        default=True,
        description="Return the first items whose block fits `max_tokens` (nothing only when "
        "not even the first fits). false: every item, and a block over `max_tokens` is "
        "skipped whole by the registry (ADR-0008 D3).",
    )
    writeback: bool | WritebackConfig = Field(
        default=False, description="Store action responses as items (true, or {tags, metadata})."
    )

    @property
    def writeback_config(self) -> WritebackConfig | None:
        if self.writeback is True:
            return WritebackConfig()
        return self.writeback or None

    def secrets(self) -> list[str]:
        """A PostgreSQL DSN's password, user and options: libpq and psycopg_pool quote them
        in their errors, and they are secrets even when written without ``${VAR}``."""
        source = self.source
        return dsn_secrets(source.postgres.dsn) if isinstance(source, PostgresSource) else []

    def check(self) -> list[Problem]:
        """The files the source names: a JSONL file must exist unless writeback may create
        it, a SQLite file's folder must exist (the file is made on first use), a seed must
        exist and every line of it be an item; none of them may be a folder. PostgreSQL
        needs its extra installed."""
        source = self.source
        problems: list[Problem] = []
        if isinstance(source, JsonlSource):
            if source.jsonl.is_dir():
                problems.append(
                    Problem(("source", "jsonl"), f"a folder, not a file: {source.jsonl}")
                )
            elif not source.jsonl.exists():
                if self.writeback_config is None:
                    problems.append(Problem(("source", "jsonl"), f"no such file: {source.jsonl}"))
                else:
                    message = f"no such file yet (writeback creates it): {source.jsonl}"
                    problems.append(Problem(("source", "jsonl"), message, False))
        if isinstance(source, SqliteSource):
            if source.sqlite.is_dir():
                problems.append(
                    Problem(("source", "sqlite"), f"a folder, not a file: {source.sqlite}")
                )
            elif not source.sqlite.parent.is_dir():
                message = f"no such folder for the database: {source.sqlite.parent}"
                problems.append(Problem(("source", "sqlite"), message))
        if isinstance(source, PostgresSource):
            problems += Problem.unless_installed(
                ("source", "postgres"), "postgres", "psycopg", "psycopg_pool"
            )
        seed = source.seed if isinstance(source, SqliteSource | PostgresSource) else None
        if seed is not None:
            problems += _seed_problems(seed)
        return problems

    def partition(self) -> str | None:
        """The namespace template of a shared store: what splits the teams sharing it."""
        shared = bool(getattr(self.source, "shared", False))
        return str.__str__(self.namespace) if shared and self.namespace else None

    @property
    def ranked(self) -> bool:
        """Whether the store ranks full text (SQLite, PostgreSQL)."""
        return isinstance(self.source, SqliteSource | PostgresSource)

    @property
    def effective_match(self) -> Match:
        return self.match or ("fulltext" if self.ranked else "substring")

    @model_validator(mode="after")
    def _fits_the_source(self) -> MemoryConfig:
        """Options the chosen store cannot honour are errors, not silently ignored."""
        kind = "branch" if self.source == "branch" else type(self.source).__name__[:-6].lower()
        writeback = self.writeback_config
        if self.match == "fulltext" and not self.ranked:
            raise ValueError(f"match: fulltext needs source sqlite or postgres, not {kind}")
        if self.min_score is not None and self.effective_match != "fulltext":
            raise ValueError("min_score applies to match: fulltext only")
        if getattr(self.source, "shared", False) and not self.namespace:
            raise ValueError(
                "a shared source needs a namespace (e.g. '{{ branch.metadata.team }}')"
            )
        if kind == "branch" and self.namespace:
            raise ValueError("namespace needs one of composer's stores, not source: branch")
        if writeback and writeback.max_items is not None and not self.ranked:
            raise ValueError(f"writeback.max_items needs source sqlite or postgres, not {kind}")
        if writeback and writeback.ttl_s is not None and kind == "branch":
            raise ValueError("writeback.ttl_s needs one of composer's stores, not source: branch")
        return self


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def _item_view(item: Any) -> dict[str, Any]:
    """Plain data of a hit from any store: templates never see the live object."""
    return {
        "id": str(_field(item, "id")),
        "content": _field(item, "content"),
        "tags": list(_field(item, "tags") or []),
        "metadata": dict(_field(item, "metadata") or {}),
        "score": _field(item, "score"),
    }


def _item(view: dict[str, Any]) -> Item:
    """A hit as a ranked item: its id, its score, the text a search reads of it."""
    score = view["score"]
    return Item(view["id"], None if score is None else float(score), body_of(view["content"]))


def _content(response: Any) -> Any:
    """An action response as storable data (a pydantic model is dumped as JSON data)."""
    dump = getattr(response, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(response, Mapping):
        return dict(response)
    return response if isinstance(response, (str, int, float, bool, list)) else str(response)


_SHOWN_BROKEN_LINES = 10
"""Broken seed lines reported one by one; past them, one problem counts the rest."""


def _seed_problems(seed: Path) -> list[Problem]:
    """A seed that is missing, or each line of it that the import would skip (it skips them
    with a warning alone, so a typo loses an item unnoticed), named ``file:line``."""
    if not seed.is_file():
        return [Problem(("source", "seed"), f"no such file: {seed}")]
    try:
        broken = JsonlMemoryStore(seed, read_links=True).broken_lines()
    except StoreError as e:
        return [Problem(("source", "seed"), str(e))]
    except OSError as e:
        return [Problem(("source", "seed"), f"{seed}: {e.strerror or e}")]
    problems = [
        Problem(("source", "seed"), f"{seed}:{number}: {why}; the line would be skipped")
        for number, why in broken[:_SHOWN_BROKEN_LINES]
    ]
    if len(broken) > _SHOWN_BROKEN_LINES:
        more = len(broken) - _SHOWN_BROKEN_LINES
        problems.append(Problem(("source", "seed"), f"{seed}: {more} more broken line(s)"))
    return problems


class MemoryProvider(Provider[MemoryConfig]):
    """Runs the configured MemoryQuery on its store and renders each hit."""

    def __init__(self, config: MemoryConfig, store: ItemStore | None) -> None:
        super().__init__(config)
        self.config: MemoryConfig = config
        self.store = store
        self.reserve_tokens = 0  # what the engine's wrap adds (set by the factory)
        self._namespace = compile_template(config.namespace) if config.namespace else None
        self._shared = bool(getattr(config.source, "shared", False))
        query = config.query
        self._text = compile_template(query.text) if query.text else None
        self._tags = [compile_template(tag) for tag in query.tags or []]
        self._filters: dict[str, CompiledTemplate | Any] = {
            key: compile_template(value) if isinstance(value, str) else value
            for key, value in (query.filters or {}).items()
        }
        self._template = compile_template(config.template, _ITEM_NAMES)
        self._header = compile_template(config.header) if config.header else None

    def store_for(self, branch: Any) -> Any:
        """The store this turn reads: the configured one, or the branch's own."""
        if self.store is not None:
            return self.store
        memory = getattr(branch, "memory", None)
        if memory is None:
            raise ProviderError(
                f"memory provider {self.name!r}: the branch has no memory store (source: branch);"
                " give the branch one, or use source: {sqlite: path}"
            )
        return memory

    def _rendered(
        self, context: dict[str, Any]
    ) -> tuple[str | None, list[str] | None, dict[str, Any] | None]:
        """The query's text, tags and filters for this turn (None where there are none)."""
        text = self._text.render(context) if self._text else None
        tags = [t for t in (tag.render(context) for tag in self._tags) if t] or None
        filters = {
            key: value.render(context) if isinstance(value, CompiledTemplate) else value
            for key, value in self._filters.items()
        } or None
        return text or None, tags, filters

    def namespace(self, context: dict[str, Any]) -> str:
        """This turn's namespace; a shared store never falls back to the default one."""
        if self._namespace is None:
            return ""
        rendered = self._namespace.render(context)
        if self._shared and not rendered:
            raise ProviderError(
                f"memory provider {self.name!r}: the namespace rendered empty, and the store"
                " is shared (no default namespace)"
            )
        return rendered

    def _query(
        self, store: Any, context: dict[str, Any], *, limit: int | None = None, scored: bool = True
    ) -> Any:
        """This turn's query; ``limit`` and ``scored=False`` (no ``min_score``) look further
        for the near misses of an explained turn."""
        text, tags, filters = self._rendered(context)
        limit = limit or self.config.query.limit
        if is_lionagi(store):
            return lionagi_query(text, tags, filters, limit)
        return MemoryQuery(
            text=text,
            tags=tags,
            filters=filters,
            limit=limit,
            namespace=self.namespace(context),
            match=self.config.effective_match,
            min_score=self.config.min_score if scored else None,
        )

    def cache_key(self, branch: Any, instruction: Any) -> str:
        """The rendered query and namespace, and the branch when the store searched is the
        branch's own."""
        context = self.context(branch, instruction)
        text, tags, filters = self._rendered(context)
        owner = branch_view(branch)["id"] if self.store is None else None
        query = [text, tags, filters, self.config.query.limit, owner, self.namespace(context)]
        return json.dumps(query, sort_keys=True, default=str)

    def display_query(self, branch: Any, instruction: Any) -> str:
        """The rendered query text, for traces (tags, filters and namespace are left out)."""
        return self._rendered(self.context(branch, instruction))[0] or ""

    async def produce(self, branch: Any, instruction: Any, context: dict[str, Any]) -> str | None:
        store = self.store_for(branch)
        hits = [_item_view(hit) for hit in await store.search(self._query(store, context))]
        near = await self._near_misses(store, context, hits) if explaining() else []
        if not hits and not near:
            return None
        rendered = [
            self._template.render({**context, "item": view, "index": i})
            for i, view in enumerate([*hits, *(view for view, _ in near)], 1)
        ]
        separator = self.config.separator
        header = self._header.render(context) + separator if self._header is not None else ""
        cap = self.config.max_tokens
        return ranked(
            self,
            len(hits),
            lambda chosen: header + separator.join(rendered[i] for i in chosen),
            lambda: [_item(view) for view in hits],
            near=[(_item(view), fate) for view, fate in near],
            max_tokens=max(cap - self.reserve_tokens, 1) if cap else None,
            reserve=self.reserve_tokens,
            max_chars=MAX_BLOCK_CHARS,
            fit=self.config.fit,
            label=f"memory {self.name!r}",
            setting="query.limit",
        )

    async def _near_misses(
        self, store: Any, context: dict[str, Any], hits: list[dict[str, Any]]
    ) -> list[tuple[dict[str, Any], Fate]]:
        """The items a query ``search_depth(limit)`` deep without ``min_score`` finds beyond
        ``hits``, each with why it is not among them (a second query, so that the hits are
        exactly those of a turn that does not explain itself)."""
        query = self._query(
            store, context, limit=search_depth(self.config.query.limit), scored=False
        )
        taken = {view["id"] for view in hits}
        floor = self.config.min_score
        misses: list[tuple[dict[str, Any], Fate]] = []
        for hit in await store.search(query):
            view = _item_view(hit)
            if view["id"] in taken:
                continue
            score = view["score"]
            below = floor is not None and score is not None and score < floor
            misses.append((view, "below_min_score" if below else "beyond_top_k"))
        return misses

    def __repr__(self) -> str:
        source = self.config.source
        if isinstance(source, PostgresSource):
            where = repr(self.store)  # never the DSN: it may hold a password
        else:
            where = str(getattr(source, "jsonl", None) or getattr(source, "sqlite", source))
        return f"<{type(self).__name__} {self.name!r} source={where!r}>"


class WritebackMemoryProvider(MemoryProvider):
    """A MemoryProvider that also stores action responses (only built when writeback is on)."""

    async def writeback(self, branch: Any, action_responses: list[Any]) -> int:
        """Store each non-None action response as an item; returns how many were new.

        Each item's id comes from the branch, the turn and the content: the same response
        written back again for the same turn (a retry) is not stored twice.
        """
        settings = self.config.writeback_config or WritebackConfig()
        store = self.store_for(branch)
        branch_id = branch_view(branch)["id"]
        metadata = {
            "source": "writeback",
            "provider": self.name,
            "branch_id": branch_id,
            **settings.metadata,
        }
        turn = turn_key(branch)
        cap = settings.max_item_chars
        if len(action_responses) > _ON_THE_LOOP:  # hashing thousands would stall other turns
            keyed = await asyncio.to_thread(_keyed, action_responses, branch_id, turn, cap)
        else:
            keyed = _keyed(action_responses, branch_id, turn, cap)
        contents, ids, bad, cut = keyed
        if cut:
            logger.warning(
                "memory %r: %d written-back item(s) over writeback.max_item_chars (%s) stored "
                "cut; the longest had %s characters",
                self.name,
                len(cut),
                f"{cap:,}",
                f"{max(cut):,}",
            )
        if is_lionagi(store):
            stored, failures = await store_lionagi(store, contents, ids, settings.tags, metadata)
            bad.extend(f"item {item_id} ({_why(e)})" for item_id, e in failures)
        else:
            namespace = self.namespace(self.context(branch, ""))
            expires = None if settings.ttl_s is None else time.time() + settings.ttl_s
            items = [
                MemoryItem(
                    content, list(settings.tags), dict(metadata), item_id, namespace, expires
                )
                for content, item_id in zip(contents, ids, strict=True)
            ]
            stored = await self._store_items(store, items, settings.max_items, bad)
        if bad:  # the good ones are stored; the registry contains and logs this (ADR D7)
            shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
            raise StoreError(
                f"memory {self.name!r}: stored {stored} new of {len(contents)} action "
                f"{'response' if len(contents) == 1 else 'responses'}; not stored: {shown}"
            )
        return WritebackCount(stored, len(cut)) if cut else stored

    async def _store_items(
        self, store: Any, items: list[MemoryItem], cap: int | None, bad: list[str]
    ) -> int:
        """One idempotent batch; if the batch fails, item by item, so one bad item costs
        only itself."""
        if isinstance(store, ItemStore):  # composer's own
            try:
                return await store.add(items, written_back=True, cap=cap)
            except Exception:
                stored = 0
                for run in chunks(items):  # the store writes in runs: find the run that failed
                    try:
                        stored += await store.add(run, written_back=True, cap=cap)
                        continue
                    except Exception:
                        pass
                    for item in run:
                        try:
                            stored += await store.add([item], written_back=True, cap=cap)
                        except Exception as e:
                            bad.append(f"item {item.id} ({_why(e)})")
                return stored
        stored = 0
        for item in items:  # a store of the LionAGI shape only
            try:
                await store.store(item)
                stored += 1
            except Exception as e:
                bad.append(f"item {item.id} ({_why(e)})")
        return stored


_ON_THE_LOOP = 64
"""Action responses keyed on the event loop; more are keyed in a worker thread."""


def _keyed(
    action_responses: list[Any], branch_id: str, turn: str, cap: int
) -> tuple[list[Any], list[str], list[str], list[int]]:
    """Each non-None response as storable content (bounded to ``cap`` characters) with its
    idempotent id (of the whole response), what could not be stored (by position and error
    type only: one odd response costs only itself), and the full length of each one cut."""
    contents: list[Any] = []
    ids: list[str] = []
    bad: list[str] = []
    cut: list[int] = []
    for position, response in enumerate(action_responses, 1):
        if response is None:
            continue
        try:
            content = _content(response)
            item_id = writeback_id(branch_id, turn, content)
            bounded, size = _bounded(content, cap)
        except Exception as e:
            bad.append(f"response {position} ({_why(e)})")
            continue
        ids.append(item_id)
        contents.append(bounded)
        if size is not None:
            cut.append(size)
    return contents, ids, bad, cut


def _bounded(content: Any, cap: int) -> tuple[Any, int | None]:
    """``content`` as stored, and its full length when it was cut: itself while its text
    (what a search reads) has at most ``cap`` characters, else the first characters of that
    text followed by a note of its full length, ``cap`` characters in all."""
    text = content if isinstance(content, str) else body_of(content)
    if len(text) <= cap:
        return content, None
    note = f"\n[cut to {cap:,} characters: the whole result had {len(text):,}]"
    return text[: cap - len(note)] + note, len(text)


def _why(error: Exception) -> str:
    """Why an item was not stored: the type, and the message of composer's own errors (they
    never quote content); another error's message might, so it is not repeated."""
    if isinstance(error, ProviderError):
        lines = str(error).strip().splitlines()
        return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return type(error).__name__


def _store(source: Source, context: BuildContext) -> ItemStore | None:
    """The configured store, one per place per loaded manifest (closed with the manifest)."""
    if isinstance(source, JsonlSource):
        path = source.jsonl
        return context.shared(f"memory:jsonl:{path}", lambda: JsonlMemoryStore(path))
    if isinstance(source, SqliteSource):
        sqlite, seed = source.sqlite, source.seed
        return context.shared(
            f"memory:sqlite:{sqlite}", lambda: SqliteMemoryStore(sqlite, seed=seed)
        )
    if isinstance(source, PostgresSource):
        pg, seed = source.postgres, source.seed
        return context.shared(
            f"memory:postgres:{pg.dsn}\x1f{pg.db_schema}",
            lambda: PostgresMemoryStore(
                pg.dsn,
                schema=pg.db_schema,
                pool_size=pg.pool_size,
                connect_timeout_s=pg.connect_timeout_s,
                seed=seed,
            ),
        )
    return None


def _factory(config: MemoryConfig, context: BuildContext) -> MemoryProvider:
    cls = WritebackMemoryProvider if config.writeback_config else MemoryProvider
    provider = cls(config, _store(config.source, context))
    provider.reserve_tokens = wrap_reserve(config, context)
    return provider


provider_type = ProviderType(
    "memory",
    MemoryConfig,
    _factory,
    "Items from a memory store (SQLite, PostgreSQL, a JSONL file, or the branch's own).",
    operation="search_memory",
)
