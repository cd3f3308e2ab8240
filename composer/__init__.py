"""composer: declare in YAML where an LLM agent's pre-turn context comes from.

The runtime (registry, budget admission, report, ephemeral fold) is ADR-0008's, exactly.
"""

from composer.errors import ComposerError, ManifestError, ProviderError, TemplateError
from composer.registry import ContextProvider, ContextProviderRegistry, ProviderReport
from composer.tokens import count_tokens
from composer.turn import Branch, Instruction, PreparedTurn, prepare_turn

__all__ = [
    "Branch",
    "ComposerError",
    "ContextProvider",
    "ContextProviderRegistry",
    "Instruction",
    "ManifestError",
    "PreparedTurn",
    "ProviderError",
    "ProviderReport",
    "TemplateError",
    "count_tokens",
    "prepare_turn",
]

__version__ = "0.1.0"
