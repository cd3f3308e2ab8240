"""composer: declare in YAML where an LLM agent's pre-turn context comes from.

The runtime (registry, budget admission, report, ephemeral fold) is ADR-0008's, exactly.

The public names are imported on first use (PEP 562), so that ``composer --version`` and
``composer --help``, which import this package first, do not pay for pydantic, Jinja and the
tokenizer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from composer._version import __version__ as __version__

if TYPE_CHECKING:
    from composer.build import attach, build_registry
    from composer.errors import ComposerError, ManifestError, ProviderError, TemplateError
    from composer.manifest import Manifest
    from composer.manifest.loader import load_manifest
    from composer.observe.watcher import ManifestWatcher
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
    "ManifestWatcher",
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

_HOME = {
    "attach": "composer.build",
    "build_registry": "composer.build",
    "ComposerError": "composer.errors",
    "ManifestError": "composer.errors",
    "ProviderError": "composer.errors",
    "TemplateError": "composer.errors",
    "Manifest": "composer.manifest",
    "load_manifest": "composer.manifest.loader",
    "ManifestWatcher": "composer.observe.watcher",
    "ContextProvider": "composer.registry",
    "ContextProviderRegistry": "composer.registry",
    "ProviderReport": "composer.registry",
    "count_tokens": "composer.tokens",
    "Branch": "composer.turn",
    "Instruction": "composer.turn",
    "PreparedTurn": "composer.turn",
    "prepare_turn": "composer.turn",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:  # a submodule (``composer.plugin``), as an eager package would have it
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
