"""Connection bounds: an idle or dribbling socket cannot hold the server.

uvicorn closes a keep-alive connection that stays silent, but any byte resets that timer, and
a connection that sends nothing after connecting, sends its headers a line at a time, or
declares a body and stops, is kept for ever; enough of them exhaust the process's file
descriptors and the server stops answering, probes included. ``guarded_protocol`` makes
uvicorn's own HTTP/1.1 protocol (h11) keep three bounds:

* a **request deadline**: a whole request (head and body) must arrive within ``request_s``
  of the connection opening or of the previous response; otherwise the socket is closed;
* a **per-client cap**: at most ``per_client`` open connections from one address (an IPv6
  /64 counts as one);
* a **total cap**: at most ``total`` open connections, below the descriptor limit, so the
  server always has descriptors for its own files, logs and stores.

A connection over a cap is answered ``503`` at once and closed. The subclass touches h11's
connection state and uvicorn's ``on_response_complete`` (uvicorn is pinned below 1.0);
``tests/reliability/test_serve_connections.py`` fails loudly if those move.
"""

from __future__ import annotations

import asyncio
import json
import resource
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from composer.serve.limits import address_group

__all__ = ["ConnectionLimits", "default_total", "guarded_protocol", "raise_descriptor_limit"]

_HEADROOM = 512
"""Descriptors kept free of client connections: files, logs, stores, the MCP children."""


@dataclass(frozen=True)
class ConnectionLimits:
    request_s: float = 10.0
    per_client: int = 1024
    total: int = 4096


def raise_descriptor_limit() -> int:
    """Raise the soft descriptor limit to the hard one; the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def default_total(soft_limit: int) -> int:
    """The total connection cap for a descriptor limit: all but the headroom (at least 64)."""
    return max(64, soft_limit - _HEADROOM)


def _address(client: Any) -> str:
    """The address a connection counts under for the per-client cap (loopback addresses
    each their own: the total cap bounds a client that rotates them)."""
    return address_group(str(client[0]) if client else "", loopback_as_one=False)


_REFUSAL = json.dumps(
    {"error": {"type": "unavailable", "message": "too many connections", "details": None}}
).encode()
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"content-length: " + str(len(_REFUSAL)).encode() + b"\r\nconnection: close\r\n"
    b"retry-after: 1\r\n\r\n" + _REFUSAL
)
_DONE = (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR)


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with ``limits``; the counts belong to the class made here."""
    by_address: dict[str, int] = {}
    open_count = [0]

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _counted: str | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            address = _address(self.client)
            if open_count[0] >= limits.total or by_address.get(address, 0) >= limits.per_client:
                transport.write(_BUSY)
                transport.close()
                return
            self._counted = address
            by_address[address] = by_address.get(address, 0) + 1
            open_count[0] += 1
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            address, self._counted = self._counted, None
            if address is not None:
                open_count[0] -= 1
                left = by_address.get(address, 1) - 1
                if left > 0:
                    by_address[address] = left
                else:
                    by_address.pop(address, None)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._deadline is not None and self.conn.their_state in _DONE:
                self._disarm()  # the whole request is in: the app's own time is not bounded here

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on this connection has its own deadline

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(limits.request_s, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if self.conn.their_state not in _DONE and not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol
