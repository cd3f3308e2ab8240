"""``type: memory``: search a memory store and format each hit; optional writeback.

``source: branch`` reads ``branch.memory`` (ADR-0008 D6: a provider may use the branch's
store; the registry knows nothing of it). ``source: {jsonl: path}`` uses a JsonlMemoryStore
shared by every registry built from the same manifest. With a LionAGI store the query and
the written items are LionAGI's own ``MemoryQuery`` and ``MemoryItem``, imported only then.

Writeback is off by default, and then the provider has no ``writeback`` attribute at all, so
the registry's ``getattr(provider, "writeback", None)`` (ADR D7) skips it.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from builtin_providers.memory_store import JsonlMemoryStore, MemoryItem, MemoryQuery, MemoryStore
from composer.plugin import (
    CONTEXT_NAMES,
    BuildContext,
    CompiledTemplate,
    ManifestPath,
    Provider,
    ProviderConfig,
    ProviderError,
    ProviderType,
    StrictModel,
    Template,
    branch_view,
    compile_template,
    template_check,
)

__all__ = [
    "DEFAULT_ITEM_TEMPLATE",
    "JsonlSource",
    "MemoryConfig",
    "MemoryProvider",
    "MemoryQueryConfig",
    "WritebackConfig",
    "WritebackMemoryProvider",
    "provider_type",
]

DEFAULT_ITEM_TEMPLATE = "- {{ item.content }}"

_ITEM_NAMES = CONTEXT_NAMES | {"item", "index"}
_ItemTemplate = Annotated[str, template_check("item", "index")]


class JsonlSource(StrictModel):
    """A JSONL memory file, relative to the manifest that names it."""

    jsonl: ManifestPath = Field(
        description="One JSON object per line: content, tags, metadata, id."
    )


class MemoryQueryConfig(StrictModel):
    """The MemoryQuery to run; every string in it is a template."""

    text: Template | None = Field(
        default=None, description="Case-insensitive substring of the item content; empty means any."
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


class MemoryConfig(ProviderConfig):
    """Memory items matching a query, one template per item."""

    type: Literal["memory"] = "memory"
    source: Literal["branch"] | JsonlSource = Field(
        default="branch", description="`branch` (branch.memory) or `{jsonl: path}`."
    )
    query: MemoryQueryConfig = Field(
        default=MemoryQueryConfig(),
        description="The MemoryQuery sent each turn; every string in it is a template.",
    )
    template: _ItemTemplate = Field(
        default=DEFAULT_ITEM_TEMPLATE,
        description="One hit; sees `item` (id, content, tags, metadata) and `index` (1-based).",
    )
    header: Template | None = Field(
        default=None,
        description="Text before the items, when any match; followed by `separator`.",
    )
    separator: str = Field(default="\n", description="Between rendered items.")
    writeback: bool | WritebackConfig = Field(
        default=False, description="Store action responses as items (true, or {tags, metadata})."
    )

    @property
    def writeback_config(self) -> WritebackConfig | None:
        if self.writeback is True:
            return WritebackConfig()
        return self.writeback or None


def _is_lionagi(store: Any) -> bool:
    return type(store).__module__.split(".", 1)[0] == "lionagi"


def _lionagi_memory() -> Any:
    return importlib.import_module("lionagi.protocols.memory")


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def _item_view(item: Any) -> dict[str, Any]:
    """Plain data of a hit from any store: templates never see the live object."""
    return {
        "id": str(_field(item, "id")),
        "content": _field(item, "content"),
        "tags": list(_field(item, "tags") or []),
        "metadata": dict(_field(item, "metadata") or {}),
    }


def _content(response: Any) -> Any:
    """An action response as storable data (a pydantic model is dumped as JSON data)."""
    dump = getattr(response, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(response, Mapping):
        return dict(response)
    return response if isinstance(response, (str, int, float, bool, list)) else str(response)


class MemoryProvider(Provider[MemoryConfig]):
    """Runs the configured MemoryQuery on its store and renders each hit."""

    def __init__(self, config: MemoryConfig, store: MemoryStore | None) -> None:
        super().__init__(config)
        self.config: MemoryConfig = config
        self.store = store
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
                " give the branch one, or use source: {jsonl: path}"
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

    def _query(self, store: Any, context: dict[str, Any]) -> Any:
        text, tags, filters = self._rendered(context)
        limit = self.config.query.limit
        if _is_lionagi(store):
            query_class = _lionagi_memory().MemoryQuery
            return query_class(text=text, tags=tags, filters=filters, limit=limit)
        return MemoryQuery(text=text, tags=tags, filters=filters, limit=limit)

    def cache_key(self, branch: Any, instruction: Any) -> str:
        """The rendered query, and the branch when the store searched is the branch's own."""
        text, tags, filters = self._rendered(self.context(branch, instruction))
        owner = branch_view(branch)["id"] if self.store is None else None
        query = [text, tags, filters, self.config.query.limit, owner]
        return json.dumps(query, sort_keys=True, default=str)

    async def produce(self, branch: Any, instruction: Any, context: dict[str, Any]) -> str | None:
        store = self.store_for(branch)
        hits = await store.search(self._query(store, context))
        if not hits:
            return None
        rendered = [
            self._template.render({**context, "item": _item_view(hit), "index": i})
            for i, hit in enumerate(hits, 1)
        ]
        body = self.config.separator.join(rendered)
        if self._header is not None:
            body = self._header.render(context) + self.config.separator + body
        return body

    def __repr__(self) -> str:
        source = self.config.source
        where = "branch" if source == "branch" else str(getattr(source, "jsonl", source))
        return f"<{type(self).__name__} {self.name!r} source={where!r}>"


class WritebackMemoryProvider(MemoryProvider):
    """A MemoryProvider that also stores action responses (only built when writeback is on)."""

    async def writeback(self, branch: Any, action_responses: list[Any]) -> int:
        """Store each non-None action response as an item; returns how many were stored."""
        settings = self.config.writeback_config or WritebackConfig()
        store = self.store_for(branch)
        metadata = {
            "source": "writeback",
            "provider": self.name,
            "branch_id": branch_view(branch)["id"],
            **settings.metadata,
        }
        make = _lionagi_memory().MemoryItem if _is_lionagi(store) else MemoryItem
        stored = 0
        for response in action_responses:
            if response is None:
                continue
            item = make(
                content=_content(response), tags=list(settings.tags), metadata=dict(metadata)
            )
            await store.store(item)
            stored += 1
        return stored


def _factory(config: MemoryConfig, context: BuildContext) -> MemoryProvider:
    store: MemoryStore | None = None
    if isinstance(config.source, JsonlSource):
        path = config.source.jsonl
        store = context.shared(f"memory:jsonl:{path}", lambda: JsonlMemoryStore(path))
    cls = WritebackMemoryProvider if config.writeback_config else MemoryProvider
    return cls(config, store)


provider_type = ProviderType(
    "memory", MemoryConfig, _factory, "Items from a memory store (the branch's or a JSONL file)."
)
