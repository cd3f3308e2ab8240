"""SIGTERM for the commands that run turns and exit (``preview``, ``test``).

Python's default for SIGTERM ends the process where it stands, so nothing a provider started
is stopped: an MCP server's child process was left running. Under ``run`` SIGTERM cancels the
command's coroutine as Ctrl-C does, its ``finally`` blocks close the providers (stopping their
servers), and ``Terminated`` reaches ``main``, which exits 143 with one line.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["Terminated", "run"]

_T = TypeVar("_T")


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived, and was handled as Ctrl-C is: the command stopped what it had started
    and gave up. An interrupt, not an error, so no ``except Exception`` on the way stops it."""


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)``, with SIGTERM cancelling ``main`` (then raising ``Terminated``)."""
    import asyncio  # here: ``main`` imports this module, and ``--help`` must stay light

    return asyncio.run(_terminable(main))


async def _terminable(main: Coroutine[Any, Any, _T]) -> _T:
    import asyncio

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    signalled = False

    def on_sigterm() -> None:
        nonlocal signalled
        if not signalled and task is not None:  # a second SIGTERM must not cut the cleanup
            signalled = True
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
        installed = True
    except (ValueError, RuntimeError, NotImplementedError):  # not the main thread; Windows
        installed = False
    try:
        result = await main
    except asyncio.CancelledError:
        if signalled:
            raise Terminated from None
        raise
    finally:
        if installed:
            with contextlib.suppress(ValueError, RuntimeError):
                loop.remove_signal_handler(signal.SIGTERM)
    if signalled:
        raise Terminated
    return result
