"""Network helpers of the http provider: fixed origins, address policy, redaction, bounded bodies.

Kept apart from ``http.py`` so each rule (what counts as the same origin, which addresses are
public, what a log line may show, how many bytes a body may inflate to) is stated once.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import zlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

import httpx

__all__ = [
    "BodyTooLarge",
    "Origin",
    "UndecodableBody",
    "UnsafeAddress",
    "host_allowed",
    "is_public",
    "read_bounded",
    "redact_url",
    "resolve_public",
    "split_origin",
]

_TEMPLATE_MARKERS = ("{{", "{%", "{#", "}}", "%}", "#}")
_ORIGIN = re.compile(
    r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)(?P<rest>.*)$", re.S
)


class UnsafeAddress(Exception):
    """A host resolves to an address the provider may not reach."""


class BodyTooLarge(Exception):
    """A response body passed max_response_bytes (counted after decompression)."""


class UndecodableBody(Exception):
    """A response body could not be decompressed."""


@dataclass(frozen=True)
class Origin:
    """Scheme, host and port, as httpx normalises them (default ports are None)."""

    scheme: str
    host: str
    port: int | None

    @classmethod
    def of(cls, url: httpx.URL) -> Origin:
        return cls(url.scheme, url.host, url.port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}" + (f":{self.port}" if self.port is not None else "")


def split_origin(url_source: str) -> Origin:
    """The origin of a URL template, which must be literal: no template syntax, no userinfo.

    Raises ValueError naming the rule broken (it becomes a located manifest error).
    """
    match = _ORIGIN.match(url_source.strip())
    if not match:
        raise ValueError("url must start with http:// or https:// and a host")
    scheme, authority = match["scheme"].lower(), match["authority"]
    if scheme not in ("http", "https"):
        raise ValueError(f"url scheme must be http or https, not {scheme!r}")
    if any(marker in authority for marker in _TEMPLATE_MARKERS):
        raise ValueError(
            "the scheme, host and port of url must be literal (or ${VAR}), not a template"
        )
    if "@" in authority:
        raise ValueError("credentials in the url are not allowed; send them in headers")
    try:
        parsed = httpx.URL(f"{scheme}://{authority}/")
    except httpx.InvalidURL as e:
        raise ValueError(f"invalid url host: {e}") from e
    if not parsed.host:
        raise ValueError("url has no host")
    return Origin.of(parsed)


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """Whether ``host`` is one of ``allowed`` (exact, or ``*.example.com`` for subdomains)."""
    host = host.lower().rstrip(".")
    for pattern in allowed:
        pattern = pattern.lower().rstrip(".")
        if host == pattern or (pattern.startswith("*.") and host.endswith(pattern[1:])):
            return True
    return False


# IPv6 prefixes whose last 32 bits are an IPv4 address that the network (or the host) reaches:
# NAT64's well-known prefix, IPv4-compatible (deprecated, still routed by some stacks) and
# IPv4-translated (SIIT). ``ipaddress`` calls most of them global whatever they embed.
_EMBEDS_IPV4_LOW32 = tuple(
    ipaddress.IPv6Network(prefix) for prefix in ("64:ff9b::/96", "::/96", "::ffff:0:0:0/96")
)
# Local-use NAT64 (RFC 8215): the operator picks where the IPv4 address sits, so none is public.
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return ip.is_global and not ip.is_multicast


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address a packet to ``ip`` may end up at (mapped, 6to4, Teredo, NAT64...)."""
    found = [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())]
    if any(ip in network for network in _EMBEDS_IPV4_LOW32):
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return [inner for inner in found if inner is not None]


def is_public(address: str) -> bool:
    """A globally routable address, also through every IPv6 form that embeds an IPv4 one.

    An IPv6 address carrying an IPv4 address (IPv4-mapped or -compatible, 6to4, Teredo,
    NAT64) is public only if the IPv4 address is: ``64:ff9b::a9fe:a9fe`` reaches
    169.254.169.254 on a NAT64 network.
    """
    ip = ipaddress.ip_address(address)
    if not _public(ip):
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        return ip not in _LOCAL_NAT64 and all(_public(inner) for inner in _embedded_ipv4(ip))
    return True


async def resolve_public(host: str, port: int) -> str:
    """One address of ``host`` after checking that every address it resolves to is public.

    The caller connects to the returned address, so a second, different DNS answer (DNS
    rebinding) cannot slip a private address in between the check and the connection.
    """
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as e:
            raise UnsafeAddress(f"cannot resolve {host}: {e.strerror or e}") from e
        addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise UnsafeAddress(f"{host} resolves to no address")
    for address in addresses:
        if not is_public(address.split("%", 1)[0]):
            raise UnsafeAddress(f"{host} resolves to a non-public address ({address})")
    return addresses[0]


def redact_url(url: httpx.URL) -> str:
    """The URL for logs and errors: query values dropped, no userinfo, no fragment."""
    base = str(url.copy_with(query=None, fragment=None, username=None, password=None))
    keys = [key for key, _ in url.params.multi_items()]
    return base + ("?" + "&".join(f"{key}=***" for key in keys) if keys else "")


class _Inflater:
    """Decompress at most a given number of bytes at a time, whatever the ratio."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        if encoding in ("", "identity"):
            self._zlib = None
        elif encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj()
        else:
            raise UndecodableBody(f"unsupported Content-Encoding {encoding!r}")
        self._first = True

    def feed(self, data: bytes, room: int) -> Iterable[bytes]:
        """The decompressed bytes of ``data``, in pieces of at most ``room + 1`` bytes."""
        if self._zlib is None:
            yield data
            return
        while data and not self._zlib.eof:
            try:
                out = self._zlib.decompress(data, room + 1)
            except zlib.error as e:
                if self._first and self.encoding == "deflate":  # raw deflate, no zlib header
                    self._zlib, self._first = zlib.decompressobj(-zlib.MAX_WBITS), False
                    continue
                raise UndecodableBody(f"cannot decompress {self.encoding} body: {e}") from e
            self._first = False
            data = self._zlib.unconsumed_tail
            yield out
            room -= len(out)

    def finish(self, room: int) -> bytes:
        if self._zlib is None:
            return b""
        try:
            return self._zlib.flush(room + 1)
        except zlib.error as e:
            raise UndecodableBody(f"cannot decompress {self.encoding} body: {e}") from e


async def read_bounded(chunks: AsyncIterator[bytes], content_encoding: str, limit: int) -> bytes:
    """The decompressed body from raw ``chunks``; BodyTooLarge as soon as it passes ``limit``.

    httpx's own decoders inflate a whole network chunk at once (a 64 KiB gzip chunk of zeros
    is 64 MiB); here no step produces more than ``limit + 1`` bytes.
    """
    inflater = _Inflater(content_encoding.strip().lower())
    parts: list[bytes] = []
    total = 0
    async for raw in chunks:
        for out in inflater.feed(raw, limit - total):
            total += len(out)
            if total > limit:
                raise BodyTooLarge(f"response body exceeds {limit} bytes")
            parts.append(out)
    tail = inflater.finish(limit - total)
    if total + len(tail) > limit:
        raise BodyTooLarge(f"response body exceeds {limit} bytes")
    parts.append(tail)
    return b"".join(parts)
