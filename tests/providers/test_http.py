"""http against a real server on 127.0.0.1: what arrives, and every way the server misbehaves."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from pydantic import ValidationError

from builtin_providers._net import is_public, redact_url
from builtin_providers.http import HttpConfig, HttpProvider
from composer.build import build_registry, manage
from composer.errors import ProviderError
from composer.manifest import Manifest
from composer.registry import ContextProviderRegistry
from composer.turn import Branch, Instruction

if TYPE_CHECKING:
    from providers.conftest import LocalServer

Make = Callable[..., HttpProvider]

TITLES = "{% for r in json.results %}- {{ r.title }}\n{% endfor %}"


async def ask(provider: HttpProvider, text: str = "hello", **branch: Any) -> str | None:
    return await provider.provide(Branch("sys", **branch), Instruction(text))


async def test_rendered_query_and_headers_arrive(server: LocalServer, http_provider: Make) -> None:
    provider = http_provider(
        url=f"{server.url}/search",
        params={"q": "{{ instruction.text }}", "tag": ["a", "{{ branch.name }}"], "n": "3"},
        headers={"Authorization": "Bearer t0ken-value", "X-Branch": "{{ branch.name }}"},
        response={"template": TITLES},
    )
    text = "deploy & rollback = 100% {{7*7}}/é"
    assert await ask(provider, text, name="ops") == f"- Result for {text}\n- Second\n"
    seen = server.requests[-1]
    assert seen.query == {"q": [text], "tag": ["a", "ops"], "n": ["3"]}
    assert seen.headers["Authorization"] == "Bearer t0ken-value"
    assert seen.headers["X-Branch"] == "ops"


async def test_user_text_in_the_path_stays_one_segment(
    server: LocalServer, http_provider: Make
) -> None:
    provider = http_provider(
        url=f"{server.url}/echo/{{{{ instruction.text }}}}/end",
        response={"template": "{{ json.raw_path }}"},
    )
    assert await ask(provider, "../../admin?x=1#f") == "/echo/..%2F..%2Fadmin%3Fx%3D1%23f/end"
    assert await ask(provider, "..") == "/echo/%2E%2E/end"
    assert await ask(provider, "@evil.example//x") == "/echo/%40evil.example%2F%2Fx/end"
    assert {s.path.split("/")[1] for s in server.requests} == {"echo"}


async def test_json_body_is_built_as_data(server: LocalServer, http_provider: Make) -> None:
    provider = http_provider(
        method="POST",
        url=f"{server.url}/echo",
        json={"query": "{{ instruction.text }}", "opts": {"k": 5, "tags": ["{{ branch.name }}"]}},
        response={"template": "{{ json.body }}"},
    )
    text = '", "admin": true, "x": "'
    body = await ask(provider, text, name="b")
    assert body is not None
    assert json.loads(body) == {"query": text, "opts": {"k": 5, "tags": ["b"]}}
    assert server.requests[-1].headers["Content-Type"] == "application/json"


async def test_raw_body_and_method_template(server: LocalServer, http_provider: Make) -> None:
    provider = http_provider(
        method="{{ 'put' }}",
        url=f"{server.url}/echo",
        body="text={{ instruction.text }}",
        response={"template": "{{ json.method }} {{ json.body }}"},
    )
    assert await ask(provider, "hi") == "PUT text=hi"
    bad = http_provider(method="{{ instruction.text }}", url=f"{server.url}/echo")
    with pytest.raises(ProviderError, match="method 'TRACE' is not allowed"):
        await ask(bad, "trace")


async def test_response_template_sees_status_headers_text(
    server: LocalServer, http_provider: Make
) -> None:
    provider = http_provider(
        url=f"{server.url}/text",
        response={"template": "{{ status }} {{ headers['x-answer'] }} {{ text }} {{ json }}"},
    )
    assert await ask(provider) == "200 42 plain words None"
    default = http_provider(url=f"{server.url}/text")
    assert await ask(default) == "plain words"
    empty = http_provider(url=f"{server.url}/status/204")
    assert await ask(empty) is None


async def test_gzip_and_declared_charset(server: LocalServer, http_provider: Make) -> None:
    zipped = http_provider(url=f"{server.url}/gzip", response={"template": TITLES})
    assert await ask(zipped) == "- zipped\n"
    latin = http_provider(url=f"{server.url}/latin1-declared")
    assert await ask(latin) == "café"


@pytest.mark.parametrize(
    ("path", "options", "message"),
    [
        ("/status/500", {}, "HTTP 500"),
        ("/status/404", {}, "HTTP 404"),
        ("/reset", {}, "RemoteProtocolError|ReadError"),
        ("/badjson", {}, "invalid JSON"),
        ("/latin1", {}, "undecodable utf-8 body"),
        ("/big", {}, "exceeds 1048576"),
        ("/big-chunked", {"max_response_bytes": 100_000}, "exceeds 100000 bytes"),
        ("/gzipbomb", {}, "exceeds 1048576 bytes"),
        ("/slow", {"timeout_s": 0.3}, r"no complete response within 0\.3s"),
        ("/hang", {"timeout_s": 0.3}, r"no complete response within 0\.3s"),
        ("/redirect-same", {}, "HTTP 302 redirect"),
        ("/redirect-other", {"follow_redirects": True}, "redirect to another origin refused"),
        ("/flaky?fail=5&key=a", {"retries": 1}, "HTTP 503"),
    ],
)
async def test_misbehaving_server_fails_the_provider(
    server: LocalServer, http_provider: Make, path: str, options: dict[str, Any], message: str
) -> None:
    provider = http_provider(url=f"{server.url}{path}", **options)
    with pytest.raises(ProviderError, match=message):
        await ask(provider)


async def test_redirects(server: LocalServer, http_provider: Make) -> None:
    same = http_provider(
        url=f"{server.url}/redirect-same", follow_redirects=True, response={"template": TITLES}
    )
    assert await ask(same) == "- Result for redirected\n- Second\n"
    other = http_provider(url=f"{server.url}/redirect-other", follow_redirects=True)
    with pytest.raises(ProviderError):
        await ask(other)
    assert server.paths() == ["/redirect-same", "/search", "/redirect-other"]  # never followed


async def test_retries_idempotent_only(server: LocalServer, http_provider: Make) -> None:
    get = http_provider(
        url=f"{server.url}/flaky?fail=2&key=g", retries=2, response={"template": TITLES}
    )
    assert await ask(get) == "- after 3\n"
    assert server.counters["g"] == 3
    jittered = http_provider(
        url=f"{server.url}/flaky?fail=1&key=j&status=502&retry_after=", retries=1
    )
    assert await ask(jittered) is not None
    post = http_provider(method="POST", url=f"{server.url}/flaky?fail=1&key=p", retries=3)
    with pytest.raises(ProviderError, match="HTTP 503"):
        await ask(post)
    assert server.counters["p"] == 1


async def test_retry_after_past_the_deadline_gives_up(
    server: LocalServer, http_provider: Make
) -> None:
    provider = http_provider(
        url=f"{server.url}/flaky?fail=1&key=late&status=429&retry_after=30", retries=3, timeout_s=2
    )
    with pytest.raises(ProviderError, match="HTTP 429"):
        await ask(provider)
    assert server.counters["late"] == 1


async def test_connect_errors_are_retried_then_fail(http_provider: Make) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        provider = http_provider(url=f"http://127.0.0.1:{port}/x", retries=2, timeout_s=3)
        with pytest.raises(ProviderError, match="cannot connect"):
            await ask(provider)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/search",
        "http://localhost:{port}/search",
        "http://[::ffff:127.0.0.1]:{port}/search",
        "http://[::1]:{port}/search",
        "http://169.254.169.254/latest/meta-data",
        "http://10.1.2.3:{port}/search",
    ],
)
async def test_block_private_addresses(server: LocalServer, http_provider: Make, url: str) -> None:
    provider = http_provider(url=url.format(port=server.port), block_private_addresses=True)
    with pytest.raises(ProviderError, match="non-public address"):
        await ask(provider)
    assert server.requests == []


async def test_private_addresses_allowed_by_default(
    server: LocalServer, http_provider: Make
) -> None:
    provider = http_provider(url=f"http://localhost:{server.port}/text")
    assert await ask(provider) == "plain words"


def test_is_public() -> None:
    assert is_public("93.184.216.34")
    assert is_public("2606:2800:220:1:248:1893:25c8:1946")
    for address in (
        "127.0.0.1",
        "::1",
        "::ffff:127.0.0.1",
        "10.0.0.1",
        "192.168.1.1",
        "172.16.0.1",
        "169.254.169.254",
        "fe80::1",
        "0.0.0.0",
        "100.64.0.1",
        "2002:7f00:1::",
        "224.0.0.1",
        "fc00::1",
    ):
        assert not is_public(address), address


def test_origin_and_hosts_are_checked_at_load() -> None:
    for url, message in [
        ("https://{{ instruction.text }}.example.com/", "must be literal"),
        ("https://api.example.com{{ instruction.text }}", "must be literal"),
        ("ftp://example.com/", "http or https"),
        ("https://user:pw@example.com/", "credentials"),
        ("https://api.example.com/{{ nope }}", "unknown name 'nope'"),
    ]:
        with pytest.raises(ValidationError, match=message):
            HttpConfig(name="x", request={"url": url})
    with pytest.raises(ValidationError, match="not in allowed_hosts"):
        HttpConfig(
            name="x",
            request={"url": "https://evil.example.org/", "allowed_hosts": ["*.example.com"]},
        )
    ok = HttpConfig(
        name="x",
        request={"url": "https://api.example.com/", "allowed_hosts": ["*.example.com"]},
    )
    assert ok.request.origin.host == "api.example.com"
    with pytest.raises(ValidationError, match="either json or body"):
        HttpConfig(name="x", request={"url": "https://a.com/", "json": {}, "body": "x"})


async def test_secrets_stay_out_of_errors_logs_and_repr(
    server: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    config = HttpConfig(
        name="status",
        request={
            "url": f"{server.url}/status/500",
            "params": {"api_key": "query-s3cret", "q": "{{ instruction.text }}"},
            "headers": {"Authorization": "Bearer header-s3cret", "X-Api-Key": "key-s3cret"},
        },
    )
    provider = HttpProvider(config)
    registry = ContextProviderRegistry()
    registry.register(provider, name="status")
    try:
        with caplog.at_level(logging.DEBUG):
            report = await registry.gather(Branch("s"), Instruction("user words"))
            with pytest.raises(ProviderError) as error:
                await ask(provider, "user words")
    finally:
        await provider.aclose()
    assert report.failed == ["status"]
    everything = caplog.text + str(error.value) + repr(provider) + repr(error.value.__cause__)
    for secret in ("query-s3cret", "header-s3cret", "key-s3cret", "user words", "user+words"):
        assert secret not in everything
    assert "api_key=***" in str(error.value)
    assert repr(provider) == f"<HttpProvider 'status' GET {server.url}>"


def test_redact_url() -> None:
    url = httpx.URL("https://u:p@h.example/a/b?k=v&k=w&x=1#frag")
    assert redact_url(url) == "https://h.example/a/b?k=***&k=***&x=***"


async def test_a_provider_built_alone_makes_its_pool_lazily_and_closes_it(
    server: LocalServer,
) -> None:
    provider = HttpProvider(HttpConfig(name="x", request={"url": f"{server.url}/text"}))
    assert provider._pool._client is None
    assert await ask(provider) == "plain words"
    client = provider._pool._client
    assert client is not None
    await provider.aclose()
    assert client.is_closed
    assert provider._pool._client is None


async def test_branches_of_one_manifest_share_one_pool_per_origin(server: LocalServer) -> None:
    """A thousand branches must not open a thousand clients: the pool is the manifest's."""
    config = HttpConfig(name="x", request={"url": f"{server.url}/text"})
    other = HttpConfig(name="y", request={"url": f"{server.url}/json"})
    manifest = Manifest(version=1, providers=[config, other])
    registries = [build_registry(manifest) for _ in range(3)]
    providers = [m.provider for r in registries for m in r.managed]
    assert all(isinstance(p, HttpProvider) for p in providers)
    pools = {id(p._pool) for p in providers if isinstance(p, HttpProvider)}
    assert len(pools) == 1  # one origin, one limit
    for registry in registries:
        await registry.gather(Branch("s"), Instruction("x"))
        await registry.aclose()  # closes nothing shared
    pool = providers[0]._pool if isinstance(providers[0], HttpProvider) else None
    assert pool is not None
    client = pool._client
    assert client is not None
    assert not client.is_closed
    await manifest.aclose()
    assert client.is_closed


async def test_branches_of_one_manifest_hold_one_provider_that_renders_each_branch(
    server: LocalServer,
) -> None:
    """An attached branch costs no provider of its own (its templates, origin and timeout are
    the manifest's), and each branch's request is still rendered from that branch."""
    config = HttpConfig(
        name="x",
        request={"url": f"{server.url}/echo", "headers": {"X-Branch": "{{ branch.name }}"}},
    )
    manifest = Manifest(version=1, providers=[config])
    registries = [build_registry(manifest) for _ in range(3)]
    providers = {id(m.provider) for r in registries for m in r.managed}
    assert len(providers) == 1
    try:
        for name, registry in zip(("ops", "payments"), registries, strict=False):
            report = await registry.gather(Branch("s", name=name), Instruction("x"))
            assert [row["provider_name"] for row in report.fired] == ["x"]
            assert server.requests[-1].headers["X-Branch"] == name
    finally:
        for registry in registries:
            await registry.aclose()
        await manifest.aclose()


async def test_injected_client_is_used_and_left_open(server: LocalServer) -> None:
    async with httpx.AsyncClient(trust_env=False) as client:
        provider = HttpProvider(
            HttpConfig(name="x", request={"url": f"{server.url}/text"}),
            client=client,
        )
        assert await ask(provider) == "plain words"
        await provider.aclose()
        assert not client.is_closed
        assert await ask(provider) == "plain words"


async def test_environment_proxies_are_ignored(
    server: LocalServer, http_provider: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # the discard port: would fail
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert await ask(http_provider(url=f"{server.url}/text")) == "plain words"


async def test_when_guard(server: LocalServer, http_provider: Make) -> None:
    """A false guard means no request at all, not a request whose answer is dropped."""
    provider = http_provider(url=f"{server.url}/text", when="'status' in instruction.text")
    guarded = manage(provider, provider.config)
    assert await guarded.provide(Branch("s"), Instruction("hello")) is None
    assert server.requests == []
    assert await guarded.provide(Branch("s"), Instruction("status please")) == "plain words"


async def test_block_private_connects_to_the_checked_address(
    server: LocalServer, http_provider: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the check passing, the request goes to the resolved address, Host kept."""
    import socket

    first = socket.getaddrinfo("localhost", server.port, type=socket.SOCK_STREAM)[0][4][0]
    if first != "127.0.0.1":
        pytest.skip(f"localhost resolves to {first} first; the test server is on 127.0.0.1")
    monkeypatch.setattr("builtin_providers._net.is_public", lambda address: True)
    provider = http_provider(
        url=f"http://localhost:{server.port}/echo",
        block_private_addresses=True,
        response={"template": "{{ json.headers.Host }}"},
    )
    assert await ask(provider) == f"localhost:{server.port}"
