"""``composer serve --workers N``: N server processes accepting on one listening socket.

The socket is bound once, then the process forks N workers; each builds its own app (its
branches, its providers' connections, its event loop) and serves the shared socket, and the
kernel hands each connection to one of them. Forking happens before any event loop or thread
exists, so nothing a worker holds is shared but the socket and the loaded manifest (copied
on write). The workers share no memory: a branch's turns may land on any of them, which is
why ``--workers`` above 1 needs a shared ``--state`` (as replicas behind a load balancer do).

The parent only supervises: SIGTERM or SIGINT is passed on to every worker, which stops
gracefully (SIGHUP too, which makes each reload its manifest: ``composer.serve.reloading``); a worker that dies on its own stops the others and the command fails (the
supervisor above, a container runtime, starts it again), rather than serving on with fewer
workers than asked.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from types import FrameType

__all__ = ["MAX_WORKERS", "run_workers"]

MAX_WORKERS = 64
"""More processes than this on one machine is a mistake, not a deployment."""


def run_workers(
    count: int, work: Callable[[], None], *, ended: Callable[[int], None] | None = None
) -> int:
    """Fork ``count`` processes that each run ``work`` (serve the bound socket); wait for them.
    ``ended`` hears the id of each worker that ended (its metrics are marked dead).

    0 when every worker stopped cleanly after a signal, else 1.
    """
    children: set[int] = set()
    stopping = False

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            _signal(pid, signal.SIGTERM)

    def hang_up(signum: int, frame: FrameType | None) -> None:
        for pid in list(children):
            _signal(pid, signal.SIGHUP)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, hang_up)
    failed = False
    try:
        for _ in range(count):
            pid = os.fork()
            if pid == 0:  # the worker: serve, then leave without running the parent's code
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                # until its app reloads on SIGHUP, a hang-up must not end the worker
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                code = 0
                try:
                    work()
                except KeyboardInterrupt:
                    code = 0
                except BaseException:
                    code = 1
                os._exit(code)
            children.add(pid)
        while children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries os.wait itself
                continue
            children.discard(pid)
            if ended is not None:
                ended(pid)
            if not stopping:  # one ended by itself: stop the rest, the command fails
                failed = stopping = True
                for other in list(children):
                    _signal(other, signal.SIGTERM)
            elif os.waitstatus_to_exitcode(status) != 0:
                failed = True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 1 if failed else 0


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
