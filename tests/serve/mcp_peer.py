"""A small MCP server written with the SDK: the peer the ``mcp`` provider type is tested against.

``python mcp_peer.py stdio`` serves on stdin/stdout; ``python mcp_peer.py http`` listens on a
free port of 127.0.0.1 and prints ``port <n>`` on stdout. With ``PID_FILE`` set it writes its
process id there, so a test can kill it.
"""

from __future__ import annotations

import base64
import os
import socket
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent

PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()

server: MCPServer = MCPServer("peer", log_level="WARNING")


@server.resource("notes://{topic}", mime_type="text/plain")
def notes(topic: str) -> str:
    """Notes on a topic."""
    return f"Notes on {topic}: restart the worker first."


@server.resource("env://{name}", mime_type="text/plain")
def env(name: str) -> str:
    """One variable of this server's environment."""
    return os.environ.get(name, "(unset)")


@server.resource("blob://image", mime_type="image/png")
def blob() -> bytes:
    """A resource that is not text."""
    return b"\x89PNG\r\n\x1a\n"


@server.prompt()
def brief(topic: str, tone: str = "plain") -> str:
    """A briefing on a topic."""
    return f"Brief ({tone}) on {topic}."


@server.tool()
def lookup(query: str, limit: int = 1) -> str:
    """Look something up."""
    return f"Found {limit} for {query}."


@server.tool()
def mixed() -> list[TextContent | ImageContent]:
    """Text and an image."""
    return [
        TextContent(type="text", text="A chart follows."),
        ImageContent(type="image", data=PIXEL, mime_type="image/png"),
    ]


@server.tool()
def broken() -> str:
    """Always fails."""
    raise ToolError("the index is offline\nsecond line")


def main() -> None:
    if os.environ.get("PID_FILE"):
        with open(os.environ["PID_FILE"], "w", encoding="utf-8") as file:
            file.write(str(os.getpid()))
    if sys.argv[1:] == ["http"]:
        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)  # connections wait in the backlog until uvicorn accepts them
        print(f"port {sock.getsockname()[1]}", flush=True)
        config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
        uvicorn.Server(config).run(sockets=[sock])
    else:
        server.run()


if __name__ == "__main__":
    main()
