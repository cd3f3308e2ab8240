"""From a loaded manifest to a per-branch registry, and onto a branch."""

from __future__ import annotations

from typing import Any

from composer.manifest import Manifest
from composer.plugins import BuildContext, ProviderTypes
from composer.registry import ContextProviderRegistry

__all__ = ["attach", "build_registry"]


def build_registry(
    manifest: Manifest, *, types: ProviderTypes | None = None
) -> ContextProviderRegistry:
    """A new registry with the manifest's enabled providers, in declaration order.

    Each call returns a fresh registry (one per branch); heavy state such as a corpus index
    or an HTTP client pool is shared through ``manifest.shared`` between the registries
    built from one loaded manifest.
    """
    types = types if types is not None else ProviderTypes.installed()
    context = BuildContext(manifest)
    registry = ContextProviderRegistry(budget=manifest.budget)
    for config in manifest.providers:
        if not config.enabled:
            continue
        provider = types.get(config.type).factory(config, context)
        registry.register(
            provider, priority=config.priority, max_tokens=config.max_tokens, name=config.name
        )
    return registry


def attach(
    branch: Any, manifest: Manifest, *, types: ProviderTypes | None = None
) -> ContextProviderRegistry:
    """Give ``branch`` its own new registry built from ``manifest``, replacing any it had.

    Works on a ``composer.Branch`` and on a ``lionagi`` Branch alike: both keep the registry
    in ``_context_providers``, which their turn paths read (ADR-0008 D1, D4).
    """
    registry = build_registry(manifest, types=types)
    branch._context_providers = registry
    return registry
