"""block_private_addresses against every IPv6 spelling of a private IPv4 address, offline."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

import pytest

from builtin_providers._net import UnsafeAddress, is_public, resolve_public
from builtin_providers.http import HttpConfig, HttpProvider
from composer.errors import ProviderError
from composer.turn import Branch, Instruction

# address -> whether block_private_addresses lets it through
ADDRESSES = {
    # plain forms
    "93.184.216.34": True,
    "2606:2800:220:1:248:1893:25c8:1946": True,
    "169.254.169.254": False,
    "::1": False,
    "::": False,
    # NAT64, well-known prefix: the last 32 bits are the IPv4 destination
    "64:ff9b::a9fe:a9fe": False,  # 169.254.169.254, cloud metadata
    "64:ff9b::169.254.169.254": False,
    "64:ff9b::7f00:1": False,  # 127.0.0.1
    "64:ff9b::a00:1": False,  # 10.0.0.1
    "64:ff9b::": False,  # 0.0.0.0
    "64:ff9b::808:808": True,  # 8.8.8.8
    # NAT64, local-use prefix: where the IPv4 address sits is the operator's choice
    "64:ff9b:1::a9fe:a9fe": False,
    "64:ff9b:1::808:808": False,
    "64:ff9b:1:ffff::1": False,
    # IPv4-compatible (deprecated, still routed by some stacks)
    "::a9fe:a9fe": False,
    "::127.0.0.1": False,
    "::10.0.0.1": False,
    "::8.8.8.8": True,
    # IPv4-mapped
    "::ffff:169.254.169.254": False,
    "::ffff:127.0.0.1": False,
    "::ffff:8.8.8.8": True,
    # IPv4-translated (SIIT)
    "::ffff:0:a9fe:a9fe": False,
    "::ffff:0:808:808": True,
    # 6to4: the IPv4 address follows 2002:
    "2002:a9fe:a9fe::1": False,
    "2002:7f00:1::": False,
    "2002:a00:1::1": False,
    "2002:808:808::1": True,
    # Teredo
    "2001:0:4136:e378:8000:63bf:3fff:fdd2": False,
}


@pytest.mark.parametrize(("address", "allowed"), ADDRESSES.items())
def test_embedded_ipv4_is_checked_with_the_same_policy(address: str, allowed: bool) -> None:
    assert is_public(address) is allowed


@pytest.mark.parametrize(("address", "allowed"), ADDRESSES.items())
async def test_literal_hosts_are_refused_before_any_connection(address: str, allowed: bool) -> None:
    if allowed:
        assert await resolve_public(address, 80) == str(ipaddress.ip_address(address))
    else:
        with pytest.raises(UnsafeAddress, match="non-public address"):
            await resolve_public(address, 80)


async def test_a_name_resolving_to_nat64_metadata_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A DNS answer is checked like a literal: one NAT64 address among public ones is enough."""

    async def answer(host: str, port: int, **_: Any) -> list[Any]:
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("2606:2800:220:1::1", port, 0, 0)),
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("64:ff9b::a9fe:a9fe", port, 0, 0)),
        ]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", answer)
    with pytest.raises(UnsafeAddress, match=r"64:ff9b::a9fe:a9fe"):
        await resolve_public("metadata.example", 80)


@pytest.mark.parametrize(
    "host", ["[64:ff9b::a9fe:a9fe]", "[::a9fe:a9fe]", "[64:ff9b:1::a9fe:a9fe]"]
)
async def test_http_provider_refuses_nat64_and_compatible_forms(host: str) -> None:
    config = HttpConfig(
        name="meta",
        request={
            "url": f"http://{host}/latest/meta-data",
            "block_private_addresses": True,
            "timeout_s": 2,
        },
    )
    provider = HttpProvider(config)
    try:
        with pytest.raises(ProviderError, match="non-public address"):
            await provider.provide(Branch("sys"), Instruction("hi"))
    finally:
        await provider.aclose()
