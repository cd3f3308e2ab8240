"""Small provider fakes shared by the ADR-0008 conformance modules.

They are handed out through fixtures (not imported) so this conftest never collides with
another ``conftest`` module on ``sys.path``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import composer


class Static:
    """Returns a fixed result; records every ``(branch, instruction)`` it is called with."""

    def __init__(self, result: Any, log: list[str], label: str) -> None:
        self.result = result
        self.log = log
        self.label = label
        self.calls: list[tuple[Any, Any]] = []

    async def provide(self, branch: Any, instruction: Any) -> Any:
        self.log.append(f"{self.label}:start")
        self.calls.append((branch, instruction))
        # Yield to the event loop: a concurrent gather would start the next provider here.
        for _ in range(3):
            await asyncio.sleep(0)
        self.log.append(f"{self.label}:end")
        return self.result


class Raising(Static):
    """Raises the given exception from ``provide`` after logging its call."""

    def __init__(self, exc: BaseException, log: list[str], label: str) -> None:
        super().__init__(None, log, label)
        self.exc = exc

    async def provide(self, branch: Any, instruction: Any) -> Any:
        await super().provide(branch, instruction)
        raise self.exc


@pytest.fixture
def log() -> list[str]:
    """The shared call log: ``"<label>:start"`` and ``"<label>:end"`` per provider call."""
    return []


@pytest.fixture
def static(log: list[str]) -> Callable[..., Static]:
    """``static(result, label=...)``: a provider returning ``result``, logging to ``log``."""

    def make(result: Any, label: str | None = None) -> Static:
        return Static(result, log, label or str(result))

    return make


@pytest.fixture
def raising(log: list[str]) -> Callable[..., Raising]:
    """``raising(exc, label=...)``: a provider whose ``provide`` raises ``exc``."""

    def make(exc: BaseException, label: str = "raising") -> Raising:
        return Raising(exc, log, label)

    return make


@pytest.fixture
def branch() -> composer.Branch:
    """A branch with a system text, so a turn runs the providers (ADR D4)."""
    return composer.Branch("SYS", name="conformance")


@pytest.fixture
def instruction() -> composer.Instruction:
    return composer.Instruction("what is up?")


@pytest.fixture(params=["sequential", "concurrent"], autouse=True)
def gather_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every conformance test runs twice: as the ADR's registry, and with concurrent gather.

    Concurrent gather must admit and report exactly what the sequential pass does; only the
    tests of the sequential call order itself (``sequential_only``) are left out of that run.
    """
    mode: str = request.param
    if mode == "concurrent":
        marker = request.node.get_closest_marker("sequential_only")
        if marker is not None:
            pytest.skip(f"sequential call order: {marker.args[0]}")
        original = composer.ContextProviderRegistry.__init__

        def concurrent_init(
            self: composer.ContextProviderRegistry, budget: int = 2000, **options: Any
        ) -> None:
            original(self, budget, **{"gather": "concurrent", **options})

        monkeypatch.setattr(composer.ContextProviderRegistry, "__init__", concurrent_init)
    return mode
