"""The HTTP context server: a Starlette app over one ``ContextService``.

Routes: ``POST /v1/turns``, ``POST /v1/branches/{id}/writeback``, ``GET /v1/manifest``,
``GET /healthz``, ``GET /readyz``, ``GET /openapi.json``, and the MCP server over streamable
HTTP at ``/mcp``. Every answer is JSON, errors too (``422`` bad body, ``401`` no token,
``403`` a bound metadata key stated otherwise, ``409`` a writeback for a branch the server does
not know, ``404``, ``405``, ``413`` too large, ``415`` not JSON, ``429`` too many, ``503`` the
state store down, ``500`` without a traceback).
Middleware, outermost first: the request's span (with traces), the access log (when asked),
the request guard (no foreign Host
on loopback, no foreign Origin), the rate limits for all clients and per client, the bearer
token, which names the request's principal, the rate limit per principal, then JSON bodies
only (after the token: a wrong token is a ``401`` whatever its body's type). The rate limits
count in the service's state store (``composer.serve.rates``). Health, readiness and the
OpenAPI document are open: they say nothing of the manifest. The lifespan starts the MCP session manager, the manifest's reloader when it follows its
files (``composer.serve.reloading``), the providers' warm-up and the sweep of idle branches, and on shutdown closes every branch's registry and the manifest's shared
state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Scope

from composer.errors import RequestRefused
from composer.serve.access import TURN_ID_KEY, AccessLog
from composer.serve.auth import BearerAuth, is_loopback, principal_of
from composer.serve.guard import JsonBodies, RequestGuard
from composer.serve.limits import read_body
from composer.serve.models import (
    BRANCH_ID_PATTERN,
    MAX_ACTION_RESPONSES,
    TurnRequest,
    WritebackRequest,
)
from composer.serve.openapi import openapi_document
from composer.serve.options import CONSOLE_PREFIX, ServeOptions
from composer.serve.principals import Principals
from composer.serve.rates import RateLimit
from composer.serve.responses import JsonResponse, error_response
from composer.serve.service import ContextService
from composer.serve.telemetry import flush_traces

__all__ = ["CLOSE_S", "OPEN_PATHS", "ServeOptions", "create_app"]

logger = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json"})
"""Answered without a token and never rate limited: probes and the API's own description."""

_BODIES = ("/v1/turns", "/v1/branches/", "/mcp")
"""The routes that take a POST body: it must be JSON (other paths answer 405 to a POST)."""
_STATUS_TYPES = {404: "not_found", 405: "method_not_allowed"}
_Model = TypeVar("_Model", bound=BaseModel)


def create_app(service: ContextService, options: ServeOptions | None = None) -> Starlette:
    """The ASGI app serving ``service``; run it with uvicorn (``composer serve`` does)."""
    options = options or ServeOptions()
    limit = options.max_body_bytes

    async def parse(request: Request, model: type[_Model]) -> _Model | Response:
        """The body as ``model``, or the 413 or 422 answer."""
        body = await read_body(request, limit)
        if isinstance(body, Response):
            return body
        try:
            return model.model_validate_json(body)
        except ValidationError as e:
            return _invalid(e)

    async def turn(request: Request) -> Response:
        parsed = await parse(request, TurnRequest)
        if isinstance(parsed, Response):
            return parsed
        try:
            answer = await service.turn(parsed, principal_of(request.scope))
        except RequestRefused as e:
            return error_response(e.status, e.kind, str(e))
        request.scope[TURN_ID_KEY] = (answer.get("report") or {}).get("turn_id")
        return JsonResponse(answer)

    async def writeback(request: Request) -> Response:
        branch_id = request.path_params["branch_id"]
        if not _BRANCH_ID.fullmatch(branch_id):
            return error_response(422, "invalid_body", f"a branch id matches {BRANCH_ID_PATTERN}")
        parsed = await parse(request, WritebackRequest)
        if isinstance(parsed, Response):
            return parsed
        if len(parsed.action_responses) > MAX_ACTION_RESPONSES:
            message = f"more than {MAX_ACTION_RESPONSES} action responses in one writeback"
            return error_response(413, "too_large", message)
        try:
            status, body = await service.writeback(branch_id, parsed, principal_of(request.scope))
        except RequestRefused as e:
            return error_response(e.status, e.kind, str(e))
        return JsonResponse(body, status_code=status)

    async def manifest(request: Request) -> Response:
        return JsonResponse(service.manifest_document())

    async def health(request: Request) -> Response:
        return JsonResponse({"status": "ok"})

    async def ready(request: Request) -> Response:
        if service.draining:  # stopping: no store to ask, the load balancer must let go
            return JsonResponse(service.readiness().model_dump(mode="json"), status_code=503)
        await service.check_state()
        readiness = service.readiness()
        status = 200 if readiness.status == "ready" else 503
        return JsonResponse(readiness.model_dump(mode="json"), status_code=status)

    document = openapi_document()

    async def openapi(request: Request) -> Response:
        mounted = request.scope.get("root_path", "")
        if not mounted:
            return JsonResponse(document)
        return JsonResponse({**document, "servers": [{"url": mounted}]})  # paths below it

    routes: list[BaseRoute] = [
        Route("/v1/turns", turn, methods=["POST"]),
        Route("/v1/branches/{branch_id}/writeback", writeback, methods=["POST"]),
        Route("/v1/manifest", manifest, methods=["GET"]),
        Route("/healthz", health, methods=["GET"]),
        Route("/readyz", ready, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
    session_manager: Any = None
    if options.mcp:
        from composer.serve.mcp_server import mcp_http_routes

        mcp_routes, session_manager = mcp_http_routes(service, options)
        routes.extend(mcp_routes)
    if options.console is not None:
        routes.append(options.console)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if options.traces:  # last of all: the spans of every turn have ended
                stack.push_async_callback(flush_traces)
            stack.push_async_callback(_close, service)  # after the MCP sessions ended
            if session_manager is not None:
                await stack.enter_async_context(session_manager.run())
            await service.start(signals=options.reload_signals)  # a followed manifest loads
            warming = asyncio.create_task(service.run_background())
            try:
                yield
            finally:
                warming.cancel()
                await asyncio.gather(warming, return_exceptions=True)

    middleware: list[Middleware] = []
    if options.traces:
        from composer.serve.spans import RequestSpans

        middleware.append(Middleware(RequestSpans, routes=routes))
    if options.access_log:
        middleware.append(Middleware(AccessLog, routes=routes))
    loopback = is_loopback(options.host)
    middleware.append(Middleware(RequestGuard, loopback=loopback, open_paths=OPEN_PATHS))
    limited = options.rate > 0

    def rate_limit(name: str, **how: Any) -> Middleware:
        """One of the three limits, counted in the service's state store."""
        how = {"rate": options.rate, "burst": options.burst, **how}
        how |= {"storage": service.state.rate_storage, "failed": service.state_failed}
        return Middleware(RateLimit, name=name, exempt=OPEN_PATHS, **how)

    if limited:
        ceiling = options.ceiling or options.rate * 10
        burst = max(options.burst, int(ceiling * 2))
        who = "all clients together"
        middleware.append(rate_limit("all", rate=ceiling, burst=burst, key=_everyone, who=who))
        middleware.append(rate_limit("client"))
    principals = options.principals
    if principals is None and options.token is not None:
        principals = Principals.single(options.token)
    if principals is not None:
        middleware.append(
            Middleware(
                BearerAuth,
                principals=principals,
                open_paths=OPEN_PATHS,
                own_auth=CONSOLE_PREFIX if options.console is not None else None,
            )
        )
        if limited:
            middleware.append(rate_limit("principal", key=_principal_key, who="this principal"))
    middleware.append(Middleware(JsonBodies, body_paths=_BODIES))
    return Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )


_BRANCH_ID = re.compile(BRANCH_ID_PATTERN)


CLOSE_S = 5.0
"""How long shutdown waits for the providers to close (a hung one must not hold a stop)."""


async def _close(service: ContextService) -> None:
    try:
        async with asyncio.timeout(CLOSE_S):
            await service.aclose()
    except TimeoutError:
        logger.warning("closing the providers took over %g s; stopping anyway", CLOSE_S)


def _everyone(scope: Scope) -> str:
    return ""


def _principal_key(scope: Scope) -> str:
    return principal_of(scope).name


def _invalid(error: ValidationError) -> Response:
    details = [
        {"loc": list(item["loc"]), "msg": item["msg"], "type": item["type"]}
        for item in error.errors(include_url=False, include_context=False, include_input=False)
    ]
    return error_response(422, "invalid_body", "the request body is not valid", details=details)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = _STATUS_TYPES.get(exc.status_code, "http_error")
    return error_response(exc.status_code, kind, exc.detail, headers=exc.headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    logger.error("request %s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal", "the server failed on this request; see its log")
