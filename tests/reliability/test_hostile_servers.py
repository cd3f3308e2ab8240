"""http against a hostile server on 127.0.0.1: every attack ends as a ProviderError, in time.

The server is the providers' local server (tests/providers/conftest.py) with one more route,
``/reset-mid-body``: headers and part of a body, then, once the client has the headers, a TCP
reset. Each case runs under an outer deadline of ``timeout_s`` plus a generous margin, so a
hang fails the test as a TimeoutError instead of stalling the suite, and any exception but
ProviderError fails it too.
"""

from __future__ import annotations

import asyncio
import re
import socket
import struct
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import providers.conftest as shared
import pytest
from localserver import serving
from providers.conftest import GZIP_BOMB_BYTES, LocalServer, QuietServer, Seen, make_handler

from builtin_providers.http import HttpConfig, HttpProvider
from composer.errors import ProviderError
from composer.turn import Branch, Instruction

# The providers' fixtures, used here as they are.
gzip_bomb = shared.gzip_bomb
http_provider = shared.http_provider

MARGIN_S = 5.0
"""Slack on top of a provider's own timeout_s: catches a runaway, not a slow machine."""


@dataclass
class HostileServer(LocalServer):
    headers_read: threading.Event = field(default_factory=threading.Event)
    """Set by the client once it has the headers of ``/reset-mid-body``."""


def _hostile_handler(state: HostileServer, bomb: bytes) -> type[BaseHTTPRequestHandler]:
    """The providers' handler plus ``/reset-mid-body``."""
    base: Any = make_handler(state, bomb)

    class Hostile(base):  # type: ignore[misc]
        def handle_any(self) -> None:
            if not self.path.startswith("/reset-mid-body"):
                super().handle_any()
                return
            state.requests.append(Seen(self.command, self.path, {}, dict(self.headers), b""))
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b"x" * 4096)
            self.wfile.flush()
            state.headers_read.wait(timeout=5)  # reset while the client reads the body
            linger = struct.pack("ii", 1, 0)  # close with RST, not FIN
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            self.connection.close()

        do_GET = do_POST = handle_any

    return Hostile


@pytest.fixture
def hostile(gzip_bomb: bytes) -> Iterator[HostileServer]:
    state = HostileServer("127.0.0.1", 0)
    httpd = QuietServer(("127.0.0.1", 0), _hostile_handler(state, gzip_bomb))
    state.port = httpd.server_address[1]
    with serving(httpd, before_stop=state.stop.set):
        yield state


Make = Callable[..., HttpProvider]


async def fails_in_time(provider: HttpProvider, text: str = "hello") -> ProviderError:
    """The ProviderError the provider raises, within its timeout_s plus MARGIN_S."""
    budget = provider.config.request.timeout_s + MARGIN_S
    started = time.monotonic()
    async with asyncio.timeout(budget):
        with pytest.raises(ProviderError) as caught:
            await provider.provide(Branch("sys"), Instruction(text))
    assert time.monotonic() - started < budget
    return caught.value


HOSTILE = {
    "slow-drip": ("/slow", {"timeout_s": 0.5}, "no complete response within 0.5s"),
    "headers-then-silence": ("/hang", {"timeout_s": 0.5}, "no complete response within 0.5s"),
    "gzip-bomb": ("/gzipbomb", {}, "body refused: response body exceeds 1048576 bytes"),
    "too-many-chunks": (
        "/big-chunked",
        {"max_response_bytes": 10_000},
        "body refused: response body exceeds 10000 bytes",
    ),
    "reset-before-answer": ("/reset", {}, "request failed"),
    "redirect-elsewhere": (
        "/redirect-other",
        {"follow_redirects": True},
        "HTTP 302 redirect to another origin refused",
    ),
}


@pytest.mark.parametrize(("path", "options", "message"), HOSTILE.values(), ids=HOSTILE.keys())
async def test_hostile_answers_are_contained(
    hostile: HostileServer, http_provider: Make, path: str, options: dict[str, Any], message: str
) -> None:
    """One request, never a second (no redirect followed), then a ProviderError saying why."""
    provider = http_provider(url=f"{hostile.url}{path}", **options)
    error = await fails_in_time(provider)
    assert re.fullmatch(rf"http 'api': GET {re.escape(hostile.url + path)}: .*", str(error))
    assert message in str(error)
    assert hostile.paths() == [path]


async def test_a_reset_mid_body_is_contained(hostile: HostileServer) -> None:
    """Headers and part of the body arrive, then a TCP reset: a ProviderError, not a hang."""

    async def headers_arrived(response: httpx.Response) -> None:
        hostile.headers_read.set()

    config = HttpConfig(name="api", request={"url": f"{hostile.url}/reset-mid-body"})
    async with httpx.AsyncClient(event_hooks={"response": [headers_arrived]}) as client:
        error = await fails_in_time(HttpProvider(config, client))
    assert "reading the body failed" in str(error)
    assert hostile.headers_read.is_set()


async def test_a_compression_bomb_never_inflates_in_memory(
    hostile: HostileServer, http_provider: Make
) -> None:
    """64 MiB of zeros in 64 KiB of gzip: refused with the memory peak far below the bomb."""
    provider = http_provider(url=f"{hostile.url}/gzipbomb")
    tracemalloc.start()
    try:
        await fails_in_time(provider)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < GZIP_BOMB_BYTES // 4


@pytest.mark.parametrize(
    "text",
    ["hi\r\nX-Injected: 1", "hi\nX-Injected: 1", "hi\rX-Injected: 1", "a\x00b", "a\x0bb"],
    ids=["crlf", "lf", "cr", "nul", "vtab"],
)
async def test_header_injection_through_a_template_is_refused(
    hostile: HostileServer, http_provider: Make, text: str
) -> None:
    provider = http_provider(
        url=f"{hostile.url}/echo", headers={"X-Query": "{{ instruction.text }}"}
    )
    await fails_in_time(provider, text)
    assert hostile.requests == []  # refused before anything was sent


async def test_a_non_ascii_header_value_is_a_provider_error(
    hostile: HostileServer, http_provider: Make
) -> None:
    provider = http_provider(
        url=f"{hostile.url}/echo", headers={"X-Query": "{{ instruction.text }}"}
    )
    error = await fails_in_time(provider, "café\u2028")
    assert "a rendered header value is not ASCII" in str(error)
    assert "caf" not in str(error)
