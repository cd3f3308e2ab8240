"""Code that the memory tests run in other processes (started with ``spawn``, so each is a
fresh interpreter importing this module, as a second agent replica would be)."""

from __future__ import annotations

import asyncio
from typing import Any

from builtin_providers.memory import MemoryConfig
from builtin_providers.stores import MemoryItem
from composer.build import build_registry
from composer.manifest import Manifest
from composer.turn import Branch

__all__ = ["write_back", "write_back_capped", "write_back_forever"]


def write_back(source: Any, worker: int, count: int) -> None:
    """``count`` writebacks of one distinct response each, every one retried once."""
    asyncio.run(_write_back(source, worker, count, retry=True))


def write_back_forever(source: Any, worker: int) -> None:
    """Write back until killed."""
    asyncio.run(_write_back(source, worker, None, retry=False))


def write_back_capped(source: Any, worker: int, count: int, size: int, cap: int) -> None:
    """``count`` writebacks of ``size`` distinct responses each, under ``max_items: cap``;
    exits non-zero (the error raised) unless every batch stored all of its responses at once
    (not through the provider's item-by-item fallback, which would hide a failed batch)."""
    asyncio.run(_write_back_capped(source, worker, count, size, cap))


async def _write_back(source: Any, worker: int, count: int | None, *, retry: bool) -> None:
    config = MemoryConfig(name="mem", source=source, writeback={"tags": ["load"]})
    manifest = Manifest(version=1, providers=[config])
    registry = build_registry(manifest)
    provider = registry.managed[0]
    branch = Branch("system\n")
    n = 0
    try:
        while count is None or n < count:
            responses = [{"worker": worker, "n": n}]
            await provider.writeback(branch, responses)  # type: ignore[attr-defined]
            if retry:  # the same turn written back again stores nothing more
                await provider.writeback(branch, responses)  # type: ignore[attr-defined]
            n += 1
    finally:
        await manifest.aclose()


async def _write_back_capped(source: Any, worker: int, count: int, size: int, cap: int) -> None:
    config = MemoryConfig(name="mem", source=source, writeback={"max_items": cap})
    manifest = Manifest(version=1, providers=[config])
    provider = build_registry(manifest).managed[0].provider
    store = provider.store  # type: ignore[attr-defined]
    try:
        for n in range(count):
            items = [
                MemoryItem({"worker": worker, "n": n, "k": k}, [], {}, f"{worker}-{n}-{k}")
                for k in range(size)
            ]
            stored = await store.add(items, written_back=True, cap=cap)
            if stored != size:
                raise RuntimeError(f"writeback {n} stored {stored} of {size}")
    finally:
        await manifest.aclose()
