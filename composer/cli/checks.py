"""Warnings for legal but suspicious manifest values (``composer validate`` prints them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from composer.errors import ComposerError
from composer.manifest import Manifest, Origin
from composer.templating import compile_template
from composer.tokens import count_tokens

__all__ = ["Finding", "manifest_warnings"]


@dataclass(frozen=True)
class Finding:
    """A legal but suspicious value: where it is and why it is suspicious."""

    origin: Origin | None
    message: str

    def render(self, fallback: str) -> str:
        where = self.origin.location if self.origin is not None else f"{fallback}:1:1"
        return f"{where}: warning: {self.message}"


def manifest_warnings(manifest: Manifest) -> list[Finding]:
    """What ``validate`` warns about: values the ADR accepts that rarely mean what was meant.

    ``max_tokens: 0`` is no cap at all (ADR-0008 D3 tests truthiness); a cap above the budget
    never binds; a provider whose fixed text alone is over its cap or the budget is always
    skipped. Disabled providers are not checked.
    """
    findings: list[Finding] = []
    budget = manifest.budget
    if budget == 0:
        findings.append(
            Finding(manifest.origin("budget"), "budget: 0 admits no block with any text")
        )
    for config in manifest.providers:
        if not config.enabled:
            continue
        label = f'provider "{config.name}"'
        where = manifest.origin("providers", config.name, "max_tokens")
        cap = config.max_tokens
        if cap == 0:
            findings.append(
                Finding(
                    where,
                    f"{label}: max_tokens: 0 means no cap (ADR-0008 D3); "
                    "remove it or set a positive cap",
                )
            )
        elif cap is not None and cap > budget:
            findings.append(
                Finding(
                    where,
                    f"{label}: max_tokens {cap} is above the budget {budget}, so it never applies",
                )
            )
        least = _fixed_tokens(config)
        if least is not None and (least > budget or (cap and least > cap)):
            limit = f"its max_tokens {cap}" if cap and least > cap else f"the budget {budget}"
            findings.append(
                Finding(
                    manifest.origin("providers", config.name, "text")
                    or manifest.origin("providers", config.name),
                    f"{label}: its fixed text is {least} tokens, over {limit}; "
                    "it can never be admitted",
                )
            )
    return findings


def _fixed_tokens(config: Any) -> int | None:
    """Tokens of a provider's text when that text is constant (no template syntax), else None."""
    text = getattr(config, "text", None)
    if not isinstance(text, str) or not text:
        return None
    try:
        if not compile_template(text).is_constant:
            return None
    except ComposerError:
        return None
    return count_tokens(text)
