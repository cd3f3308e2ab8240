"""``type: mcp``: context read from a Model Context Protocol server, once per turn.

The server is started over stdio (``command``, ``args``, ``env``) or reached over streamable
HTTP (``url``, ``headers``); each turn reads one ``resource`` (a URI), gets one ``prompt`` or
calls one ``tool``, every string of that request a template. The text parts of the answer are
joined into the block; images, audio, blobs and links are skipped (a log line names them, and
the block's ``template`` sees them as ``skipped``).

One session per server per loaded manifest is shared by every branch built from it (through
``BuildContext.shared``), owned by a background task because the SDK's sessions live in
anyio task groups that must be left by the task that entered them. A session whose server
died is replaced on the next turn (a resource read or a prompt cut by the death is retried
once on the new session; a tool call is not, as it may have acted). ``Manifest.aclose()``
closes it. The MCP SDK (the ``mcp`` extra) is imported on first use, so a manifest without an
``mcp`` provider never needs it, and without it this provider fails each turn with a
ProviderError that says what to install.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field, field_validator, model_validator

from builtin_providers._json_templates import compile_json, render_json
from composer.plugin import (
    CONTEXT_NAMES,
    BuildContext,
    ManifestPath,
    Progress,
    Provider,
    ProviderConfig,
    ProviderError,
    ProviderType,
    StrictModel,
    Template,
    UrlTemplate,
    compile_template,
    template_check,
)

if TYPE_CHECKING:
    from mcp import Client

__all__ = [
    "DEFAULT_TEMPLATE",
    "McpConfig",
    "McpProvider",
    "McpSession",
    "PromptCall",
    "ServerConfig",
    "ToolCall",
    "provider_type",
]

logger = logging.getLogger(__name__)

DEFAULT_TEMPLATE = "{{ text }}"
INSTALL_HINT = "pip install 'context-composer[mcp]'"

_T = TypeVar("_T")
_BLOCK_NAMES = frozenset({"text", "skipped"})
_CONTEXT = CONTEXT_NAMES
_BlockTemplate = Annotated[str, template_check(*_BLOCK_NAMES)]


class ServerConfig(StrictModel):
    """Where the MCP server is: a command started over stdio, or a streamable HTTP URL."""

    command: str | None = Field(
        default=None, description="Start the server as this program, spoken to over stdio."
    )
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Its environment, added to PATH, HOME, LOGNAME, SHELL, TERM and USER (the "
        "only variables it inherits): pass secrets here explicitly, as ${VAR}.",
    )
    cwd: ManifestPath | None = Field(
        default=None, description="Its working folder, relative to this manifest."
    )
    url: str | None = Field(
        default=None, description="Reach the server over streamable HTTP at this http(s) URL."
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="HTTP headers of every request (e.g. Authorization)."
    )
    connect_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="How long starting or reaching the server may take; past it the turn fails "
        "and the next one tries again.",
    )

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (stdio) or url (streamable HTTP)")
        if self.url is not None:
            if not self.url.lower().startswith(("http://", "https://")):
                raise ValueError("url must start with http:// or https://")
            if self.args or self.env or self.cwd is not None:
                raise ValueError("args, env and cwd go with command, not url")
        elif self.headers:
            raise ValueError("headers go with url, not command")
        return self

    def identity(self) -> str:
        """What makes two providers use the same server, and so the same session (hashed: it
        holds the secrets of ``env`` and ``headers``)."""
        fields: list[Any] = [self.command, self.args, self.env, str(self.cwd), self.url]
        fields += [self.headers, self.connect_timeout_s]
        raw = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


class PromptCall(StrictModel):
    """A prompt to get each turn."""

    name: Template = Field(description="The prompt's name (a template).")
    arguments: dict[str, Template] = Field(
        default_factory=dict, description="Its arguments; each value a template."
    )


class ToolCall(StrictModel):
    """A tool to call each turn."""

    name: Template = Field(description="The tool's name (a template).")
    arguments: dict[str, Any] = Field(
        default_factory=dict,
        description="Its arguments, as JSON data; each string in it is a template.",
    )

    @field_validator("arguments")
    @classmethod
    def _compile_arguments(cls, value: dict[str, Any]) -> dict[str, Any]:
        compile_json(value)
        return value


class McpConfig(ProviderConfig):
    """Read a resource, get a prompt or call a tool of an MCP server each turn."""

    type: Literal["mcp"] = "mcp"
    server: ServerConfig = Field(
        description="The server: {command, args, env, cwd} over stdio, or {url, headers}."
    )
    resource: UrlTemplate | None = Field(
        default=None,
        description="A resource URI to read (a template; each `{{ }}` output is "
        "percent-encoded, `/` included).",
    )
    prompt: PromptCall | None = Field(
        default=None, description="A prompt to get: {name, arguments}."
    )
    tool: ToolCall | None = Field(default=None, description="A tool to call: {name, arguments}.")
    separator: str = Field(default="\n", description="Between the text parts of the answer.")
    template: _BlockTemplate = Field(
        default=DEFAULT_TEMPLATE,
        description="The block; sees `text` (the joined text parts) and `skipped` (the types "
        "of the parts that were not text).",
    )

    @model_validator(mode="after")
    def _one_request(self) -> McpConfig:
        given = [kind for kind in ("resource", "prompt", "tool") if getattr(self, kind) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of resource, prompt or tool")
        return self


class McpSession:
    """One connected MCP client for one server, shared by every branch of a loaded manifest.

    A background task enters the SDK's ``Client`` and holds it open until ``aclose``; turns
    call through it from their own tasks. A connection found lost is discarded, and the next
    call starts a new one (a new child process, for stdio). Bound to the event loop that
    started it: on another loop (one ``asyncio.run`` per CLI command) it starts afresh.
    """

    def __init__(self, server: ServerConfig) -> None:
        self.server = server
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._ready: asyncio.Future[Client] | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        where = "stdio" if self.server.command is not None else "streamable HTTP"
        return f"<McpSession {where} {'open' if self.is_open else 'closed'}>"

    @property
    def is_open(self) -> bool:
        ready = self._ready
        return (
            ready is not None
            and ready.done()
            and not ready.cancelled()
            and (ready.exception() is None)
        )

    async def client(self) -> Client:
        """The connected client, starting the server (again) when there is none."""
        _require_sdk()
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the old loop took its session with it
            self._loop, self._lock = loop, asyncio.Lock()
            self._ready = self._stop = self._task = None
        async with self._lock:
            ready = self._ready
            if ready is None or (ready.done() and (ready.cancelled() or ready.exception())):
                ready = self._start()
        timeout = self.server.connect_timeout_s
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(ready)
        except TimeoutError:
            await self.discard(ready)
            raise ProviderError(f"the MCP server did not answer within {timeout:g} s") from None
        except ProviderError:
            raise
        except Exception as e:
            raise ProviderError(f"cannot start the MCP server: {_describe(e)}") from e

    def _start(self) -> asyncio.Future[Client]:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        ready.add_done_callback(_retrieved)  # a start nobody waits for any more is not an error
        stop = asyncio.Event()
        self._ready, self._stop = ready, stop
        self._task = asyncio.create_task(self._own(ready, stop), name="composer-mcp-session")
        return ready

    async def _own(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        """Enter the client, publish it, hold it until ``stop``; then leave it (this task
        entered the SDK's task groups, so this task must be the one that exits them)."""
        try:
            async with self._connected() as client:
                ready.set_result(client)
                await stop.wait()
        except Exception as e:
            if not ready.done():
                ready.set_exception(e)
            else:
                logger.debug("MCP session ended: %s", _describe(e))
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        finally:
            if not ready.done():
                ready.set_exception(ConnectionError("the MCP session ended"))

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[Client]:
        from mcp import Client, StdioServerParameters

        server = self.server
        if server.command is not None:
            params = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=dict(server.env) or None,
                cwd=server.cwd,
            )
            async with Client(params, cache=None) as client:
                yield client
            return
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        assert server.url is not None
        timeout = httpx2.Timeout(server.connect_timeout_s, read=300.0)
        async with (
            httpx2.AsyncClient(
                headers=dict(server.headers), trust_env=False, timeout=timeout
            ) as http,
            Client(streamable_http_client(server.url, http_client=http), cache=None) as client,
        ):
            yield client

    async def call(self, request: Callable[[Client], Awaitable[_T]], *, retry: bool) -> _T:
        """``request(client)``; a lost connection is discarded and, with ``retry``, the request
        is made once more on a new one."""
        attempts = 2 if retry else 1
        for attempt in range(1, attempts + 1):
            client = await self.client()
            ready = self._ready
            try:
                return await request(client)
            except Exception as e:
                if not _connection_lost(e):
                    raise
                if ready is not None:
                    await self.discard(ready)
                if attempt == attempts:
                    raise ProviderError(
                        f"the connection to the MCP server was lost: {_describe(e)}"
                    ) from e
                logger.info("MCP connection lost (%s); starting a new session", _describe(e))
        raise AssertionError("unreachable")

    async def discard(self, ready: asyncio.Future[Client]) -> None:
        """Stop the session that ``ready`` belongs to, if it is still the current one."""
        if ready is self._ready:
            self._stop_session()

    def _stop_session(self) -> asyncio.Task[None] | None:
        """Ask the owner task to leave: at once when connected, by cancelling it while it is
        still starting (a server that never answers would otherwise hold it)."""
        task, stop, ready = self._task, self._stop, self._ready
        self._ready = self._stop = self._task = None
        if stop is not None:
            stop.set()
        if task is not None and ready is not None and not ready.done():
            task.cancel()
        return task

    async def aclose(self) -> None:
        """Leave the client (stopping a stdio server) and wait for it; safe to call again."""
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            self._ready = self._stop = self._task = None  # its loop is gone, and the session
            return
        task = self._stop_session()
        if task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await task


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as e:
        raise ProviderError(f"the MCP SDK is not installed: {INSTALL_HINT}") from e


def _connection_lost(error: Exception) -> bool:
    """Whether ``error`` says the session is gone, rather than that the server answered no."""
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    return not isinstance(error, MCPError) or error.code == CONNECTION_CLOSED


def _describe(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


_PART_NAMES = {
    "ImageContent": "image",
    "AudioContent": "audio",
    "ResourceLink": "resource_link",
    "BlobResourceContents": "blob",
}


def _texts(parts: list[Any]) -> tuple[list[str], list[str]]:
    """The text of each text part (an embedded text resource counts), and the types skipped."""
    from mcp_types import EmbeddedResource, TextContent, TextResourceContents

    texts: list[str] = []
    skipped: list[str] = []
    for part in parts:
        inner = part.resource if isinstance(part, EmbeddedResource) else part
        if isinstance(inner, TextContent | TextResourceContents):
            texts.append(inner.text)
        else:
            name = type(inner).__name__
            skipped.append(_PART_NAMES.get(name, name))
    return texts, skipped


_Request = tuple[Literal["resource", "prompt", "tool"], str, dict[str, Any]]


class McpProvider(Provider[McpConfig]):
    """One MCP request per turn through the manifest's shared session for its server."""

    def __init__(self, config: McpConfig, session: McpSession) -> None:
        super().__init__(config)
        self.config: McpConfig = config
        self.session = session
        self._resource = compile_template(config.resource, url=True) if config.resource else None
        call = config.prompt or config.tool
        self._name = compile_template(call.name) if call is not None else None
        self._prompt_args = {
            key: compile_template(value)
            for key, value in (config.prompt.arguments if config.prompt else {}).items()
        }
        self._tool_args = compile_json(config.tool.arguments) if config.tool else None
        self._template = compile_template(config.template, _BLOCK_NAMES | _CONTEXT)

    def __repr__(self) -> str:
        return f"<McpProvider {self.name!r} {self._kind} via {self.session!r}>"

    @property
    def _kind(self) -> Literal["resource", "prompt", "tool"]:
        if self._resource is not None:
            return "resource"
        return "prompt" if self.config.prompt is not None else "tool"

    def _request(self, context: Mapping[str, Any]) -> _Request:
        if self._resource is not None:
            return "resource", self._resource.render(context), {}
        assert self._name is not None
        name = self._name.render(context)
        if self.config.prompt is not None:
            args = {key: t.render(context) for key, t in self._prompt_args.items()}
            return "prompt", name, args
        return "tool", name, render_json(self._tool_args, context)

    def cache_key(self, branch: Any, instruction: Any) -> str:
        """The rendered request: what a ``cache`` keys on."""
        kind, target, arguments = self._request(self.context(branch, instruction))
        return json.dumps([kind, target, arguments], sort_keys=True, default=str)

    async def warm_up(self, progress: Progress | None = None) -> None:
        """Start (or reach) the server ahead of the first turn."""
        await self.session.client()

    async def produce(self, branch: Any, instruction: Any, context: dict[str, Any]) -> str | None:
        kind, target, arguments = self._request(context)
        try:
            if kind == "resource":
                resource = await self.session.call(lambda c: c.read_resource(target), retry=True)
                parts: list[Any] = list(resource.contents)
            elif kind == "prompt":
                prompt = await self.session.call(
                    lambda c: c.get_prompt(target, arguments), retry=True
                )
                parts = [message.content for message in prompt.messages]
            else:
                result = await self.session.call(
                    lambda c: c.call_tool(target, arguments), retry=False
                )
                parts = list(result.content)
                if result.is_error:
                    texts, _ = _texts(parts)
                    detail = texts[0].strip().splitlines()[0] if texts and texts[0].strip() else ""
                    raise ProviderError(f"mcp {self.name!r}: tool {target!r} failed: {detail}")
        except ProviderError as e:
            if str(e).startswith(f"mcp {self.name!r}"):
                raise
            raise ProviderError(f"mcp {self.name!r}: {kind} {target!r}: {e}") from e
        except Exception as e:
            raise ProviderError(f"mcp {self.name!r}: {kind} {target!r}: {_describe(e)}") from e
        texts, skipped = _texts(parts)
        if skipped:
            logger.info(
                "mcp %r: skipped %d part(s) that are not text: %s",
                self.name,
                len(skipped),
                ", ".join(skipped),
            )
        text = self.config.separator.join(texts)
        return self._template.render({**context, "text": text, "skipped": skipped})


def _factory(config: McpConfig, context: BuildContext) -> McpProvider:
    server = config.server
    session: McpSession = context.shared(f"mcp:{server.identity()}", lambda: McpSession(server))
    return McpProvider(config, session)


provider_type = ProviderType(
    "mcp", McpConfig, _factory, "A resource, prompt or tool of an MCP server, per turn."
)
