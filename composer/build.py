"""From a loaded manifest to a per-branch registry, and onto a branch: the engine.

Every provider a manifest declares is wrapped in a ``ManagedProvider`` before it is registered,
whatever its type and class, so what all providers share behaves the same for a built-in type
and a third-party one: a disabled provider is never built, a false ``when`` means the provider
is not called and leaves no row (ADR D2), and its optional hooks (``composer.hooks``) are
looked up once, here. The registry itself is ADR-0008's, unchanged; ``ManifestRegistry`` only
adds the lifecycle around it (``warm_up``, ``aclose``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

from composer.catalog import ProviderTypes
from composer.errors import ProviderError
from composer.hooks import Closeable, Progress, WarmUp, Writeback
from composer.manifest.models import Manifest, ProviderConfig
from composer.plugin import BuildContext
from composer.registry import (
    BranchLike,
    ContextProvider,
    ContextProviderRegistry,
    InstructionLike,
)
from composer.templating import CompiledExpression, compile_expression, template_context

__all__ = [
    "ManagedProvider",
    "ManifestRegistry",
    "attach",
    "build_registry",
    "declared_hooks",
    "manage",
]


class ManagedProvider:
    """One provider as the engine runs it: the ``when`` guard applied around ``provide``."""

    def __init__(self, provider: ContextProvider, config: ProviderConfig) -> None:
        self.provider = provider
        self.config = config
        self.name = config.name
        self.hooks = declared_hooks(type(provider))
        self._when: CompiledExpression | None = (
            compile_expression(config.when) if config.when else None
        )

    def guard(self, branch: BranchLike, instruction: InstructionLike) -> bool:
        """The value of ``when`` this turn (True when there is none); raises TemplateError."""
        if self._when is None:
            return True
        context = template_context(branch, instruction, provider=self.name)
        return bool(self._when.evaluate(context))

    async def provide(self, branch: BranchLike, instruction: InstructionLike) -> str | None:
        """None without calling the provider when ``when`` is false (no report row, ADR D2).

        The result is held to the protocol, ``str | None``: anything else raises
        ``ProviderError`` here, inside the registry's containment, so one broken plugin is one
        failed row instead of a turn taken down when the registry counts or renders it (which
        ADR D2 leaves uncontained for bare registries). The value is never converted or shown.
        """
        if not self.guard(branch, instruction):
            return None
        result: object = await self.provider.provide(branch, instruction)
        if result is None or type(result) is str:
            return result
        if isinstance(result, str):  # a subclass may override what str() or format() do
            return str.__str__(result)
        raise ProviderError(
            f"provider {self.name!r} returned {type(result).__name__}, not str or None"
        )

    async def warm_up(self, progress: Progress | None = None) -> Any:
        """The provider's own warm-up, if it declared one (its result, else None)."""
        if WarmUp in self.hooks:
            return await cast(WarmUp, self.provider).warm_up(progress)
        return None

    async def aclose(self) -> None:
        if Closeable in self.hooks:
            await cast(Closeable, self.provider).aclose()

    def __repr__(self) -> str:
        return f"<managed {self.provider!r}>"


class _ManagedWriteback(ManagedProvider):
    """A managed provider that declared ``writeback``: only these get the ADR D7 call."""

    async def writeback(self, branch: BranchLike, action_responses: list[Any]) -> Any:
        return await cast(Writeback, self.provider).writeback(branch, action_responses)


@functools.lru_cache(maxsize=1024)
def declared_hooks(cls: type) -> frozenset[type]:
    """The optional hooks (``composer.hooks``) that the provider class ``cls`` defines.

    Hooks are methods of the class, so this is answered once per class rather than once per
    branch (a Protocol check is slow, and attach runs for every conversation).
    """
    return frozenset(hook for hook in (Writeback, WarmUp, Closeable) if issubclass(cls, hook))


def manage(provider: ContextProvider, config: ProviderConfig) -> ManagedProvider:
    """``provider`` wrapped with what the engine owns; its hooks are looked up here."""
    cls = _ManagedWriteback if Writeback in declared_hooks(type(provider)) else ManagedProvider
    return cls(provider, config)


class ManifestRegistry(ContextProviderRegistry):
    """The ADR-0008 registry of one branch, built from a manifest, plus the providers'
    lifecycle: ``warm_up`` ahead of the first turn and one ``aclose`` for all of them."""

    def __init__(self, budget: int, managed: list[ManagedProvider]) -> None:
        super().__init__(budget=budget)
        self.managed = managed
        for provider in managed:
            self.register(
                provider,
                priority=provider.config.priority,
                max_tokens=provider.config.max_tokens,
                name=provider.name,
            )

    async def warm_up(
        self, progress: Callable[[str], Progress | None] | None = None
    ) -> dict[str, Exception]:
        """Warm every provider that has the hook; the failures by provider name.

        A failure is not raised: the provider meets the same problem in its turn, where the
        registry contains it (ADR D2).
        """
        failures: dict[str, Exception] = {}
        for provider in self.managed:
            try:
                await provider.warm_up(progress(provider.name) if progress else None)
            except Exception as e:
                failures[provider.name] = e
        return failures

    async def aclose(self) -> None:
        """Close every provider; all are tried, the first failure is raised afterwards."""
        first: Exception | None = None
        for provider in self.managed:
            try:
                await provider.aclose()
            except Exception as e:
                first = first or e
        if first is not None:
            raise first


def build_registry(manifest: Manifest, *, types: ProviderTypes | None = None) -> ManifestRegistry:
    """A new registry with the manifest's enabled providers, in declaration order.

    Each call returns a fresh registry (one per branch); heavy state such as a corpus index is
    shared through ``BuildContext.shared`` between the registries built from one loaded
    manifest. Types come from ``types``, else those that validated the manifest, else every
    installed type; entry points are never rescanned here.
    """
    catalog = types if types is not None else manifest.types
    if catalog is None:
        catalog = ProviderTypes.installed()
    context = BuildContext(manifest)
    managed = [
        manage(catalog.get(config.type).factory(config, context), config)
        for config in manifest.providers
        if config.enabled
    ]
    return ManifestRegistry(manifest.budget, managed)


def attach(
    branch: Any, manifest: Manifest, *, types: ProviderTypes | None = None
) -> ManifestRegistry:
    """Give ``branch`` its own new registry built from ``manifest``, replacing any it had.

    Works on a ``composer.Branch`` and on a ``lionagi`` Branch alike: both keep the registry
    in ``_context_providers``, which their turn paths read (ADR-0008 D1, D4).
    """
    registry = build_registry(manifest, types=types)
    branch._context_providers = registry
    return registry
