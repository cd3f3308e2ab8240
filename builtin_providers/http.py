"""``type: http``: one templated HTTP request per turn, its response formatted by a template.

The registry has no timeout and no retry (ADR-0008 D2), so this provider brings its own:
``timeout_s`` is one deadline around everything (address check, every attempt, backoff,
redirects, streaming the body), because httpx's read timeout restarts on every chunk and a
server dripping one byte at a time would defeat it. Whatever goes wrong raises ProviderError,
so the registry records the provider as failed and the turn goes on.

Where the request goes is fixed by the manifest: the scheme, host and port of ``url`` are
literal (or ``${VAR}``, substituted at load), the rendered URL is re-parsed and must keep
them, and every ``{{ }}`` in ``url`` is percent-encoded with ``/`` included. Query values go
through ``params`` (encoded by httpx) and JSON bodies are built as data. Secrets belong in
``headers``: no log line, error or repr shows a header value or a query value.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import httpx
from pydantic import Field, field_validator, model_validator

from builtin_providers._json_templates import compile_json, render_json
from builtin_providers._net import (
    BodyTooLarge,
    Origin,
    UndecodableBody,
    UnsafeAddress,
    host_allowed,
    read_bounded,
    redact_url,
    resolve_public,
    split_origin,
)
from composer.plugin import (
    CONTEXT_NAMES,
    BuildContext,
    Provider,
    ProviderConfig,
    ProviderError,
    ProviderType,
    StrictModel,
    Template,
    UrlTemplate,
    compile_template,
    redact,
    template_check,
)

__all__ = [
    "DEFAULT_RESPONSE_TEMPLATE",
    "ClientPool",
    "HttpConfig",
    "HttpProvider",
    "RequestConfig",
    "ResponseConfig",
    "provider_type",
]

logger = logging.getLogger(__name__)

DEFAULT_RESPONSE_TEMPLATE = "{{ text }}"

_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"})
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
_RETRY_STATUSES = frozenset({429, 502, 503, 504})
_BACKOFF_BASE_S = 0.1
_BACKOFF_CAP_S = 2.0
_RESPONSE_NAMES = CONTEXT_NAMES | {"json", "text", "status", "headers"}
_ResponseTemplate = Annotated[str, template_check("json", "text", "status", "headers")]


class RequestConfig(StrictModel):
    """What to send; every string is a template, except the origin of ``url``."""

    method: Template = Field(default="GET", description="GET, POST, ... (a template).")
    url: UrlTemplate = Field(
        description="Literal scheme://host[:port] (or ${VAR}); the path may use templates, "
        "whose output is percent-encoded (`/` included)."
    )
    params: dict[str, Template | list[Template]] = Field(
        default_factory=dict, description="Query parameters, encoded by httpx."
    )
    headers: dict[str, Template] = Field(
        default_factory=dict, description="Request headers: the place for secrets."
    )
    json_body: Any = Field(
        default=None,
        alias="json",
        description="A JSON body built as data; each string in it is a template.",
    )
    body: Template | None = Field(default=None, description="A raw text body (not with json).")
    timeout_s: float = Field(
        default=5.0, gt=0, le=300, description="One deadline for the whole exchange."
    )
    retries: int = Field(
        default=0,
        ge=0,
        le=10,
        description="Extra attempts for idempotent methods on connect errors and "
        "429/502/503/504, with jittered backoff and Retry-After, inside timeout_s.",
    )
    max_response_bytes: int = Field(
        default=1 << 20, ge=1, description="Body limit after decompression."
    )
    follow_redirects: bool = Field(
        default=False, description="Follow redirects, to the same origin only."
    )
    max_redirects: int = Field(default=5, ge=0, le=20)
    max_connections: int = Field(
        default=10,
        ge=1,
        le=1000,
        description="Connections open at once to this origin, shared by every branch of the "
        "loaded manifest (one pool per origin and limit).",
    )
    allowed_hosts: list[str] | None = Field(
        default=None, description="If set, the url host must be one of these (`*.x.com` ok)."
    )
    block_private_addresses: bool = Field(
        default=False,
        description="Refuse hosts resolving to loopback, private, link-local or other "
        "non-global addresses (and connect to the address checked).",
    )

    @field_validator("url")
    @classmethod
    def _literal_origin(cls, url: str) -> str:
        split_origin(url)
        return url

    @field_validator("json_body")
    @classmethod
    def _compile_json_body(cls, value: Any) -> Any:
        compile_json(value)
        return value

    @model_validator(mode="after")
    def _checks(self) -> RequestConfig:
        if self.json_body is not None and self.body is not None:
            raise ValueError("give either json or body, not both")
        if self.allowed_hosts is not None:
            host = self.origin.host
            if not host_allowed(host, self.allowed_hosts):
                raise ValueError(f"url host {host!r} is not in allowed_hosts")
        return self

    @property
    def origin(self) -> Origin:
        return split_origin(self.url)


class ResponseConfig(StrictModel):
    """How the response becomes the block."""

    template: _ResponseTemplate = Field(
        default=DEFAULT_RESPONSE_TEMPLATE,
        description="Sees `json` (parsed body, or None if not JSON), `text`, `status`, "
        "`headers` (lower-case names).",
    )


class HttpConfig(ProviderConfig):
    """Call an HTTP endpoint each turn and format its answer."""

    type: Literal["http"] = "http"
    request: RequestConfig = Field(description="What to send; every string is a template.")
    response: ResponseConfig = Field(
        default=ResponseConfig(), description="How the answer becomes the block."
    )


@dataclass
class _Request:
    method: str
    url: httpx.URL
    headers: dict[str, str]
    json_body: Any
    content: bytes | None

    def secrets(self) -> list[str]:
        """Header and query values (4 characters or more) to scrub from text shown to people."""
        values = list(self.headers.values()) + [v for _, v in self.url.params.multi_items()]
        return [v for v in values if len(v) >= 4]


class _Retry(Exception):
    """An attempt that may be retried; ``error`` is raised if it is not."""

    def __init__(self, error: ProviderError, retry_after: float | None = None) -> None:
        self.error = error
        self.retry_after = retry_after


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (delta-seconds or an HTTP date), None if absent or invalid."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


class _RedactUrls(logging.Filter):
    """httpx logs each request's full URL at INFO; show it without query values."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, httpx.URL) for a in record.args):
            record.args = tuple(
                redact_url(a) if isinstance(a, httpx.URL) else a for a in record.args
            )
        return True


_HTTPX_FILTER = _RedactUrls()


def _redact_httpx_logs() -> None:
    """Attach the filter to httpx's logger once, when the first client is made (not on import)."""
    httpx_logger = logging.getLogger("httpx")
    if _HTTPX_FILTER not in httpx_logger.filters:
        httpx_logger.addFilter(_HTTPX_FILTER)


class ClientPool:
    """One ``httpx.AsyncClient`` for every provider of one loaded manifest that talks to one
    origin: a thousand branches share its connections (at most ``max_connections``) instead of
    opening a thousand clients. Closed by ``Manifest.aclose()``.

    Connections belong to the event loop that opened them, so a client made on a loop that has
    since ended (one ``asyncio.run`` per CLI command) is replaced, not reused.
    """

    def __init__(self, max_connections: int = 10) -> None:
        self.limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def client(self) -> httpx.AsyncClient:
        """The client for the running loop, made on first use: no proxies or .netrc."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            _redact_httpx_logs()
            self._client = httpx.AsyncClient(
                trust_env=False, follow_redirects=False, limits=self.limits
            )
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the client if it lives on this loop (one on an ended loop is only dropped)."""
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.aclose()


class HttpProvider(Provider[HttpConfig]):
    """Renders a request per turn and sends it through the manifest's pool for its origin."""

    def __init__(
        self,
        config: HttpConfig,
        client: httpx.AsyncClient | None = None,
        pool: ClientPool | None = None,
    ) -> None:
        super().__init__(config)
        self.config: HttpConfig = config
        request = config.request
        self._origin = request.origin
        self._method = compile_template(request.method)
        self._url = compile_template(request.url, url=True)
        self._params = {
            key: [compile_template(v) for v in value]
            if isinstance(value, list)
            else compile_template(value)
            for key, value in request.params.items()
        }
        self._headers = {key: compile_template(value) for key, value in request.headers.items()}
        self._json = compile_json(request.json_body)
        self._body = compile_template(request.body) if request.body is not None else None
        self._template = compile_template(config.response.template, _RESPONSE_NAMES)
        self._timeout = httpx.Timeout(request.timeout_s)
        self._client = client  # injected: its owner closes it
        self._own_pool = pool is None and client is None  # built alone: this provider closes it
        self._pool = pool if pool is not None else ClientPool(request.max_connections)

    @property
    def client(self) -> httpx.AsyncClient:
        return self._client if self._client is not None else self._pool.client()

    async def aclose(self) -> None:
        """Close the pool this provider made for itself; a manifest's shared pool is closed by
        ``Manifest.aclose()``, an injected client by its owner."""
        if self._own_pool:
            await self._pool.aclose()

    def __repr__(self) -> str:
        method = self.config.request.method if self._method.is_constant else "(templated)"
        return f"<HttpProvider {self.name!r} {method} {self._origin}>"

    def _target(self, context: Mapping[str, Any]) -> tuple[str, httpx.URL]:
        """The rendered method and URL (with its query), checked."""
        method = self._method.render(context).strip().upper()
        if method not in _METHODS:
            raise ProviderError(f"http {self.name!r}: method {method!r} is not allowed")
        try:
            url = httpx.URL(self._url.render(context))
        except httpx.InvalidURL as e:
            raise ProviderError(f"http {self.name!r}: rendered url is invalid: {e}") from None
        if Origin.of(url) != self._origin:
            raise ProviderError(
                f"http {self.name!r}: the rendered url left {self._origin} ({Origin.of(url)})"
            )
        params: list[tuple[str, str | int | float | bool | None]] = []
        for key, value in self._params.items():
            for template in value if isinstance(value, list) else [value]:
                params.append((key, template.render(context)))
        if params:
            url = url.copy_merge_params(params)
        return method, url

    def _render(self, context: Mapping[str, Any]) -> _Request:
        method, url = self._target(context)
        headers = {key: template.render(context) for key, template in self._headers.items()}
        for name, header in headers.items():
            if "\r" in header or "\n" in header:
                raise ProviderError(f"http {self.name!r}: header {name!r} contains a line break")
        headers.setdefault("Accept-Encoding", "gzip, deflate")
        json_body = render_json(self._json, context) if self._json is not None else None
        content = self._body.render(context).encode() if self._body is not None else None
        return _Request(method, url, headers, json_body, content)

    def cache_key(self, branch: Any, instruction: Any) -> str:
        """The rendered request (method, url with query, headers, body): what a cache keys on."""
        request = self._render(self.context(branch, instruction))
        body = json.dumps(request.json_body, sort_keys=True, default=str)
        headers = sorted(request.headers.items())
        return json.dumps([request.method, str(request.url), headers, body, str(request.content)])

    def display_query(self, branch: Any, instruction: Any) -> str:
        """The method and URL as logs show them: no query value, no header, no body."""
        method, url = self._target(self.context(branch, instruction))
        return f"{method} {redact_url(url)}"

    async def produce(self, branch: Any, instruction: Any, context: dict[str, Any]) -> str | None:
        request = self._render(context)
        timeout = self.config.request.timeout_s
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                status, headers, body = await self._exchange(request, started + timeout)
        except TimeoutError:
            raise self._error(request, f"no complete response within {timeout}s") from None
        finally:
            logger.debug(
                "http %s: %s %s (%.0f ms)",
                self.name,
                request.method,
                redact_url(request.url),
                (time.monotonic() - started) * 1000,
            )
        text, parsed = self._decode(request, headers, body)
        return self._template.render(
            {**context, "json": parsed, "text": text, "status": status, "headers": headers}
        )

    def _error(self, request: _Request, message: str, detail: str = "") -> ProviderError:
        """A ProviderError naming the request; ``detail`` (text from httpx or the server)
        is scrubbed of the URL's query and of every header value first."""
        if detail:
            detail = detail.replace(str(request.url), redact_url(request.url))
            detail = redact(detail, request.secrets())
            message = f"{message}: {detail}"
        return ProviderError(
            f"http {self.name!r}: {request.method} {redact_url(request.url)}: {message}"
        )

    async def _exchange(
        self, request: _Request, deadline: float
    ) -> tuple[int, dict[str, str], bytes]:
        """Attempts with retries (idempotent methods only), all before ``deadline``."""
        retries = self.config.request.retries if request.method in _IDEMPOTENT else 0
        attempt = 0
        while True:
            try:
                return await self._follow(request)
            except _Retry as retry:
                attempt += 1
                if attempt > retries:
                    raise retry.error from None
                delay = retry.retry_after
                if delay is None:
                    ceiling = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** (attempt - 1))
                    delay = random.uniform(0, ceiling)
                if time.monotonic() + delay >= deadline:
                    raise retry.error from None
                await asyncio.sleep(delay)

    async def _follow(self, request: _Request) -> tuple[int, dict[str, str], bytes]:
        """One attempt, following same-origin redirects when allowed."""
        config = self.config.request
        method, url = request.method, request.url
        json_body, content = request.json_body, request.content
        for _hop in range(config.max_redirects + 1):
            response = await self._send(request, method, url, json_body, content)
            try:
                status = response.status_code
                if response.is_redirect:
                    if not config.follow_redirects:
                        raise self._error(request, f"HTTP {status} redirect (not followed)")
                    target = url.join(response.headers["location"])
                    if Origin.of(target) != self._origin:
                        raise self._error(
                            request, f"HTTP {status} redirect to another origin refused"
                        )
                    if status == 303 or (status in (301, 302) and method == "POST"):
                        method, json_body, content = "GET", None, None
                    url = target
                    continue
                if status in _RETRY_STATUSES:
                    error = self._error(request, f"HTTP {status}", response.reason_phrase)
                    raise _Retry(error, _retry_after(response.headers.get("retry-after")))
                if not 200 <= status < 300:
                    raise self._error(request, f"HTTP {status}", response.reason_phrase)
                body = await self._read(request, response)
                headers = {key.lower(): value for key, value in response.headers.items()}
                return status, headers, body
            finally:
                await response.aclose()
        raise self._error(request, f"more than {config.max_redirects} redirects")

    async def _send(
        self, request: _Request, method: str, url: httpx.URL, json_body: Any, content: Any
    ) -> httpx.Response:
        config = self.config.request
        headers = dict(request.headers)
        extensions: dict[str, Any] = {}
        target = url
        try:
            if config.allowed_hosts is not None and not host_allowed(
                url.host, config.allowed_hosts
            ):
                raise self._error(request, f"host {url.host!r} is not in allowed_hosts")
            if config.block_private_addresses:
                port = url.port or (443 if url.scheme == "https" else 80)
                address = await resolve_public(url.host, port)
                if address != url.host:  # connect to the address that was checked
                    headers.setdefault("Host", url.netloc.decode("ascii"))
                    extensions["sni_hostname"] = url.host
                    target = url.copy_with(host=address)
            built = self.client.build_request(
                method, target, headers=headers, json=json_body, content=content,
                timeout=self._timeout,
            )  # fmt: skip
            built.extensions.update(extensions)
            return await self.client.send(built, stream=True, follow_redirects=False)
        except UnsafeAddress as e:
            raise self._error(request, "address refused", str(e)) from None
        except UnicodeEncodeError:  # httpx sends header values as ASCII; the value stays unsaid
            raise self._error(request, "a rendered header value is not ASCII") from None
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            raise _Retry(
                self._error(request, "cannot connect", f"{type(e).__name__}: {e}")
            ) from None
        except httpx.HTTPError as e:
            raise self._error(request, "request failed", f"{type(e).__name__}: {e}") from None

    async def _read(self, request: _Request, response: httpx.Response) -> bytes:
        limit = self.config.request.max_response_bytes
        encoding = response.headers.get("content-encoding", "")
        declared = response.headers.get("content-length", "")
        if not encoding and declared.isdigit() and int(declared) > limit:
            raise self._error(request, f"response body of {declared} bytes exceeds {limit}")
        try:
            return await read_bounded(response.aiter_raw(), encoding, limit)
        except (BodyTooLarge, UndecodableBody) as e:
            raise self._error(request, "body refused", str(e)) from None
        except httpx.HTTPError as e:
            raise self._error(
                request, "reading the body failed", f"{type(e).__name__}: {e}"
            ) from None

    def _decode(self, request: _Request, headers: dict[str, str], body: bytes) -> tuple[str, Any]:
        content_type = headers.get("content-type", "")
        encoding = "utf-8"
        for part in content_type.split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                encoding = value.strip("\"'")
        try:
            text = body.decode(encoding)
        except (LookupError, UnicodeDecodeError) as e:
            raise self._error(request, f"undecodable {encoding} body", str(e)) from None
        if not _is_json(content_type) or not text.strip():
            return text, None
        try:
            return text, json.loads(text)
        except ValueError as e:
            raise self._error(request, "invalid JSON body", str(e)) from None


def _factory(config: HttpConfig, context: BuildContext) -> HttpProvider:
    """One provider per loaded manifest, which every branch's registry holds: it keeps no
    state of a branch (its requests are rendered per turn), and its compiled templates,
    origin and timeout would otherwise be built again for each branch attached."""

    def build() -> HttpProvider:
        limit = config.request.max_connections
        key = f"http:pool:{config.request.origin}:{limit}"
        return HttpProvider(config, pool=context.shared(key, lambda: ClientPool(limit)))

    provider = context.shared(f"http:provider:{config.name}", build)
    return provider if provider.config is config else build()


provider_type = ProviderType(
    "http",
    HttpConfig,
    _factory,
    "A templated HTTP request per turn, bounded and confined.",
    operation="retrieval",
)
