"""A real HTTP server on 127.0.0.1 that answers, records what arrived, and misbehaves on demand."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import struct
import threading
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from localserver import serving

from builtin_providers.http import HttpConfig, HttpProvider

GZIP_BOMB_BYTES = 64 << 20


@pytest.fixture(scope="session")
def gzip_bomb() -> bytes:
    """64 MiB of zeros in about 64 KiB of gzip."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"\0" * (1 << 20)
    parts = [compressor.compress(chunk) for _ in range(GZIP_BOMB_BYTES >> 20)]
    return b"".join([*parts, compressor.flush()])


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


@dataclass
class LocalServer:
    host: str
    port: int
    requests: list[Seen] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def paths(self) -> list[str]:
        return [seen.path for seen in self.requests]


def make_handler(server_state: LocalServer, bomb: bytes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def send(
            self, status: int, body: bytes, content_type: str = "application/json", **extra: str
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in extra.items():
                self.send_header(key.replace("_", "-"), value)
            self.end_headers()
            self.wfile.write(body)

        def send_json(self, data: Any, status: int = 200) -> None:
            self.send(status, json.dumps(data).encode())

        def drip(self, until_stopped: bool, byte: bool) -> None:
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            for _ in range(400):  # at most 20 s, and the client leaves long before
                if server_state.stop.wait(0.05):
                    return
                if byte:
                    self.wfile.write(b"x")
                    self.wfile.flush()

        def handle_any(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            query = parse_qs(parts.query, keep_blank_values=True)
            seen = Seen(self.command, parts.path, query, dict(self.headers.items()), body)
            server_state.requests.append(seen)
            route = parts.path.split("/")[1] if "/" in parts.path else ""
            if route == "search":
                q = query.get("q", [""])[0]
                self.send_json({"results": [{"title": f"Result for {q}"}, {"title": "Second"}]})
            elif route == "echo":
                self.send_json(
                    {
                        "method": seen.method,
                        "path": parts.path,
                        "raw_path": self.path,
                        "query": query,
                        "headers": seen.headers,
                        "body": body.decode("utf-8", "replace"),
                    }
                )
            elif route == "text":
                self.send(200, b"plain words", "text/plain; charset=utf-8", X_Answer="42")
            elif route == "latin1":
                self.send(200, "caf\xe9".encode("latin-1"), "text/plain; charset=utf-8")
            elif route == "latin1-declared":
                self.send(200, "caf\xe9".encode("latin-1"), "text/plain; charset=iso-8859-1")
            elif route == "status":
                code = int(parts.path.split("/")[2])
                self.send(code, b"" if code == 204 else b'{"error": "nope"}')
            elif route == "badjson":
                self.send(200, b'{"results": [1, 2', "application/json")
            elif route == "big":
                self.send(200, b"a" * (2 << 20), "text/plain")
            elif route == "big-chunked":
                self.close_connection = True
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = b"b" * 65536
                try:
                    for _ in range(64):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass
            elif route == "gzip":
                payload = gzip.compress(json.dumps({"results": [{"title": "zipped"}]}).encode())
                self.send(200, payload, "application/json", Content_Encoding="gzip")
            elif route == "gzipbomb":
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.send(200, bomb, "text/plain", Content_Encoding="gzip")
            elif route == "slow":
                self.drip(until_stopped=True, byte=True)
            elif route == "hang":
                self.drip(until_stopped=True, byte=False)
            elif route == "reset":
                self.close_connection = True
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()
            elif route == "redirect-same":
                self.send(302, b"", Location="/search?q=redirected")
            elif route == "redirect-other":
                self.send(302, b"", Location=f"http://localhost:{server_state.port}/search?q=x")
            elif route == "flaky":
                key = query.get("key", ["k"])[0]
                fails = int(query.get("fail", ["1"])[0])
                count = server_state.counters.get(key, 0) + 1
                server_state.counters[key] = count
                if count <= fails:
                    status = int(query.get("status", ["503"])[0])
                    retry_after = query.get("retry_after", ["0"])[0]
                    self.send(status, b"busy", "text/plain", Retry_After=retry_after)
                else:
                    self.send_json({"results": [{"title": f"after {count}"}]})
            else:
                self.send(404, b"{}")

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = handle_any

    return Handler


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that leaves mid-drip is the point of several tests


@pytest.fixture
def server(gzip_bomb: bytes) -> Iterator[LocalServer]:
    state = LocalServer("127.0.0.1", 0)
    httpd = QuietServer(("127.0.0.1", 0), make_handler(state, gzip_bomb))
    state.port = httpd.server_address[1]
    # Release handlers still dripping a response before the server waits for them to end.
    with serving(httpd, before_stop=state.stop.set):
        yield state


@pytest.fixture
async def http_provider() -> AsyncIterator[Callable[..., HttpProvider]]:
    """Build HttpProviders from keyword config; every one is closed after the test."""
    made: list[HttpProvider] = []

    def make(
        response: dict[str, Any] | None = None,
        name: str = "api",
        when: str | None = None,
        **request: Any,
    ) -> HttpProvider:
        config = HttpConfig(
            name=name,
            when=when,
            request=request,
            response=response or {},
        )
        provider = HttpProvider(config)
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.aclose()
