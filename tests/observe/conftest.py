"""Shared pieces of the observability tests: manifests on disk, turns, an in-memory span exporter.

The span exporter is the OpenTelemetry SDK's own (a dev dependency); the tracer provider is
set once per process, as OpenTelemetry allows, and emptied before each test that uses it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import composer
from composer.registry import ProviderReport

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def write(path: Path, text: str) -> Path:
    """``text`` (dedented) into ``path``; the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


async def turns(
    manifest: composer.Manifest, count: int, *, name: str = "payments", text: str = "deploy"
) -> list[ProviderReport]:
    """``count`` turns of one branch built from ``manifest``; their reports."""
    branch = composer.Branch("You are on call.\n", name=name)
    composer.attach(branch, manifest)
    reports = []
    for i in range(count):
        turn = await composer.prepare_turn(branch, f"{text} {i}")
        assert turn.report is not None
        reports.append(turn.report)
    return reports


_EXPORTER: Any = None


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans finished during the test, from the SDK's in-memory exporter."""
    global _EXPORTER
    pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK is not installed")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    if _EXPORTER is None:
        _EXPORTER = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()
