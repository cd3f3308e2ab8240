"""The contract for provider types: everything a type needs, built-in or third-party alike.

A provider type is a config model (a ``ProviderConfig`` subclass whose ``type`` is a
``Literal``) and a factory that turns one validated config into a provider: any object with
``async provide(branch, instruction) -> str | None`` (ADR-0008 D1). The type is advertised
through the ``composer.providers`` entry-point group::

    [project.entry-points."composer.providers"]
    my_type = "my_package.module:provider_type"     # a ProviderType whose name is "my_type"

What every provider shares is the engine's (``composer.build``), applied around whatever the
factory returns, whatever class it derives from: ``enabled`` and ``when`` today, and each
option added later to every provider (``timeout_s``, ``cache``, ``wrap``). A provider only
produces its text. It may also declare the optional hooks of ``composer.hooks``:
``writeback`` (ADR D7), ``warm_up``, ``aclose``, ``cache_key``, ``display_query`` and
``constant_text``; the engine looks for them once per provider class, when it wraps the
provider, and refuses a class whose hook cannot take the call the engine makes (its
Protocol's parameters) or whose ``writeback``, ``warm_up`` or ``aclose`` is not ``async def``
(a ``PluginError`` naming the class and the hook). A config model's hooks (``check``,
``secrets``, ``partition``) are checked the same way when the type is loaded. What its spans
are is the type's to say (``ProviderType.operation``), never guessed from its name.

A provider that ranks items (passages, memory hits, search results) may report what it
considered each turn, so that the engine can explain every candidate and, when the manifest
asks, drop a passage another provider already injected (``runtime.dedup``) or fit the block to
what the budget has left (``runtime.admission: fill``): while ``ranking_wanted()`` is true it
calls ``report_ranking(self, Ranking(candidates, render, refit))``, each ``Candidate`` with a
stable id, its score and its ``Fate``; while ``explaining()`` it looks ``search_depth(top_k)``
deep, so that near misses show. A provider that never reports is explained by its outcome
alone, and deduplicated paragraph by paragraph.

``Provider`` is an optional base class: it keeps the config and name and hands ``produce`` the
turn's template context. The built-in types (``builtin_providers``) import nothing of composer
but this module, and ``__all__`` is the whole contract (a test holds it).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from composer._postgres import PostgresPools
from composer.errors import ProviderError, StoreError, TemplateError
from composer.hooks import (
    CacheKey,
    Check,
    Closeable,
    Constant,
    DisplayQuery,
    Partitioned,
    Problem,
    Progress,
    Secrets,
    WarmUp,
    Writeback,
    WritebackCount,
    check_hooks,
)
from composer.manifest.dsn import describe_dsn, dsn_secrets
from composer.manifest.models import Manifest, ManifestPath, ProviderConfig, StrictModel, redact
from composer.outcomes import (
    Candidate,
    Fate,
    Ranking,
    Refit,
    Render,
    explaining,
    ranking_wanted,
    report_ranking,
    search_depth,
)
from composer.registry import ContextProvider
from composer.templating import (
    CONTEXT_NAMES,
    CompiledTemplate,
    RenderLimits,
    Template,
    TemplateShape,
    UrlTemplate,
    compile_template,
    template_check,
    template_context,
)
from composer.templating.views import branch_view, turn_key
from composer.tokens import count_tokens

__all__ = [
    "CONTEXT_NAMES",
    "BuildContext",
    "CacheKey",
    "Candidate",
    "Check",
    "Closeable",
    "CompiledTemplate",
    "Constant",
    "ContextProvider",
    "DisplayQuery",
    "Fate",
    "ManifestPath",
    "Partitioned",
    "PostgresPools",
    "Problem",
    "Progress",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ProviderFactory",
    "ProviderType",
    "Ranking",
    "Refit",
    "Render",
    "RenderLimits",
    "Secrets",
    "StoreError",
    "StrictModel",
    "Template",
    "TemplateError",
    "TemplateShape",
    "UrlTemplate",
    "WarmUp",
    "Writeback",
    "WritebackCount",
    "branch_view",
    "compile_template",
    "count_tokens",
    "describe_dsn",
    "dsn_secrets",
    "explaining",
    "ranking_wanted",
    "redact",
    "report_ranking",
    "search_depth",
    "template_check",
    "template_context",
    "turn_key",
]

_DEPRECATED = {
    "BranchLike": "composer.registry",
    "InstructionLike": "composer.registry",
    "CompiledExpression": "composer.templating",
    "compile_expression": "composer.templating",
    "template_field": "composer.templating",
    "branch_memory": "composer.templating.views",
    "Expression": "composer.templating",
}
"""Names this module exported that no provider type needs: still importable, with a
``DeprecationWarning``, for one release; they will then be removed."""


if not TYPE_CHECKING:
    # Hidden from type checkers: they flag a deprecated name, Python still resolves it.

    def __getattr__(name: str) -> Any:
        home = _DEPRECATED.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        warnings.warn(
            f"composer.plugin.{name} is deprecated and will be removed: it is not part of the "
            f"provider contract (import it from {home} if you need it)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)


T = TypeVar("T")
ConfigT = TypeVar("ConfigT", bound=ProviderConfig)


@dataclass(frozen=True)
class BuildContext:
    """What a factory may use besides its config: state shared per loaded manifest, redaction."""

    manifest: Manifest

    def shared(self, key: str, make: Callable[[], T]) -> T:
        """State shared by every registry built from the same loaded manifest, made once.

        Use it for what is heavy or holds resources (an index, a connection pool); a value
        that is ``Closeable`` is closed by ``Manifest.aclose()``, so its ``aclose`` must be
        ``async def`` and take no argument (a ``PluginError`` naming its class, here,
        otherwise). One ``key``
        holds one kind of value: the caller that made it decides its type.
        """
        cache = self.manifest.shared
        if key not in cache:
            value = make()
            check_hooks(type(value), [Closeable])
            cache[key] = value
        return cast(T, cache[key])

    def redact(self, text: str) -> str:
        """``text`` with every value the manifest took from a variable masked as ``***``."""
        return self.manifest.redact(text)


ProviderFactory = Callable[[ConfigT, BuildContext], ContextProvider]
"""``factory(config, context)``: one provider for one branch's registry."""


@dataclass(frozen=True)
class ProviderType(Generic[ConfigT]):
    """One provider type: ``name`` (the manifest's ``type:``), its config model and factory.

    ``operation`` is the OpenTelemetry GenAI ``gen_ai.operation.name`` of what the type does
    each turn, which its spans are named and tagged by (``retrieval``: a search of documents,
    whose spans carry ``gen_ai.data_source.id``; ``search_memory``: a search of a memory
    store, ``gen_ai.memory.store.id``); None (the default) when no GenAI operation fits.
    """

    name: str
    config: type[ConfigT]
    factory: ProviderFactory[ConfigT]
    summary: str = ""
    operation: str | None = None


class Provider(Generic[ConfigT]):
    """An optional base for providers: ``provide`` builds the template context, ``produce``
    makes the text from it.

    ``when`` and ``enabled`` are not its business: the engine applies them around every
    provider. An empty text is returned as None (no report row, ADR D2); a failure raises and
    the registry records it (ADR D2), so an error never comes back as text the model reads.
    """

    def __init__(self, config: ConfigT) -> None:
        self.config = config
        self.name = config.name

    def context(self, branch: Any, instruction: Any, **extra: Any) -> dict[str, Any]:
        """This turn's template variables (the same for composer and lionagi objects)."""
        return template_context(branch, instruction, provider=self.name, extra=extra)

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        return await self.produce(branch, instruction, self.context(branch, instruction)) or None

    async def produce(self, branch: Any, instruction: Any, context: dict[str, Any]) -> str | None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
