"""The ``mcp`` provider's streamable HTTP transport: the SDK's, with a cap on each response.

The SDK bounds each server-sent event (``max_sse_event_size``) but reads a JSON response
whole, however large. Here an httpx transport under the SDK's client counts the body of each
POST response (the answer to one request) and refuses it past ``max_response_bytes``: the
declared length at once, else as the bytes arrive, and a compressed body only as far as it
inflates to the cap (``read_bounded``). It also notes the HTTP status of a refused request, so
a wrong URL reads "HTTP 404 at URL", ends the link when the server no longer knows its
session (a 404 to a request that carries the session id: the server restarted), and keeps
the session's closing DELETE short.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import httpx
import httpx2
from mcp.client.streamable_http import streamable_http_client

from builtin_providers._mcp_link import causes, describe
from builtin_providers._net import BodyTooLarge, UndecodableBody, read_bounded, redact_url

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

__all__ = ["HttpLink"]

_CLOSE_S = 1.0
"""How long the DELETE that ends a session may take (a hung server must not hold aclose)."""
_SSE_READ_S = 300.0
"""The read timeout of the SDK's client: a server may hold an event stream open that long."""


class HttpLink:
    """A server reached at ``url`` over streamable HTTP."""

    def __init__(
        self, url: str, headers: dict[str, str], *, connect_timeout_s: float, max_bytes: int
    ) -> None:
        self.url, self.headers = url, headers
        self.connect_timeout_s = connect_timeout_s
        self.max_bytes = max_bytes
        self.shown = redact_url(httpx.URL(url))
        self.fault: str | None = None
        self.status: str | None = None
        self.on_end: Callable[[], None] | None = None

    @contextlib.asynccontextmanager
    async def transport(self) -> AsyncIterator[TransportStreams]:
        headers = dict(self.headers)
        if not any(key.lower() == "accept-encoding" for key in headers):
            headers["Accept-Encoding"] = "identity"
        bounded = _Bounded(self, httpx2.AsyncHTTPTransport(trust_env=False))
        timeout = httpx2.Timeout(self.connect_timeout_s, read=_SSE_READ_S)
        async with (
            httpx2.AsyncClient(
                headers=headers, trust_env=False, timeout=timeout, transport=bounded
            ) as http,
            streamable_http_client(
                self.url, http_client=http, max_sse_event_size=self.max_bytes
            ) as streams,
        ):
            yield streams

    def explain(self, error: BaseException) -> str:
        """The bound broken, else the HTTP status of a refused request, else what stopped
        the connection (refused, unresolvable, timed out), naming the URL."""
        if self.fault is not None:
            return self.fault
        if self.status is not None:
            return self.status
        chain = list(causes(error))
        for cause in chain:
            if isinstance(cause, ConnectionRefusedError):
                return f"connection refused by {self.shown}"
            if isinstance(cause, socket.gaierror):
                return f"cannot resolve the host of {self.shown}"
            if isinstance(cause, httpx2.ConnectTimeout):
                return f"no connection to {self.shown} within {self.connect_timeout_s:g} s"
        for cause in chain:
            if isinstance(cause, httpx2.TransportError):
                return f"{self.shown}: {describe(cause)}"
        return describe(error)

    def refuse(self, message: str) -> str:
        self.fault = message
        return message


class _TooLarge(httpx2.StreamError):
    """Raised while the SDK reads a refused body: it answers the request with an error
    instead of failing the whole session."""


class _Counted(httpx2.AsyncByteStream):
    """A body that raises ``_TooLarge`` once more than ``link.max_bytes`` have arrived."""

    def __init__(self, link: HttpLink, stream: httpx2.AsyncByteStream) -> None:
        self.link, self.stream = link, stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self.stream:
            total += len(chunk)
            if total > self.link.max_bytes:
                raise _TooLarge(self.link.refuse(_over(self.link)))
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


class _Refused(httpx2.AsyncByteStream):
    """A body refused before it was read."""

    def __init__(self, message: str) -> None:
        self.message = message

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise _TooLarge(self.message)
        yield b""  # pragma: no cover - makes this an async generator


class _Bounded(httpx2.AsyncBaseTransport):
    """Under the SDK's client: caps POST response bodies, notes refused requests' status,
    keeps the closing DELETE short."""

    def __init__(self, link: HttpLink, inner: httpx2.AsyncBaseTransport) -> None:
        self.link, self.inner = link, inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        link = self.link
        if request.method == "DELETE":
            request.extensions["timeout"] = dict.fromkeys(
                ("connect", "read", "write", "pool"), _CLOSE_S
            )
        response = await self.inner.handle_async_request(request)
        if response.status_code >= 400 and link.status is None:
            link.status = f"HTTP {response.status_code} at {link.shown}"
        forgotten = response.status_code == 404 and "mcp-session-id" in request.headers
        if forgotten and link.on_end is not None:  # the server restarted: the session is over
            link.on_end()
        if request.method != "POST":
            return response  # the event stream: the SDK bounds each event
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        headers = httpx2.Headers(response.headers)
        declared = headers.get("content-length", "")
        encoding = headers.get("content-encoding", "").strip().lower()
        stream: httpx2.AsyncByteStream
        if declared.isdigit() and int(declared) > link.max_bytes and not encoding:
            await response.aclose()
            stream = _Refused(link.refuse(_over(link, int(declared))))
        elif encoding not in ("", "identity"):
            try:
                body = await read_bounded(aiter(response.stream), encoding, link.max_bytes)
                stream = httpx2.ByteStream(body)
            except BodyTooLarge:
                stream = _Refused(link.refuse(_over(link)))
            except UndecodableBody as e:
                stream = _Refused(link.refuse(f"{link.shown}: {e}"))
            finally:
                await response.aclose()
            del headers["content-encoding"]
            headers.pop("content-length", None)
        else:
            stream = _Counted(link, response.stream)
        return httpx2.Response(
            response.status_code,
            headers=headers,
            stream=stream,
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def _over(link: HttpLink, size: int | None = None) -> str:
    declared = f" (declared {size} bytes)" if size is not None else ""
    return (
        f"the response from {link.shown} is over {link.max_bytes} bytes{declared} "
        "(max_response_bytes)"
    )


def _not_refused(record: logging.LogRecord) -> bool:
    """The SDK logs a refused JSON body with its traceback; the provider's error says it."""
    return not (record.exc_info and isinstance(record.exc_info[1], _TooLarge))


logging.getLogger("mcp.client.streamable_http").addFilter(_not_refused)
