"""``type: static``: a fixed text, or a template rendered per turn."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from composer.plugin import (
    BuildContext,
    Provider,
    ProviderConfig,
    ProviderType,
    Template,
    compile_template,
)

__all__ = ["StaticConfig", "StaticProvider", "provider_type"]


class StaticConfig(ProviderConfig):
    """A block of text; without template syntax it is rendered once, not per turn."""

    type: Literal["static"] = "static"
    text: Template = Field(description="The block (a Jinja template; see the template context).")


class StaticProvider(Provider[StaticConfig]):
    def __init__(self, config: StaticConfig) -> None:
        super().__init__(config)
        self._template = compile_template(config.text)

    def constant_text(self) -> str | None:
        """A text without template syntax is the same every turn (the engine reuses it)."""
        if not self._template.is_constant:
            return None
        return self._template.source or None

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        """A fixed text needs no template context: it is returned as it is, every turn."""
        if self._template.is_constant:
            return self._template.source or None
        return await super().provide(branch, instruction)

    async def produce(self, branch: Any, instruction: Any, context: dict[str, Any]) -> str | None:
        return self._template.render(context)


def _factory(config: StaticConfig, context: BuildContext) -> StaticProvider:
    return StaticProvider(config)


provider_type = ProviderType("static", StaticConfig, _factory, "Fixed text or a per-turn template.")
