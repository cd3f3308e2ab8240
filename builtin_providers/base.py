"""What every built-in provider shares: its name, the ``when`` guard, the template context."""

from __future__ import annotations

from typing import Any

from composer.manifest import ProviderConfig
from composer.templating import compile_expression, template_context

__all__ = ["ManifestProvider"]


class ManifestProvider:
    """Base of the built-in providers: ``provide`` runs ``when`` first, then ``produce``."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.name = config.name
        self._when = compile_expression(config.when) if config.when else None

    def context(self, branch: Any, instruction: Any, **extra: Any) -> dict[str, Any]:
        """The template variables for this turn (one adapter for composer and lionagi)."""
        return template_context(branch, instruction, provider=self.name, extra=extra)

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        """None without doing any work when ``when`` is false (no report row, ADR D2).

        An empty block is also None. Failures raise (the registry records them, ADR D2);
        an error never comes back as text the model would read.
        """
        context = self.context(branch, instruction)
        if self._when is not None and not self._when.evaluate(context):
            return None
        return await self.produce(branch, instruction, context) or None

    async def produce(self, branch: Any, instruction: Any, context: dict[str, Any]) -> str | None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
