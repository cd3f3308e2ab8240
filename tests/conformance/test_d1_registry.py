"""ADR-0008 D1: each Branch lazily owns one ordered registry; registration validates nothing."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

import composer
from composer import Branch, ContextProvider, ContextProviderRegistry, ProviderReport

if TYPE_CHECKING:
    from conformance.conftest import Static


class Named:
    """A provider carrying a ``name`` attribute."""

    def __init__(self, name: object) -> None:
        self.name = name

    async def provide(self, branch: object, instruction: object) -> str:
        return "named"


class Nameless:
    async def provide(self, branch: object, instruction: object) -> str:
        return "nameless"


class Spy:
    """Records every attribute looked up on it, ``__class__`` included (as isinstance does)."""

    seen: list[str]

    def __init__(self) -> None:
        object.__setattr__(self, "seen", [])

    def __getattribute__(self, attr: str) -> object:
        if attr != "seen":
            object.__getattribute__(self, "seen").append(attr)
        return object.__getattribute__(self, attr)

    async def provide(self, branch: object, instruction: object) -> str:
        return "spy"


class SyncProvide:
    def provide(self, branch: object, instruction: object) -> str:
        return "not awaitable"


def test_new_branch_has_no_registry_no_slot_no_report() -> None:
    """D1: a newly constructed branch has no registry, no injection slot and no report."""
    branch = Branch("SYS")
    assert branch._context_providers is None
    assert branch._context_injection_slot is None
    assert branch.last_context_report is None


def test_providers_is_created_once_with_budget_2000() -> None:
    """D1: the first access constructs ContextProviderRegistry(budget=2000); later ones reuse it."""
    branch = Branch("SYS")
    registry = branch.providers
    assert type(registry) is ContextProviderRegistry
    assert registry.budget == 2000
    assert len(registry) == 0
    assert branch._context_providers is registry
    assert branch.providers is registry
    assert branch.providers is registry


def test_registry_default_budget_is_2000() -> None:
    """D3/D1: the default total budget is 2000 tokens."""
    assert ContextProviderRegistry().budget == 2000


async def test_turn_path_never_creates_a_registry(
    monkeypatch: pytest.MonkeyPatch, instruction: composer.Instruction
) -> None:
    """D1: the turn path reads branch._context_providers and never touches branch.providers."""

    def forbidden(self: Branch) -> ContextProviderRegistry:
        raise AssertionError("the turn path accessed Branch.providers")

    monkeypatch.setattr(Branch, "providers", property(forbidden))
    branch = Branch("SYS")
    turn = await composer.prepare_turn(branch, instruction)
    assert branch._context_providers is None
    assert turn.report is None
    assert turn.guidance == "SYS"

    systemless = Branch()
    await composer.prepare_turn(systemless, "hi")
    assert systemless._context_providers is None


def test_register_appends_in_order_and_len_bool_names_follow() -> None:
    """D1: register() appends one entry; bool/len/names reflect the entries in order."""
    registry = ContextProviderRegistry()
    assert not registry
    assert len(registry) == 0
    assert registry.names == []
    registry.register(Nameless(), name="b")
    registry.register(Nameless(), name="a")
    registry.register(Nameless(), name="c")
    assert registry
    assert len(registry) == 3
    assert registry.names == ["b", "a", "c"]


def test_names_is_a_new_list_each_time() -> None:
    """D1: names returns a new list; mutating it leaves the registry alone."""
    registry = ContextProviderRegistry()
    registry.register(Nameless(), name="a")
    names = registry.names
    names.append("intruder")
    names.clear()
    assert registry.names == ["a"]
    assert registry.names is not registry.names


async def test_no_duplicate_check_and_no_replacement_by_name(
    static: Callable[..., Static], branch: Branch, instruction: composer.Instruction
) -> None:
    """D1: the same provider and the same name register twice; both entries run."""
    registry = ContextProviderRegistry()
    same = static("dup")
    registry.register(same, name="x")
    registry.register(same, name="x")
    other = static("other")
    registry.register(other, name="x")
    assert registry.names == ["x", "x", "x"]
    report = await registry.gather(branch, instruction)
    assert len(same.calls) == 2
    assert len(other.calls) == 1
    assert report.blocks == ["dup", "dup", "other"]
    n_dup, n_other = composer.count_tokens("dup"), composer.count_tokens("other")
    assert report.fired == [
        {"provider_name": "x", "tokens": n_dup},
        {"provider_name": "x", "tokens": n_dup},
        {"provider_name": "x", "tokens": n_other},
    ]


def test_no_unregister_or_replace_method() -> None:
    """D1: there is no unregister method and no replacement by name."""
    public = {attr for attr in dir(ContextProviderRegistry) if not attr.startswith("_")}
    assert not public & {"unregister", "remove", "replace", "discard", "pop", "clear"}


@pytest.mark.parametrize(
    ("provider", "explicit", "expected"),
    [
        pytest.param(Named("attr"), "explicit", "explicit", id="explicit-wins"),
        pytest.param(Named("attr"), None, "attr", id="provider-name"),
        pytest.param(Named("attr"), "", "attr", id="empty-explicit-falls-through"),
        pytest.param(Named(""), None, "Named", id="empty-attr-falls-to-class"),
        pytest.param(Named(None), None, "Named", id="none-attr-falls-to-class"),
        pytest.param(Named(0), None, "Named", id="falsy-attr-falls-to-class"),
        pytest.param(Named(""), "", "Named", id="both-empty"),
        pytest.param(Nameless(), None, "Nameless", id="class-name"),
    ],
)
def test_name_resolution(provider: object, explicit: str | None, expected: str) -> None:
    """D1: explicit name, then truthy provider.name, then the provider class name."""
    registry = ContextProviderRegistry()
    registry.register(provider, name=explicit)
    assert registry.names == [expected]


def test_register_does_not_inspect_the_provider() -> None:
    """D1: registration does not call isinstance() or look at provide; only name is read."""
    spy = Spy()
    ContextProviderRegistry().register(spy, name="given")
    assert spy.seen == []
    spy = Spy()
    ContextProviderRegistry().register(spy)
    assert spy.seen == ["name"]


def test_register_accepts_anything() -> None:
    """D1: registration validates nothing: no provide, a sync provide, odd limits all register."""
    registry = ContextProviderRegistry(budget=-5)
    registry.register(object())
    registry.register(SyncProvide(), max_tokens=-1, priority=-7)
    registry.register(42, name="int")
    assert registry.names == ["object", "SyncProvide", "int"]
    assert registry.budget == -5


async def test_invalid_providers_fail_contained_at_gather(
    static: Callable[..., Static],
    branch: Branch,
    instruction: composer.Instruction,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """D1: a missing or non-async provide raises during the awaited call, contained by gather."""
    registry = ContextProviderRegistry()
    registry.register(object())
    registry.register(SyncProvide())
    registry.register(static("after"), name="ok")
    with caplog.at_level(logging.WARNING, logger="composer.registry"):
        report = await registry.gather(branch, instruction)
    assert report == ProviderReport(
        blocks=["after"],
        fired=[{"provider_name": "ok", "tokens": composer.count_tokens("after")}],
        skipped=[],
        failed=["object", "SyncProvide"],
    )
    assert [type(r.exc_info[1]) for r in caplog.records if r.exc_info] == [
        AttributeError,
        TypeError,
    ]


def test_context_provider_is_structural_and_runtime_checkable() -> None:
    """D1: ContextProvider is a runtime-checkable structural Protocol."""
    assert isinstance(Nameless(), ContextProvider)
    assert isinstance(Named("n"), ContextProvider)
    assert not isinstance(object(), ContextProvider)
