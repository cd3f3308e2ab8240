"""Pydantic models of a manifest. No I/O here: ``loader.py`` reads files and builds these.

A provider entry is validated by the config model of its type (found through ``plugins.py``);
the fields every type shares live in ``ProviderConfig``. Unknown keys are errors everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, SerializeAsAny

from composer.registry import DEFAULT_BUDGET
from composer.templating import Expression

__all__ = [
    "Manifest",
    "ManifestPath",
    "ProviderConfig",
    "RuntimeConfig",
    "SourceStr",
    "StrictModel",
]


class StrictModel(BaseModel):
    """Base of every manifest model: unknown keys are errors; input never echoed in errors."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, frozen=True)


class SourceStr(str):
    """A string read from a manifest file, remembering where it stood.

    The loader hands every YAML string to validation as a SourceStr, so a ``ManifestPath``
    can resolve a relative path against the folder of the file that holds it, even after
    overlays merged values from several files.
    """

    path: Path
    line: int
    column: int

    def __new__(cls, value: str, path: Path, line: int, column: int) -> SourceStr:
        obj = super().__new__(cls, value)
        obj.path = path
        obj.line = line
        obj.column = column
        return obj


def _resolve_path(value: Any) -> Any:
    if isinstance(value, SourceStr):
        path = Path(value)
        return path if path.is_absolute() else (value.path.parent / path)
    return value


ManifestPath = Annotated[Path, BeforeValidator(_resolve_path)]
"""A filesystem path; relative paths are relative to the manifest file that holds them."""


class ProviderConfig(StrictModel):
    """Fields every provider entry has; each type's model adds its own and narrows ``type``."""

    name: str = Field(min_length=1, description="Unique in the manifest; the report's name.")
    type: str = Field(description="The provider type (built-in or from an entry-point plugin).")
    priority: int = Field(
        0,
        description=(
            "Admission order under budget pressure: HIGHER numbers are admitted first "
            "(ADR-0008 D3). Rendering order is always declaration order."
        ),
    )
    max_tokens: int | None = Field(
        None,
        ge=0,
        description=(
            "Per-provider cap: a result with more tokens is skipped whole, never truncated. "
            "0 or null means no cap (ADR-0008 D3)."
        ),
    )
    enabled: bool = Field(True, description="false leaves the provider out of the registry.")
    when: Expression | None = Field(
        None,
        description=(
            "Optional Jinja expression; when it is false the provider does no work and "
            "returns nothing, so it leaves no row in the report."
        ),
    )


class RuntimeConfig(StrictModel):
    """Reserved for opt-in runtime features beyond ADR-0008; empty means the ADR's behaviour."""


class Manifest(StrictModel):
    """A validated manifest, after ``extends`` and overlays were applied."""

    version: Literal[1] = Field(description="Manifest format version; must be 1.")
    budget: int = Field(
        DEFAULT_BUDGET,
        ge=0,
        description="Total tokens of injected context per turn (ADR-0008 D3).",
    )
    extends: str | None = Field(
        None, description="A base manifest this one overlays, relative to this file."
    )
    providers: list[SerializeAsAny[ProviderConfig]] = Field(default_factory=list)
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)

    _path: Path | None = PrivateAttr(None)
    _secrets: frozenset[str] = PrivateAttr(frozenset())
    _shared: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def path(self) -> Path | None:
        """The file this manifest was loaded from (the overlay, when it extends another)."""
        return self._path

    @property
    def shared(self) -> dict[str, Any]:
        """Heavy provider state (an index, a client) shared by every registry built from it."""
        return self._shared

    def redact(self, text: str) -> str:
        """``text`` with every value that came from a ``${VAR}`` replaced by ``***``."""
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret:
                text = text.replace(secret, "***")
        return text
