"""Serve composed context to any agent: ``composer serve`` (the ``serve`` extra).

* ``service``: one manifest, branches by id (``composer.branches``), turns, writebacks;
* ``http``: the HTTP context server (Starlette on uvicorn), with ``auth``, ``guard``,
  ``limits`` (bodies, clients), ``rates`` (the rate limits, counted in the state store),
  ``responses``, its body ``models`` and its ``openapi`` document;
* ``mcp_server``: the same turn as an MCP server, over stdio or streamable HTTP;
* ``options``: ``ServeOptions``, how both servers guard themselves;
* ``runner``: listening (loopback unless there is a token) and graceful shutdown;
* ``state/``: what the server remembers of each branch (turn counts, last context) and where
  its rate limits count: in the process, or shared by replicas in PostgreSQL or Redis, one
  module per back-end, the one a URL names opened by ``state.open_state``;
* ``workers``: ``--workers N`` processes on one socket.

``async with ContextService(manifest) as service:`` closes every branch's registry and then
the manifest on the way out: the service takes the manifest it is given, as the servers take
the service (their shutdown closes it).

Importing this package imports neither Starlette nor the MCP SDK; its modules do.
"""

from composer.branches import BranchEntry, BranchStore
from composer.serve.service import ContextService

__all__ = ["BranchEntry", "BranchStore", "ContextService"]
