"""A TCP relay on 127.0.0.1 in front of a real store, whose connections a test can cut.

What a store going away looks like to a server, without stopping the machine's shared
PostgreSQL or Redis: ``cut()`` closes every relayed connection and, until ``restore()``, closes
each new one as soon as it is accepted (the store is down); ``restore()`` relays again. ``exchanges`` counts the round trips: each time a client sends
after its connection's last bytes went the other way (or first), one more.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

__all__ = ["Relay", "relaying"]

_CHUNK = 65536


class Relay:
    """Relays 127.0.0.1:``port`` to ``target`` (host, port), one thread pair a connection."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._down = False
        self._stopped = False
        self.exchanges = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def url(self, scheme_and_rest: str) -> str:
        """``scheme_and_rest`` with ``{port}`` filled: ``redis://127.0.0.1:{port}/0``."""
        return scheme_and_rest.format(port=self.port)

    def cut(self) -> None:
        """The store is down: every connection closed, new ones closed on arrival."""
        with self._lock:
            self._down = True
            sockets, self._open = self._open, set()
        for sock in sockets:
            _close(sock)

    def restore(self) -> None:
        with self._lock:
            self._down = False

    def stop(self) -> None:
        self._stopped = True
        self.cut()
        _close(self._listener)
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                down = self._down
            if down:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            turn = _Turn(self)
            for source, sink, asks in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=_pump, args=(source, sink, turn, asks), daemon=True).start()


class _Turn:
    """Whose turn it is on one relayed connection: the client's (asking) or the store's."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.asking = False

    def sent(self, asks: bool) -> None:
        with self.relay._lock:
            if asks and not self.asking:
                self.relay.exchanges += 1
            self.asking = asks


def _pump(source: socket.socket, sink: socket.socket, turn: _Turn, asks: bool) -> None:
    try:
        while chunk := source.recv(_CHUNK):
            turn.sent(asks)
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


@contextlib.contextmanager
def relaying(target: tuple[str, int]) -> Iterator[Relay]:
    """A ``Relay`` to ``target`` for the block, stopped after it."""
    relay = Relay(target)
    try:
        yield relay
    finally:
        relay.stop()
