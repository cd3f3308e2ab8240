"""Listening: the socket, uvicorn, connection bounds, and a graceful stop.

The socket is bound here, before uvicorn starts, so that ``--port 0`` can say which port it
got. Connections are bounded (``composer.serve.connections``: a request deadline, per-client
and total caps below the descriptor limit, raised to its hard limit first). uvicorn stops on
SIGINT or SIGTERM (after ``drain_s``, ``--drain-delay``, in which readiness is false and
new connections are still served while a load balancer lets go): it stops accepting, lets
requests in flight finish (for up to ``graceful_s``), then runs the app's shutdown, which closes every provider; the command then
exits 0. Client addresses come from the socket unless ``forwarded_allow_ips`` names the
reverse proxies whose ``X-Forwarded-For`` is trusted.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType

import uvicorn
from starlette.types import ASGIApp

from composer.errors import ServeError
from composer.serve.connections import ConnectionLimits, guarded_protocol

__all__ = ["Listening", "bind", "serve"]


@dataclass(frozen=True)
class Listening:
    """Where a server listens, once it does: its URL, and (``str()``) the line ``composer
    serve`` prints, which says how it is guarded and where MCP and the console are."""

    url: str
    text: str

    def __str__(self) -> str:
        return self.text


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: any free port)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ServeError(f"cannot resolve {host!r}: {e.strerror}") from e
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
    sock.set_inheritable(True)
    return sock


def serve(
    app: ASGIApp,
    sock: socket.socket,
    *,
    graceful_s: int = 5,
    limits: ConnectionLimits | None = None,
    forwarded_allow_ips: str | None = None,
    started: Callable[[str], None] | None = None,
    also: Sequence[socket.socket] = (),
    drain_s: float = 0.0,
    draining: Callable[[], None] | None = None,
) -> None:
    """Run ``app`` on ``sock`` (and the sockets ``also``, under the same bounds) until a
    signal stops it; ``started`` hears the URL of ``sock``. With ``drain_s``, the first
    SIGTERM or SIGINT calls ``draining`` (readiness turns false) and the server goes on
    accepting for ``drain_s`` seconds before its graceful stop; a second signal stops it now."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(
        app,
        http=guarded_protocol(limits or ConnectionLimits()),
        lifespan="on",
        access_log=False,  # composer's own (composer.serve.access) names the principal
        server_header=False,
        proxy_headers=forwarded_allow_ips is not None,
        forwarded_allow_ips=forwarded_allow_ips,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=graceful_s,
        log_config=None,  # the command's own handler masks secrets in every record
    )
    server = _Draining(config, drain_s, draining)
    if started is not None:
        started(f"http://{shown}:{port}")
    # uvicorn raises the signal again once it has stopped gracefully, for the handler that was
    # there before; this one makes that a no-op, so a graceful stop exits 0 (SIGINT's own
    # handler raises KeyboardInterrupt, which the command treats as a stop too).
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _stopped)
    try:
        server.run(sockets=[sock, *also])
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class _Draining(uvicorn.Server):
    """uvicorn's server, whose first stop signal starts a drain of ``drain_s`` seconds."""

    def __init__(
        self, config: uvicorn.Config, drain_s: float, draining: Callable[[], None] | None
    ) -> None:
        super().__init__(config)
        self._drain_s = drain_s
        self._draining = draining
        self._drain_ends: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._drain_s <= 0 or self._drain_ends is not None or self.should_exit:
            super().handle_exit(sig, frame)
            return
        self._captured_signals.append(sig)  # raised again once stopped, as uvicorn does
        self._drain_ends = time.monotonic() + self._drain_s  # main_loop ticks each 0.1 s
        if self._draining is not None:
            self._draining()

    async def on_tick(self, counter: int) -> bool:
        if self._drain_ends is not None and time.monotonic() >= self._drain_ends:
            self.should_exit = True
        return await super().on_tick(counter)


def _stopped(signum: int, frame: FrameType | None) -> None:
    """SIGTERM after uvicorn's graceful stop: the stop is done already."""
