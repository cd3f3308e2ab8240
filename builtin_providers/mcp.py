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
closes it.

A hostile or broken server is bounded by default: each message it sends is capped
(``max_response_bytes``, in the transport: ``_mcp_stdio``, ``_mcp_http``), each request has a
deadline (``request_timeout_s``), and a session that broke either is closed, so the next turn
starts afresh. A stdio server runs in its own process group and is stopped with it, and dies
with composer. Errors name what failed (refused, HTTP status, exit code and last stderr line).
The MCP SDK (the ``mcp`` extra) is imported on first use, so a manifest without an
``mcp`` provider never needs it, and without it this provider fails each turn with a
ProviderError that says what to install.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field, field_validator, model_validator

from builtin_providers._json_templates import compile_json, render_json
from builtin_providers._mcp_link import Link, describe
from composer.plugin import (
    CONTEXT_NAMES,
    BuildContext,
    ManifestPath,
    Problem,
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
    "INSTALL_HINT",
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

_CLOSE_S = 5.0
"""How long ``aclose`` waits for the sessions to stop (each stops within a few seconds)
before it cancels what is left."""

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
        description="How long a turn waits for the server to start or answer its first "
        "request; past it the turn fails, and the server is left starting for a later turn.",
    )
    max_response_bytes: int = Field(
        default=1 << 20,
        ge=1,
        description="The largest message the server may send (a stdout line over stdio, a "
        "response body over HTTP); a larger one fails the request and closes the session.",
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
        fields += [self.headers, self.connect_timeout_s, self.max_response_bytes]
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
    request_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="One deadline for the request (after the server is up); past it the "
        "request fails and the session is closed, so the next turn starts a new one.",
    )
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

    def check(self) -> list[Problem]:
        """The MCP SDK is installed (the ``mcp`` extra), ``server.command`` is a program this
        machine can run (on the PATH the server will get, or a path from its ``cwd``), and
        ``server.cwd`` is a folder. Nothing is started."""
        problems = Problem.unless_installed(("type",), "mcp", "mcp", "mcp_types")
        return problems + self._command_problems()

    def _command_problems(self) -> list[Problem]:
        server = self.server
        if server.command is None:
            return []
        cwd = Path(server.cwd) if server.cwd is not None else None
        if cwd is not None and not cwd.is_dir():
            return [Problem(("server", "cwd"), f"no such folder: {cwd}")]
        command = server.command
        if os.sep in command:
            path = (cwd or Path.cwd()) / command
            if not path.is_file():
                return [Problem(("server", "command"), f"no such file: {path}")]
            if not os.access(path, os.X_OK):
                return [Problem(("server", "command"), f"not executable: {path}")]
            return []
        search = server.env.get("PATH", os.environ.get("PATH", os.defpath))
        if shutil.which(command, path=search) is None:
            return [Problem(("server", "command"), f"no such command on PATH: {command}")]
        return []


@dataclass
class _Connection:
    """One attempt at a session: its link, the client once connected (``ready``), the
    signal to leave (``stop``) and the background task that owns it."""

    link: Link
    ready: asyncio.Future[Client]
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def failed(self) -> bool:
        ready = self.ready
        return self.link.fault is not None or (
            ready.done() and (ready.cancelled() or ready.exception() is not None)
        )


class McpSession:
    """One connected MCP client for one server, shared by every branch of a loaded manifest.

    A background task enters the SDK's ``Client`` and holds it open until it is stopped;
    turns call through it from their own tasks. A connection that is lost, that broke a bound
    or whose request ran past its deadline is discarded, and the next call starts a new one
    (a new child process, for stdio). A start slower than ``connect_timeout_s`` fails that
    turn but goes on, so a later turn finds the server up instead of starting it again. Bound
    to the event loop that started it: on another loop (one ``asyncio.run`` per CLI command)
    it starts afresh.
    """

    def __init__(self, server: ServerConfig, label: str = "mcp") -> None:
        self.server = server
        self.label = label
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._current: _Connection | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        where = "stdio" if self.server.command is not None else "streamable HTTP"
        return f"<McpSession {where} {'open' if self.is_open else 'closed'}>"

    @property
    def is_open(self) -> bool:
        current = self._current
        return current is not None and current.ready.done() and not current.failed

    async def client(self) -> Client:
        """The connected client, starting the server (again) when there is none."""
        return (await self._connection()).ready.result()

    async def _connection(self) -> _Connection:
        _require_sdk()
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the old loop took its session with it
            self._loop, self._lock = loop, asyncio.Lock()
            self._current, self._tasks = None, set()
        async with self._lock:
            current = self._current
            if current is None or current.failed:
                if current is not None:
                    self._drop(current)
                current = self._start()
        timeout = self.server.connect_timeout_s
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(current.ready)
        except TimeoutError:
            raise ProviderError(
                f"the MCP server did not start within {timeout:g} s (it is left starting: "
                "a later turn uses it once it is up)"
            ) from None
        except Exception as e:
            raise ProviderError(f"cannot start the MCP server: {current.link.explain(e)}") from e
        return current

    def _start(self) -> _Connection:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        ready.add_done_callback(_retrieved)  # a start nobody waits for any more is not an error
        link = self._link()
        current = _Connection(link, ready)
        link.on_end = lambda: self._ended(current)
        self._current = current
        current.task = asyncio.create_task(self._own(current), name="composer-mcp-session")
        self._tasks.add(current.task)
        current.task.add_done_callback(self._tasks.discard)
        return current

    def _link(self) -> Link:
        server = self.server
        if server.command is not None:
            from builtin_providers._mcp_stdio import StdioLink

            return StdioLink(
                server.command,
                list(server.args),
                dict(server.env),
                server.cwd,
                label=self.label,
                max_line_bytes=server.max_response_bytes,
            )
        from builtin_providers._mcp_http import HttpLink

        assert server.url is not None
        return HttpLink(
            server.url,
            dict(server.headers),
            connect_timeout_s=server.connect_timeout_s,
            max_bytes=server.max_response_bytes,
        )

    async def _own(self, current: _Connection) -> None:
        """Enter the client, publish it, hold it until ``stop``; then leave it (this task
        entered the SDK's task groups, so this task must be the one that exits them)."""
        from mcp import Client

        ready = current.ready
        try:
            async with Client(current.link.transport(), cache=None) as client:
                ready.set_result(client)
                await current.stop.wait()
        except Exception as e:
            if not ready.done():
                ready.set_exception(e)
            else:
                logger.debug("%s: MCP session ended: %s", self.label, current.link.explain(e))
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        finally:
            if not ready.done():
                ready.set_exception(ConnectionError("the MCP session ended"))
            if self._current is current:
                self._current = None

    def _ended(self, current: _Connection) -> None:
        """The link found the server gone: the next call starts a new session at once
        (a start in progress fails on its own, naming why)."""
        if self._current is current and current.ready.done():
            self._current = None
        current.stop.set()

    def _drop(self, current: _Connection) -> None:
        """Stop the session ``current``: at once when connected, by cancelling its task
        while it is still starting (a server that never answers would otherwise hold it)."""
        if self._current is current:
            self._current = None
        current.stop.set()
        if not current.ready.done() and current.task is not None:
            current.task.cancel()

    async def call(
        self, request: Callable[[Client], Awaitable[_T]], *, retry: bool, timeout: float
    ) -> _T:
        """``request(client)`` within ``timeout`` seconds. A session that ran out of time,
        broke a bound or lost its connection is discarded; with ``retry``, a request cut by
        a lost connection is made once more on a new one."""
        attempts = 2 if retry else 1
        for attempt in range(1, attempts + 1):
            current = await self._connection()
            client = current.ready.result()
            try:
                async with asyncio.timeout(timeout):
                    return await request(client)
            except TimeoutError:
                self._drop(current)
                raise ProviderError(
                    f"no answer within {timeout:g} s (the session is closed; the next turn "
                    "starts a new one)"
                ) from None
            except Exception as e:
                fault = current.link.fault
                if fault is not None:
                    self._drop(current)
                    raise ProviderError(f"{fault}; the session is closed") from e
                if not (_connection_lost(e) or current.stop.is_set()):
                    raise  # the server answered no, on a session that is still open
                self._drop(current)
                if attempt == attempts:
                    raise ProviderError(
                        f"the connection to the MCP server was lost: {current.link.explain(e)}"
                    ) from e
                logger.info(
                    "%s: MCP connection lost (%s); starting a new session",
                    self.label,
                    current.link.explain(e),
                )
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """Stop every session this object started and wait for them (each stops its server
        within a few seconds); safe to call again."""
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            self._current, self._tasks = None, set()  # its loop is gone, and the sessions
            return
        if self._current is not None:
            self._drop(self._current)
        tasks = set(self._tasks)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=_CLOSE_S)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=_CLOSE_S)


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
        timeout = self.config.request_timeout_s
        session = self.session
        try:
            if kind == "resource":
                resource = await session.call(
                    lambda c: c.read_resource(target), retry=True, timeout=timeout
                )
                parts: list[Any] = list(resource.contents)
            elif kind == "prompt":
                prompt = await session.call(
                    lambda c: c.get_prompt(target, arguments), retry=True, timeout=timeout
                )
                parts = [message.content for message in prompt.messages]
            else:
                result = await session.call(
                    lambda c: c.call_tool(target, arguments), retry=False, timeout=timeout
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
            raise ProviderError(f"mcp {self.name!r}: {kind} {target!r}: {describe(e)}") from e
        texts, skipped = _texts(parts)
        if skipped:
            logger.info(
                "mcp %r: skipped %d %s that %s not text: %s",
                self.name,
                len(skipped),
                "part" if len(skipped) == 1 else "parts",
                "is" if len(skipped) == 1 else "are",
                ", ".join(skipped),
            )
        text = self.config.separator.join(texts)
        return self._template.render({**context, "text": text, "skipped": skipped})


def _factory(config: McpConfig, context: BuildContext) -> McpProvider:
    server = config.server
    label = f"mcp {config.name!r}"
    session = context.shared(f"mcp:{server.identity()}", lambda: McpSession(server, label))
    return McpProvider(config, session)


provider_type = ProviderType(
    "mcp", McpConfig, _factory, "A resource, prompt or tool of an MCP server, per turn."
)
