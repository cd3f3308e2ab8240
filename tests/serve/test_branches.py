"""Branches kept by a server: one registry per id, a bounded LRU, an idle TTL, never a branch
in use dropped; each request's branch state is its own."""

from __future__ import annotations

import asyncio

import pytest

from composer import load_manifest
from composer.branches import BranchStore
from composer.manifest import Manifest
from composer.serve.models import BranchIn, InstructionIn, TurnRequest
from composer.serve.service import ContextService
from serve.conftest import CONFIGS


class Clock:
    """Time that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def service(max_branches: int = 1000, idle_ttl_s: float = 3600.0) -> ContextService:
    manifest: Manifest = load_manifest(CONFIGS, env="dev")
    return ContextService(manifest, max_branches=max_branches, idle_ttl_s=idle_ttl_s)


def turn(branch: str, text: str = "restart the api") -> TurnRequest:
    return TurnRequest(
        branch=BranchIn(id=branch), system="S\n", instruction=InstructionIn(text=text)
    )


async def test_each_branch_id_has_its_own_registry_kept_between_turns() -> None:
    served = service()
    try:
        await served.turn(turn("a"))
        first = served.branches.peek("local/a")
        await served.turn(turn("a"))
        await served.turn(turn("b"))
        assert served.branches.peek("local/a") is first
        a, b = served.branches.peek("local/a"), served.branches.peek("local/b")
        assert a is not None
        assert b is not None
        assert a.registry is not b.registry
        assert a.branch.messages == []  # no history is kept
    finally:
        await served.aclose()


async def test_leaving_async_with_closes_every_branch_and_the_manifest() -> None:
    """The service takes the manifest it is given: leaving it, on an error too, closes each
    branch's registry and then the manifest's shared state (the dev corpus index among it)."""
    manifest = load_manifest(CONFIGS, env="dev")
    served = ContextService(manifest)

    async def serve_then_fail() -> None:
        async with served:
            await served.turn(turn("a"))
            await served.turn(turn("b"))
            assert len(served.branches) == 2
            assert manifest.shared  # the corpus index, the memory store
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        await serve_then_fail()
    assert len(served.branches) == 0
    assert manifest.shared == {}


async def test_the_least_recently_used_branch_goes_over_the_bound() -> None:
    served = service(max_branches=2)
    try:
        for branch in ("a", "b", "a", "c"):
            await served.turn(turn(branch))
        assert (len(served.branches), "local/a" in served.branches) == (2, True)
        assert "local/b" not in served.branches
        assert "local/c" in served.branches
    finally:
        await served.aclose()


async def test_an_idle_branch_goes_after_its_ttl_and_comes_back_fresh() -> None:
    clock = Clock()
    manifest = load_manifest(CONFIGS, env="dev")
    served = ContextService(manifest, idle_ttl_s=60)
    served.branches = BranchStore(served._new_branch, idle_ttl_s=60, clock=clock)
    try:
        await served.turn(turn("old"))
        old = served.branches.peek("local/old")
        clock.now = 30
        await served.turn(turn("new"))
        assert "local/old" in served.branches
        clock.now = 61
        await served.turn(turn("new"))
        assert "local/old" not in served.branches
        await served.turn(turn("old"))
        assert served.branches.peek("local/old") is not old
    finally:
        await served.aclose()


async def test_idle_branches_go_without_any_further_turn() -> None:
    """The periodic sweep drops an idle branch even when no request comes to trigger it."""
    clock = Clock()
    served = service()
    served.branches = BranchStore(served._new_branch, idle_ttl_s=60, clock=clock)
    sweeping = asyncio.ensure_future(served.branches.sweep_every(0.01))
    try:
        await served.turn(turn("quiet"))
        clock.now = 61
        for _ in range(500):  # a bound that only catches a sweep that never runs
            if "local/quiet" not in served.branches:
                break
            await asyncio.sleep(0.01)
        assert "local/quiet" not in served.branches
    finally:
        sweeping.cancel()
        await served.aclose()


async def test_a_branch_in_use_is_never_dropped_and_turns_on_it_take_turns() -> None:
    served = service(max_branches=1)
    order: list[str] = []
    try:
        async with served.branches.use("local/busy") as entry:
            await served.turn(turn("other"))  # over the bound while "busy" is held
            assert "local/busy" in served.branches
            waiting = asyncio.ensure_future(served.turn(turn("busy", "second")))
            await asyncio.sleep(0.05)
            order.append("first done")
            assert not waiting.done()  # the second turn on this branch waits for the first
        await waiting
        order.append("second done")
        assert entry.last_guidance is not None
        assert order == ["first done", "second done"]
    finally:
        await served.aclose()


def test_the_bound_must_be_positive() -> None:
    served = service()
    with pytest.raises(ValueError, match="max_branches"):
        BranchStore(served._new_branch, max_branches=0)
