"""Request limits: the size of a body, and who counts as one client.

Bodies are read with a bound (a declared ``Content-Length`` over it is refused before reading,
a chunked body as soon as it passes it), answered ``413``. A client, for the rate limits
(``composer.serve.rates``) and the connection caps, is an address, except that an IPv6 /64
and all of loopback count as one (``client_group``), so rotating addresses evades nothing.
"""

from __future__ import annotations

import ipaddress

from starlette.requests import Request
from starlette.types import Scope

from composer.serve.responses import JsonResponse, error_response

__all__ = ["address_group", "client_group", "read_body"]


async def read_body(request: Request, limit: int) -> bytes | JsonResponse:
    """The request body, or the ``413`` answer when it is larger than ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> JsonResponse:
    return error_response(413, "too_large", f"the request body is larger than {limit} bytes")


def client_group(scope: Scope) -> str:
    """Who a request counts as for the per-client rate: its address, except that every
    loopback address is one client and an IPv6 address counts by its /64 (a host is handed a
    whole /64 and can rotate through it)."""
    client = scope.get("client")
    return address_group(client[0] if client else "", loopback_as_one=True)


def address_group(host: str, *, loopback_as_one: bool) -> str:
    """The client an address counts as: itself (an IPv4-mapped IPv6 address as its IPv4
    one), an IPv6 address by its /64, and with ``loopback_as_one`` all of loopback as one."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if loopback_as_one and address.is_loopback:
        return "loopback"
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    return str(address)
