"""A fleet on one machine for the tests: ``composer serve`` replicas as real processes on
127.0.0.1, behind a tiny round-robin proxy that says which replica answered.

The proxy is what a load balancer does, no more: each request goes to the next replica in
turn; a replica that refuses the connection (stopped, restarting) is skipped, since the
request never reached it; a replica that drops a request it was given answers ``502``
(that request was in flight). Every answer carries ``x-replica``, the replica's slot. With
readiness probes, a replica whose ``/readyz`` fails gets no new request, as a Kubernetes
Service's endpoints drop it.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field

import httpx

from serve.conftest import Server, start_serve

__all__ = ["Fleet", "RoundRobin", "proxy_for", "start_replicas"]

_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host"})
_TIMEOUT_S = 60.0  # a bound that only catches a replica that hangs
_PROBE_TIMEOUT_S = 2.0  # a readiness probe's, as a Deployment's timeoutSeconds


@dataclass
class RoundRobin:
    """The replicas' base URLs by slot (a slot's URL changes when it restarts)."""

    backends: list[str]
    served: list[tuple[str, int, int]] = field(default_factory=list)
    """(method path, slot, status) of every request, in order."""
    ready: list[bool] | None = None
    """With probes (``proxy_for``'s ``probe_s``): whether each slot's ``/readyz`` said ready
    at its last probe; an unready slot gets no request while another is ready, as a
    Kubernetes Service drops a pod whose readiness probe fails."""
    _next: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def pick(self) -> list[int]:
        """The slots to try for one request: the next one first (a ready one, with probes)."""
        with self._lock:
            first = self._next % len(self.backends)
            self._next += 1
        order = [(first + i) % len(self.backends) for i in range(len(self.backends))]
        if self.ready is None:
            return order
        return [slot for slot in order if self.ready[slot]] or order

    def probe(self, stop: threading.Event, every_s: float) -> None:
        """Ask each slot's ``/readyz`` every ``every_s`` seconds until ``stop``."""
        assert self.ready is not None
        while not stop.wait(every_s):
            for slot, url in enumerate(list(self.backends)):
                try:
                    ok = httpx.get(f"{url}/readyz", timeout=_PROBE_TIMEOUT_S).status_code == 200
                except httpx.TransportError:
                    ok = False
                if self.backends[slot] == url:  # not replaced meanwhile
                    self.ready[slot] = ok

    def forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, int, list[tuple[str, str]], bytes]:
        for slot in self.pick():
            try:
                response = httpx.request(
                    method,
                    self.backends[slot] + path,
                    headers=headers,
                    content=body,
                    timeout=_TIMEOUT_S,
                )
            except httpx.ConnectError:
                continue  # never reached it: the next replica
            except httpx.TransportError:
                self.served.append((f"{method} {path}", slot, 502))
                return slot, 502, [], b'{"error": {"type": "bad_gateway", "message": "lost"}}'
            self.served.append((f"{method} {path}", slot, response.status_code))
            kept = [(k, v) for k, v in response.headers.items() if k.lower() not in _HOP]
            return slot, response.status_code, kept, response.content
        return -1, 503, [], b'{"error": {"type": "no_replica", "message": "none answered"}}'


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _ProxyServer

    def _relay(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        slot, status, kept, content = self.server.pool.forward(
            self.command, self.path, headers, body
        )
        self.send_response(status)
        for key, value in kept:
            self.send_header(key, value)
        self.send_header("content-length", str(len(content)))
        self.send_header("x-replica", str(slot))
        self.end_headers()
        self.wfile.write(content)

    do_GET = do_POST = do_DELETE = _relay

    def log_message(self, format: str, *args: object) -> None:
        return None


class _ProxyServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pool: RoundRobin) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.pool = pool


@dataclass
class Fleet:
    """The replicas, the proxy in front of them, and its URL."""

    replicas: list[Server]
    pool: RoundRobin
    url: str
    proxy: _ProxyServer

    def replace(self, slot: int, server: Server) -> None:
        """A restarted replica takes its slot (the proxy sends it requests from now on)."""
        self.replicas[slot] = server
        self.pool.backends[slot] = server.url
        if self.pool.ready is not None:
            self.pool.ready[slot] = True  # started once ready (``start_serve``)


def start_replicas(args: Sequence[str], count: int, env: dict[str, str]) -> list[Server]:
    """``count`` replicas of ``composer serve ARGS``, started at once, each once it is ready."""
    started: list[Server | BaseException] = [RuntimeError("not started")] * count

    def one(slot: int) -> None:
        try:
            started[slot] = start_serve(args, env=env)
        except BaseException as e:
            started[slot] = e

    threads = [threading.Thread(target=one, args=(slot,)) for slot in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    servers = [s for s in started if isinstance(s, Server)]
    failed = [s for s in started if not isinstance(s, Server)]
    if failed:
        for server in servers:
            server.process.kill()
        raise AssertionError(f"a replica did not start: {failed[0]!r}")
    return servers


def proxy_for(replicas: list[Server], probe_s: float | None = None) -> Generator[Fleet, None, None]:
    """A round-robin proxy on 127.0.0.1 in front of ``replicas``, until the caller is done;
    with ``probe_s``, one that probes their readiness that often and skips the unready."""
    pool = RoundRobin([server.url for server in replicas])
    proxy = _ProxyServer(pool)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    stop = threading.Event()
    prober = None
    if probe_s is not None:
        pool.ready = [True] * len(replicas)
        prober = threading.Thread(target=pool.probe, args=(stop, probe_s), daemon=True)
        prober.start()
    try:
        yield Fleet(replicas, pool, f"http://127.0.0.1:{proxy.server_address[1]}", proxy)
    finally:
        stop.set()
        if prober is not None:
            prober.join(timeout=_TIMEOUT_S)
        proxy.shutdown()
        proxy.server_close()
        thread.join(timeout=_TIMEOUT_S)
