"""The same turn as an MCP server (the official ``mcp`` SDK), over stdio or streamable HTTP.

* prompt ``compose(instruction, system?, branch?, guidance?)``: runs one turn on the branch and
  returns two user messages, the composed text (system + injected blocks + guidance, exactly
  what ``composer preview`` prints for the same system text) and the instruction;
* resource template ``composer://branches/{branch_id}/context``: the composed text of that
  branch's last turn;
* tool ``preview_turn(instruction, system?, branch?, guidance?)``: runs one turn and returns
  the guidance and the report (the ADR's four lists and the typed outcomes) as structured data.

MCP has no system role: the client has its own system prompt. So ``system`` defaults to the
empty text, which still calls every provider (ADR-0008 D4 skips them only without a system
text) and makes the composed text just the injected blocks and the guidance.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer, UserMessage
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.transport_security import TransportSecuritySettings

from composer import __version__
from composer.serve.auth import is_loopback
from composer.serve.models import BranchIn, InstructionIn, TurnRequest
from composer.serve.service import ContextService

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from composer.serve.http import ServeOptions

__all__ = ["DEFAULT_BRANCH", "RESOURCE_TEMPLATE", "mcp_http_routes", "mcp_server", "run_stdio"]

DEFAULT_BRANCH = "mcp"
RESOURCE_TEMPLATE = "composer://branches/{branch_id}/context"

_INSTRUCTIONS = (
    "composer composes the pre-turn context an ops team declared in a manifest. Get the "
    "`compose` prompt with the user's instruction for the context to put before it; "
    "`preview_turn` shows which providers fired, were skipped or failed."
)


def mcp_server(service: ContextService) -> MCPServer:
    """An MCPServer whose prompt, resource template and tool run turns on ``service``."""
    server: MCPServer = MCPServer(
        "composer", version=__version__, instructions=_INSTRUCTIONS, log_level="WARNING"
    )

    async def run(instruction: str, system: str, branch: str, guidance: str | None) -> Any:
        request = TurnRequest(
            branch=BranchIn(id=branch),
            system=system,
            instruction=InstructionIn(text=instruction, guidance=guidance or None),
        )
        return await service.turn(request)

    @server.prompt(
        name="compose",
        title="Composed context",
        description="The manifest's context for this instruction, then the instruction.",
    )
    async def compose(
        instruction: str, system: str = "", branch: str = DEFAULT_BRANCH, guidance: str = ""
    ) -> list[UserMessage]:
        turn = await run(instruction, system, branch, guidance)
        return [UserMessage(turn["guidance"] or ""), UserMessage(instruction)]

    @server.resource(
        RESOURCE_TEMPLATE,
        name="branch_context",
        title="A branch's composed context",
        description="The composed text (system + injected blocks + guidance) of the branch's "
        "last turn.",
        mime_type="text/plain",
    )
    def branch_context(branch_id: str) -> str:
        text = service.last_guidance(branch_id)
        if text is None:
            raise ResourceNotFoundError(f"branch {branch_id!r} has no composed turn yet")
        return text

    @server.tool(
        name="preview_turn",
        title="Preview a turn",
        description="Run one turn and return the composed guidance and the provider report.",
    )
    async def preview_turn(
        instruction: str,
        system: str = "",
        branch: str = DEFAULT_BRANCH,
        guidance: str | None = None,
    ) -> dict[str, Any]:
        result: dict[str, Any] = await run(instruction, system, branch, guidance)
        return result

    return server


def mcp_http_routes(service: ContextService, options: ServeOptions) -> tuple[list[BaseRoute], Any]:
    """The ``/mcp`` route for the HTTP server, and the session manager its lifespan runs.

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
        max_request_body_size=options.max_body_bytes,
        transport_security=security,
        host=options.host if options.host != "localhost" else "127.0.0.1",
    )
    return list(app.routes), server.session_manager


async def run_stdio(service: ContextService) -> None:
    """Serve MCP on stdin/stdout until the client leaves; then close every provider."""
    server = mcp_server(service)
    warming = asyncio.create_task(service.run_background())
    try:
        await server.run_stdio_async()
    finally:
        warming.cancel()
        await asyncio.gather(warming, return_exceptions=True)
        await service.aclose()
