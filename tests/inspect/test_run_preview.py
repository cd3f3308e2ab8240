"""``composer.inspect.preview.run_preview``, the library's way to preview a turn: one row per
declared provider, read from the registry's own outcome records."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

from repofiles import put

import composer
from builtin_providers.static import provider_type as static_type
from composer import ProviderReport
from composer.catalog import ProviderTypes
from composer.inspect.preview import run_preview
from composer.manifest import ProviderConfig
from composer.plugin import ProviderType


class Multiline(ProviderConfig):
    type: Literal["multiline"] = "multiline"


class MultilineProvider:
    async def provide(self, branch: Any, instruction: Any) -> str | None:
        raise RuntimeError("the first line\nthe second line\nthe third")


MULTILINE_TYPES = ProviderTypes(
    [static_type, ProviderType("multiline", Multiline, lambda c, ctx: MultilineProvider())]
)


def test_a_failure_shows_the_first_line_of_its_error(tmp_path: Path) -> None:
    put(tmp_path / "m.yaml", "version: 1\nproviders:\n  - {name: odd, type: multiline}\n")
    manifest = composer.load_manifest(tmp_path / "m.yaml", types=MULTILINE_TYPES)
    preview = asyncio.run(run_preview(manifest, "x", types=MULTILINE_TYPES))
    assert preview.rows[0].outcome == "failed"
    assert preview.rows[0].error == "RuntimeError: the first line"
    assert preview.report == ProviderReport(failed=["odd"])
