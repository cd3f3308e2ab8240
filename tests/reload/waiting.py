"""What the reload tests share: waiting for a reload, and one turn's blocks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import composer

__all__ = ["blocks", "eventually"]


async def eventually(test: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait until ``test()`` holds; fail after ``timeout`` (a bound that only catches a hang)."""
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.01)


async def blocks(branch: composer.Branch) -> list[str]:
    """The blocks of one turn of ``branch``."""
    turn = await composer.prepare_turn(branch, "x")
    assert turn.report is not None
    return turn.report.blocks
