"""Pydantic models of a manifest. No I/O here: ``loader.py`` reads files and builds these.

A provider entry is validated by the config model of its type (found through ``plugins.py``);
the fields every type shares live in ``ProviderConfig``. Unknown keys are errors everywhere.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializeAsAny,
    create_model,
)

from composer.registry import DEFAULT_BUDGET
from composer.templating import Expression

__all__ = [
    "KeyPath",
    "Manifest",
    "ManifestPath",
    "Origin",
    "ProviderConfig",
    "RuntimeConfig",
    "SourceFloat",
    "SourceInt",
    "SourceStr",
    "StrictModel",
    "manifest_model",
    "redact",
]

_SHORT_SECRET = 4

KeyPath = tuple[str | int, ...]
"""Where a value sits in a manifest: keys and list indexes, providers addressed by name."""


class StrictModel(BaseModel):
    """Base of every manifest model: unknown keys are errors; input never echoed in errors."""

    # coerce_numbers_to_str: a str field given ``1.10`` receives the text "1.10" (the loader's
    # numbers remember their source text), not a float turned back into "1.1".
    model_config = ConfigDict(
        extra="forbid", hide_input_in_errors=True, frozen=True, coerce_numbers_to_str=True
    )


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


class SourceInt(int):
    """An integer read from a manifest; ``str()`` is its text as written (``007``, ``0x1F``).

    Where a string field receives a number, validation uses ``str()`` of it (see
    ``StrictModel``), so the value stays what the file says.
    """

    text: str

    def __new__(cls, value: int, text: str) -> SourceInt:
        obj = super().__new__(cls, value)
        obj.text = text
        return obj

    def __str__(self) -> str:
        return self.text


class SourceFloat(float):
    """A float read from a manifest; ``str()`` is its text as written, so ``1.10`` stays ``1.10``."""

    text: str

    def __new__(cls, value: float, text: str) -> SourceFloat:
        obj = super().__new__(cls, value)
        obj.text = text
        return obj

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Origin:
    """Where a manifest value was written: file, 1-based line and column, and its raw text.

    ``raw`` is the scalar as written before ``${VAR}`` interpolation (None for a mapping or a
    list); ``variables`` names the variables substituted into it. A value with variables is a
    secret: show ``raw``, never the value.
    """

    path: str
    line: int
    column: int
    raw: str | None = None
    variables: tuple[str, ...] = ()

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"

    @property
    def is_secret(self) -> bool:
        return bool(self.variables)


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
    runtime: RuntimeConfig = Field(
        default_factory=RuntimeConfig,
        description=(
            "Reserved for opt-in runtime features beyond ADR-0008; empty (the only value "
            "accepted today) means the ADR's behaviour exactly."
        ),
    )

    _path: Path | None = PrivateAttr(None)
    _secrets: frozenset[str] = PrivateAttr(frozenset())
    _shared: dict[str, Any] = PrivateAttr(default_factory=dict)
    _origins: dict[KeyPath, Origin] = PrivateAttr(default_factory=dict)

    @property
    def path(self) -> Path | None:
        """The file this manifest was loaded from (the overlay, when it extends another)."""
        return self._path

    @property
    def shared(self) -> dict[str, Any]:
        """Heavy provider state (an index, a client) shared by every registry built from it."""
        return self._shared

    @property
    def origins(self) -> Mapping[KeyPath, Origin]:
        """Where every value came from, keyed like ``("providers", "status", "request", "url")``.

        Providers are addressed by name, list items by index, after overlays were applied, so
        each origin names the file (base or overlay) that set the final value.
        """
        return MappingProxyType(self._origins)

    def origin(self, *keys: str | int) -> Origin | None:
        """The origin of the value at ``keys`` (e.g. ``origin("providers", "status")``), if any."""
        return self._origins.get(tuple(keys))

    def redact(self, text: str) -> str:
        """``text`` with every value that came from a ``${VAR}`` replaced by ``***``."""
        return redact(text, self._secrets)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` replaced by ``***``, longest first.

    A secret shorter than 4 characters is masked only where it stands as a whole word, so
    that ``TOKEN=x`` does not turn every "x" of a message into "***".
    """
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= _SHORT_SECRET:
            text = text.replace(secret, "***")
        elif secret:
            text = re.sub(rf"(?<![\w]){re.escape(secret)}(?![\w])", "***", text)
    return text


def manifest_model(configs: Iterable[type[ProviderConfig]]) -> type[Manifest]:
    """A Manifest model whose providers are a union of ``configs`` discriminated on ``type``.

    Used for ``composer schema``; the loader validates each entry by its own type instead, so
    an unknown type can be reported with the list of known ones.
    """
    members = tuple(configs)
    item: Any
    if not members:
        item = ProviderConfig
    elif len(members) == 1:
        item = members[0]
    else:
        union = functools.reduce(operator.or_, members)
        try:
            item = Annotated[union, Field(discriminator="type")]
            create_model("_Probe", providers=(list[item], ...))
        except Exception:  # a plugin whose ``type`` is not a Literal: a plain union still works
            item = union
    providers_field: Any = (
        list[item],
        Field(
            default_factory=list,
            description=(
                "Context providers in declaration (rendering) order; each entry's `type` "
                "selects its fields."
            ),
        ),
    )
    model: type[Manifest] = create_model(
        "Manifest", __base__=Manifest, __doc__=Manifest.__doc__, providers=providers_field
    )
    return model
