"""The configured server built in this process, as ``composer serve`` builds it
(``composer.serve.create_app``), for the tests that are not about signals, sockets, workers or
the command line: its ASGI app, its lifespan running (the MCP sessions, the providers' warm-up,
their closing), driven by httpx through the app's ASGI interface. No process is started and
no port is opened.

``served`` gives Starlette's ``TestClient`` (an ``httpx2.Client``, the app on an event loop of
its own) for synchronous tests; ``served_async`` an ``httpx.AsyncClient`` on
``httpx.ASGITransport``, the app on the test's own loop (where an MCP client must run too).
Each waits until ``/readyz`` says ready, as ``start_serve`` does for a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from composer import load_manifest
from composer.serve import ServerConfig, create_app
from serve.conftest import STARTUP_S

__all__ = ["LOOPBACK", "configured_app", "served", "served_async", "variables"]

LOOPBACK = "http://127.0.0.1:8080"
"""The base URL of the tests' clients: a loopback ``Host``, which a loopback server takes."""


@contextlib.contextmanager
def variables(values: Mapping[str, str] | None) -> Iterator[None]:
    """``values`` in the environment meanwhile (a manifest's ``${VAR}``, a token variable)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (values or {}).items():
            patch.setenv(name, value)
        yield


def configured_app(
    manifest: str | Path, config: ServerConfig, *, env: Mapping[str, str] | None = None
) -> Starlette:
    """The app of ``composer serve MANIFEST`` with ``config`` (its ``env`` picks the
    environment), the variables in ``env`` read while it is built."""
    with variables(env):
        return create_app(load_manifest(manifest, env=config.env), config)


@contextlib.contextmanager
def served(
    manifest: str | Path,
    config: ServerConfig | None = None,
    *,
    env: Mapping[str, str] | None = None,
    wait_ready: bool = True,
) -> Iterator[TestClient]:
    """A client of the configured app, its lifespan running; a server error is a ``500``
    answer, as a real server gives it, not an exception in the test."""
    app = configured_app(manifest, config or ServerConfig(), env=env)
    with TestClient(app, base_url=LOOPBACK, raise_server_exceptions=False) as client:
        if wait_ready:
            deadline = time.monotonic() + STARTUP_S  # a bound that only catches a hang
            while client.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "the app never became ready"
                time.sleep(0.05)
        yield client


@contextlib.asynccontextmanager
async def served_async(
    manifest: str | Path,
    config: ServerConfig | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[tuple[Starlette, httpx.AsyncClient]]:
    """The configured app on this event loop, its lifespan running, and an async client of
    it; once ready."""
    app = configured_app(manifest, config or ServerConfig(), env=env)
    transport = httpx.ASGITransport(app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url=LOOPBACK, timeout=60) as client,
    ):
        deadline = time.monotonic() + STARTUP_S
        while (await client.get("/readyz")).status_code != 200:
            assert time.monotonic() < deadline, "the app never became ready"
            await asyncio.sleep(0.05)
        yield app, client
