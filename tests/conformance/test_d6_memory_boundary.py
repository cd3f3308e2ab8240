"""ADR-0008 D6: provider selection is independent of memory storage."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

import composer.registry
from composer import Branch, ContextProviderRegistry, Instruction, ProviderReport, prepare_turn

if TYPE_CHECKING:
    from conformance.conftest import Static


def _imports(module: ModuleType) -> list[str]:
    """Every module and name the source of ``module`` imports, at any depth."""
    tree = ast.parse(inspect.getsource(module))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append(node.module or "")
            found.extend(alias.name for alias in node.names)
    return found


def test_registry_module_imports_no_memory_module() -> None:
    """D6: the registry has no import of a memory store, at module level or inside functions."""
    imported = _imports(composer.registry)
    assert "composer.tokens" in imported  # the walk sees the function-level import
    assert [name for name in imported if "memory" in name.lower()] == []


def test_registry_source_never_reads_branch_memory() -> None:
    """D6: the registry does not require or read branch.memory."""
    tree = ast.parse(inspect.getsource(composer.registry))
    attrs = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert "memory" not in attrs


class Guarded(Branch):
    """A branch whose memory must not be touched."""

    @property
    def memory(self) -> object:
        raise AssertionError("branch.memory was read")

    @memory.setter
    def memory(self, value: object) -> None:
        pass


async def test_gather_and_turn_never_touch_branch_memory(static: Callable[..., Static]) -> None:
    """D6: a branch with providers need not have a memory store; nothing reads it."""
    branch = Guarded("SYS")
    branch.providers.register(static("from elsewhere"), name="search")
    turn = await prepare_turn(branch, "q")
    assert turn.report is not None
    assert turn.report.blocks == ["from elsewhere"]
    # any object will do: an empty registry reads nothing of the branch
    bare = await ContextProviderRegistry().gather(object(), object())  # type: ignore[arg-type]
    assert bare == ProviderReport()


async def test_a_provider_may_read_branch_memory_and_the_budget_still_applies() -> None:
    """D6: a provider may use branch.memory; priority and budget apply whatever the source."""

    class FromMemory:
        async def provide(self, branch: Branch, instruction: Instruction) -> str:
            return str(branch.memory["note"])

    class Computed:
        async def provide(self, branch: Branch, instruction: Instruction) -> str:
            return instruction.text

    branch = Branch("SYS", memory={"note": "alpha beta"})
    branch.providers.budget = 2
    branch.providers.register(FromMemory(), name="memory", priority=1)
    branch.providers.register(Computed(), name="computed", priority=2)
    turn = await prepare_turn(branch, "gamma delta")
    assert turn.report == ProviderReport(
        blocks=["gamma delta"],
        fired=[{"provider_name": "computed", "tokens": 2}],
        skipped=["memory"],
    )
