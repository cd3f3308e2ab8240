"""Fixtures for the manifest tests: a scratch folder as the working directory, provider types.

Paths in manifests are written relative (``m.yaml``) so that error texts are exactly what a
user sees, ``m.yaml:6:5: ...``. Types are passed in explicitly: ``static`` (built in) and a
``probe`` type defined here with one field of each kind the loader must get right.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import Field

from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.manifest import ManifestPath, ProviderConfig, StrictModel
from composer.plugin import BuildContext, ProviderType


class Request(StrictModel):
    url: str
    timeout_s: float = 1.0
    headers: dict[str, str] = Field(default_factory=dict)


class ProbeConfig(ProviderConfig):
    """A provider type with a field of every kind: str, int, bool, mapping, path, list, model."""

    type: Literal["probe"] = "probe"
    label: str = ""
    count: int = 0
    flag: bool = False
    params: dict[str, Any] = Field(default_factory=dict)
    root: ManifestPath | None = None
    items: list[str] = Field(default_factory=list)
    request: Request | None = None


class Probe:
    def __init__(self, config: ProbeConfig) -> None:
        self.config = config
        self.name = config.name

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        return self.config.label or None


def _probe(config: ProbeConfig, context: BuildContext) -> Probe:
    return Probe(config)


probe_type = ProviderType("probe", ProbeConfig, _probe, "test probe")


@pytest.fixture
def types() -> ProviderTypes:
    return ProviderTypes([static_type, probe_type])


@pytest.fixture
def write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """``write("m.yaml", text)`` writes a dedented file under a fresh working directory."""
    monkeypatch.chdir(tmp_path)

    def write(name: str, text: str | bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return write
