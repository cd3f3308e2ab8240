"""The same turn as an MCP server (the official ``mcp`` SDK), over stdio or streamable HTTP.

* prompt ``compose(instruction, system?, branch?, guidance?, metadata?)``: runs one turn on the
  branch and returns user messages: the composed text (system + injected blocks + guidance,
  exactly what ``composer preview`` prints for the same system text), with ``stable_prefix``
  placement the turn's context block, and the instruction;
* resource template ``composer://branches/{branch_id}/context``: the composed text of that
  branch's last turn, for the caller's own branches only (with ``--state``, whichever replica
  served it);
* tool ``preview_turn(instruction, system?, branch?, guidance?, metadata?)``: runs one turn and
  returns the guidance and the report (the ADR's four lists and the typed outcomes) as
  structured data.

Every call is made for a principal: over streamable HTTP the one the request's bearer token
authenticated (``composer.serve.auth``), over stdio the server's one principal. ``metadata``
(a JSON object; text for the prompt, whose arguments are strings) is bound like a turn's over
HTTP: a key bound to the principal may not be stated otherwise.

MCP has no system role: the client has its own system prompt. So ``system`` defaults to the
empty text, which still calls every provider (ADR-0008 D4 skips them only without a system
text) and makes the composed text just the injected blocks and the guidance.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer, UserMessage
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import INVALID_PARAMS, GetPromptResult
from pydantic import Field, ValidationError

from composer._version import __version__
from composer.errors import RequestRefused, ServeError
from composer.principal import Principal
from composer.serve.auth import is_loopback, principal_of
from composer.serve.models import BranchIn, InstructionIn, TurnRequest
from composer.serve.options import ServeOptions
from composer.serve.principals import LOCAL_PRINCIPAL
from composer.serve.service import ContextService

if TYPE_CHECKING:
    from mcp.types import InputRequiredResult
    from starlette.routing import BaseRoute

__all__ = ["DEFAULT_BRANCH", "RESOURCE_TEMPLATE", "mcp_http_routes", "mcp_server", "run_stdio"]

DEFAULT_BRANCH = "mcp"
RESOURCE_TEMPLATE = "composer://branches/{branch_id}/context"

_INSTRUCTIONS = (
    "composer composes the pre-turn context an ops team declared in a manifest. Get the "
    "`compose` prompt with the user's instruction for the context to put before it; "
    "`preview_turn` shows which providers fired, were skipped or failed."
)

# What each argument of the prompt and the tool means, as a client lists it.
_Instruction = Annotated[
    str, Field(description="The user's instruction: what the context is composed for.")
]
_System = Annotated[
    str,
    Field(
        description="The system text the model will see before the context (default: none; "
        "MCP has no system role)."
    ),
]
_BranchId = Annotated[
    str,
    Field(
        description="The conversation's branch id: turns on the same id share history "
        f"(default: {DEFAULT_BRANCH!r})."
    ),
]
_GUIDANCE = "Extra guidance appended after the injected blocks (default: none)."
_METADATA = (
    'The branch\'s metadata, a JSON object (e.g. {"team": "a"}) the manifest\'s templates '
    "and `when` conditions read; keys bound to the caller may not be stated otherwise."
)


class _Server(MCPServer):
    """An MCPServer that answers a prompt called without a required argument as the client's
    mistake (INVALID_PARAMS, nothing logged), not as an internal error logged with a
    traceback, which is what the SDK does."""

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Any = None
    ) -> GetPromptResult | InputRequiredResult:
        for prompt in await self.list_prompts():
            if prompt.name == name:
                given = arguments or {}
                missing = [
                    a.name for a in prompt.arguments or () if a.required and a.name not in given
                ]
                if missing:
                    raise _invalid(f"missing required argument: {', '.join(missing)}")
        return await super().get_prompt(name, arguments, context)


def _invalid(message: str) -> MCPError:
    """A client's mistake, answered as such (INVALID_PARAMS) and not logged by the SDK."""
    return MCPError(INVALID_PARAMS, message)


def mcp_server(service: ContextService, *, principal: Principal | None = None) -> MCPServer:
    """An MCPServer whose prompt, resource template and tool run turns on ``service``.

    ``principal`` is the caller of a stdio server; over HTTP each request's own is used.
    """
    server: MCPServer = _Server(
        "composer", version=__version__, instructions=_INSTRUCTIONS, log_level="WARNING"
    )
    fixed = principal

    def caller(ctx: Context) -> Principal:
        """The request's principal: the HTTP request's, else the stdio server's."""
        scope = getattr(ctx.request_context.request, "scope", None)
        if isinstance(scope, dict):
            return principal_of(scope)
        return fixed if fixed is not None else LOCAL_PRINCIPAL

    async def run(
        ctx: Context,
        instruction: str,
        system: str,
        branch: str,
        guidance: str | None,
        metadata: dict[str, Any] | None,
        refuse: Callable[[str], Exception] = ToolError,
    ) -> Any:
        """One turn; a client's mistake raised as ``refuse`` (a tool's error result, or a
        prompt's INVALID_PARAMS)."""
        try:
            request = TurnRequest(
                branch=BranchIn(id=branch, metadata=metadata or {}),
                system=system,
                instruction=InstructionIn(text=instruction, guidance=guidance or None),
            )
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}"
                for item in e.errors(include_url=False, include_input=False)
            )
            raise refuse(f"invalid arguments: {problems}") from None
        try:
            return await service.turn(request, caller(ctx))
        except RequestRefused as e:
            raise refuse(str(e)) from None

    @server.prompt(
        name="compose",
        title="Composed context",
        description="The manifest's context for this instruction, then the instruction.",
    )
    async def compose(
        ctx: Context,
        instruction: _Instruction,
        system: _System = "",
        branch: _BranchId = DEFAULT_BRANCH,
        guidance: Annotated[str, Field(description=_GUIDANCE)] = "",
        metadata: Annotated[str, Field(description=_METADATA)] = "",
    ) -> list[UserMessage]:
        given = _metadata(metadata)
        turn = await run(ctx, instruction, system, branch, guidance, given, refuse=_invalid)
        messages = [UserMessage(turn["guidance"] or "")]
        if turn.get("context"):  # stable_prefix: the turn's own blocks, just before its text
            messages.append(UserMessage(turn["context"]))
        return [*messages, UserMessage(instruction)]

    @server.resource(
        RESOURCE_TEMPLATE,
        name="branch_context",
        title="A branch's composed context",
        description="The composed text (system + injected blocks + guidance) of the branch's "
        "last turn; only the caller's own branches.",
        mime_type="text/plain",
    )
    async def branch_context(branch_id: str, ctx: Context) -> str:
        try:
            last = await service.last_turn(branch_id, caller(ctx))
        except RequestRefused as e:
            raise ResourceNotFoundError(str(e)) from None
        if last is None or last.guidance is None:
            raise ResourceNotFoundError(f"branch {branch_id!r} has no composed turn yet")
        return service.manifest.redact(last.guidance)

    @server.tool(
        name="preview_turn",
        title="Preview a turn",
        description="Run one turn and return the composed guidance and the provider report.",
    )
    async def preview_turn(
        ctx: Context,
        instruction: _Instruction,
        system: _System = "",
        branch: _BranchId = DEFAULT_BRANCH,
        guidance: Annotated[str | None, Field(description=_GUIDANCE)] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description=_METADATA)] = None,
    ) -> dict[str, Any]:
        result: dict[str, Any] = await run(ctx, instruction, system, branch, guidance, metadata)
        return result

    return server


def _metadata(text: str) -> dict[str, Any] | None:
    """The prompt's ``metadata`` argument (text, as every prompt argument is): a JSON object."""
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise _invalid('metadata must be a JSON object, e.g. {"team": "a"}')
    return value


def mcp_http_routes(service: ContextService, options: ServeOptions) -> tuple[list[BaseRoute], Any]:
    """The ``/mcp`` route for the HTTP server, and the session manager its lifespan runs.

    Stateless: the server keeps no conversation, so each request is served on its own and
    no session is kept between requests (a client opening thousands of sessions holds
    nothing, and any replica can answer any request).

    On a loopback address the SDK's DNS-rebinding guard stays on (a web page cannot reach
    the server through a name that resolves to 127.0.0.1); elsewhere the bearer token, which
    ``composer serve`` requires there, is the guard.
    """
    server = mcp_server(service)
    security = None
    if not is_loopback(options.host):
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,  # nothing needs a session: no table for clients to fill
        max_request_body_size=options.max_body_bytes,
        transport_security=security,
        host=options.host if options.host != "localhost" else "127.0.0.1",
    )
    return list(app.routes), server.session_manager


async def run_stdio(service: ContextService, principal: Principal | None = None) -> None:
    """Serve MCP on stdin/stdout, for ``principal``, until the client leaves; then close the
    service (a server owns the service it serves, as the HTTP app's lifespan does).
    ``ServeError`` for a manifest whose audit lines go to standard output: MCP's own stream."""
    audit = service.manifest.runtime.audit
    if audit is not None and audit.stdout:
        await service.aclose()
        raise ServeError(
            "runtime.audit.stdout would write into the MCP stream on standard output: "
            "audit to a path or to postgres when serving over --mcp-stdio"
        )
    server = mcp_server(service, principal=principal)
    warming = asyncio.create_task(service.run_background())
    try:
        await server.run_stdio_async()
    finally:
        warming.cancel()
        await asyncio.gather(warming, return_exceptions=True)
        await service.aclose()
