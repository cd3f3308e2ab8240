"""composer: declare in YAML where an LLM agent's pre-turn context comes from.

The runtime (registry, budget admission, report, ephemeral fold) is ADR-0008's, exactly.
"""

from composer.build import attach, build_registry
from composer.errors import ComposerError, ManifestError, ProviderError, TemplateError
from composer.manifest import Manifest
from composer.manifest.loader import load_manifest
from composer.registry import ContextProvider, ContextProviderRegistry, ProviderReport
from composer.tokens import count_tokens
from composer.turn import Branch, Instruction, PreparedTurn, prepare_turn

__all__ = [
    "Branch",
    "ComposerError",
    "ContextProvider",
    "ContextProviderRegistry",
    "Instruction",
    "Manifest",
    "ManifestError",
    "PreparedTurn",
    "ProviderError",
    "ProviderReport",
    "TemplateError",
    "attach",
    "build_registry",
    "count_tokens",
    "load_manifest",
    "prepare_turn",
]

__version__ = "0.1.0"
