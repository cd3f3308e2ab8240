"""``composer.serve`` from Python, as the serving guide's "From Python" shows it: a program runs
the same server as ``composer serve --principals ... --state ... --console`` with ``run``, and
a Starlette app of its own mounts ``create_app``'s app below a prefix, where the API, MCP,
the console's pages, links and cookie, and the OpenAPI document all work.

The guide's two Python blocks are the programs: the first runs as a process on 127.0.0.1
against a real Redis (its port and key prefix put in), the second in this process, driven by
httpx through the outer app's ASGI interface.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from docpages import DOCS, blocks, copy_configs
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from memory.services import free_port, redis_prefix_of

from composer.serve.openapi import openapi_document
from serve.apps import LOOPBACK, variables
from serve.conftest import PYTHON, STARTUP_S, stop, wait_for
from serve.stores import redis_url

__all__ = ["redis_url"]  # the store's fixture

GUIDE = DOCS / "guides" / "serving.md"
TOKENS = {"team-a": "token-of-team-a-0123456789", "ops": "token-of-ops-9876543210"}
ENV = {"TEAM_A_TOKEN": TOKENS["team-a"], "STATUS_TOKEN": "unused"}
TURN = {
    "branch": {"id": "inc-4711", "name": "payments"},
    "system": "You are the on-call assistant.\n",
    "instruction": {"text": "The API returns 502 errors after the deploy"},
}


def python_blocks() -> list[str]:
    """The "From Python" section's blocks: ``run``, then mounting ``create_app``."""
    section = GUIDE.read_text(encoding="utf-8").split("## From Python\n", 1)[1]
    found = [b.text for b in blocks(GUIDE, "python") if b.text in section]
    assert len(found) == 2, "the serving guide's From Python shows two programs"
    return found


def as_caller(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


@pytest.fixture
def guide_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder as the guide's reader has it: ``configs/`` and the guide's principals file
    (``team-a`` by ``${TEAM_A_TOKEN}``, ``ops`` by its token file)."""
    copy_configs(tmp_path)
    principals = next(b.text for b in blocks(GUIDE, "yaml") if "# principals.yaml" in b.text)
    (tmp_path / "principals.yaml").write_text(principals)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "ops-token").write_text(TOKENS["ops"] + "\n")
    for name in ("COMPOSER_SERVE_TOKEN", "COMPOSER_ENV", "COMPOSER_MANIFEST", "STATUS_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def program(guide_folder: Path, redis_url: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The guide's ``run`` block as a program of its own, on a free port, its state in a
    Redis key prefix of this test's; its URL once it answers."""
    port = free_port()
    with redis_prefix_of(redis_url) as word:
        text = python_blocks()[0]
        assert "ServerConfig(\n" in text
        text = text.replace(
            "ServerConfig(\n", f"ServerConfig(\n    port={port}, state_schema={word!r},\n"
        )
        process = subprocess.Popen(
            [PYTHON, "-c", text],
            cwd=guide_folder,
            env={**variables_of(ENV), "STATE_URL": redis_url},
            text=True,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for(f"{url}/readyz")
            yield process, url
        finally:
            stop(process)


def variables_of(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without a serve token or a chosen manifest, plus ``extra``."""
    dropped = {"COMPOSER_SERVE_TOKEN", "COMPOSER_ENV", "COMPOSER_MANIFEST", "STATUS_URL"}
    return {**{k: v for k, v in os.environ.items() if k not in dropped}, **extra}


def test_a_program_runs_the_server_composer_serve_runs(
    program: tuple[subprocess.Popen[str], str],
) -> None:
    """Principals (a variable's token and a file's), the Redis state, the console: over real
    HTTP, and a graceful stop on SIGTERM."""
    process, url = program
    with httpx.Client(base_url=url, timeout=STARTUP_S) as client:
        turn = client.post("/v1/turns", json=TURN, headers=as_caller("team-a"))
        ops = client.post("/v1/turns", json=TURN, headers=as_caller("ops"))
        nobody = client.post("/v1/turns", json=TURN)
        ready = client.get("/readyz").json()
        console = client.get("/console/turns", headers=as_caller("ops"))
        manifest = client.get("/v1/manifest", headers=as_caller("ops")).json()
    assert turn.status_code == 200, turn.text
    assert turn.json()["guidance"].startswith("You are the on-call assistant.\nHouse rules")
    assert ops.status_code == 200
    assert nobody.status_code == 401
    assert ready["status"] == "ready"
    assert ready["state"]["kind"] == "redis"
    assert console.status_code == 200
    assert "composer console" in console.text
    assert manifest["env"] == "prod"
    assert stop(process) == 0


@pytest.fixture
def mounted(guide_folder: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    """The outer app the guide's second block makes (run where the reader runs it)."""
    monkeypatch.chdir(guide_folder)
    namespace: dict[str, object] = {"__name__": "platform"}
    with variables(ENV):
        exec(compile(python_blocks()[1], f"{GUIDE}:create_app", "exec"), namespace)
    return namespace["app"]


async def test_a_starlette_app_mounts_the_server_below_a_prefix(mounted: object) -> None:
    from starlette.applications import Starlette

    assert isinstance(mounted, Starlette)
    app = mounted
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app), base_url=LOOPBACK, timeout=STARTUP_S
        ) as client,
    ):
        deadline = time.monotonic() + STARTUP_S  # a bound that only catches a hang
        while (await client.get("/composer/readyz")).status_code != 200:
            assert time.monotonic() < deadline, "the mounted app never became ready"
            await asyncio.sleep(0.05)
        own = await client.get("/")
        health = await client.get("/composer/healthz")
        turn = await client.post("/composer/v1/turns", json=TURN, headers=as_caller("team-a"))
        nobody = await client.post("/composer/v1/turns", json=TURN)
        form = await client.post(
            "/composer/v1/turns",
            content=json.dumps(TURN),
            headers={**as_caller("team-a"), "Content-Type": "text/plain"},
        )
        document = (await client.get("/composer/openapi.json")).json()
        page = await client.get("/composer/console/turns", headers=as_caller("ops"))
        to_login = await client.get("/composer/console/turns")
        login = await client.post(
            "/composer/console/login",
            data={"token": TOKENS["ops"]},
            headers={"Origin": LOOPBACK},
        )
        with_cookie = await client.get("/composer/console/providers")
        async with (
            httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app), headers=as_caller("team-a"), timeout=60
            ) as http,
            Client(streamable_http_client(f"{LOOPBACK}/composer/mcp", http_client=http)) as mcp,
        ):
            tools = await mcp.list_tools()
    assert own.text == "the platform's own page"
    assert health.json() == {"status": "ok"}  # open below the prefix too
    assert turn.status_code == 200, turn.text
    assert "House rules for payments" in turn.json()["guidance"]
    assert nobody.status_code == 401
    assert form.status_code == 415
    assert document == {**openapi_document(), "servers": [{"url": "/composer"}]}
    assert page.status_code == 200
    assert 'href="/composer/console/turns"' in page.text
    assert 'href="/composer/console/static/console.css"' in page.text
    assert 'action="/composer/console/logout"' in page.text
    assert 'href="/console' not in page.text
    assert (to_login.status_code, to_login.headers["location"]) == (
        303,
        "/composer/console/login",
    )
    assert (login.status_code, login.headers["location"]) == (303, "/composer/console/turns")
    assert "Path=/composer/console" in login.headers["set-cookie"]
    assert with_cookie.status_code == 200
    assert "Providers" in with_cookie.text
    assert [tool.name for tool in tools.tools] == ["preview_turn"]


def test_importing_composer_serve_imports_no_web_framework_and_no_console() -> None:
    """``composer.serve`` stays light: Starlette, uvicorn, the MCP SDK and the console are
    imported when a server is made, not when the package is."""
    script = (
        "import sys, json, composer.serve\n"
        "heavy = ('starlette', 'uvicorn', 'mcp', 'composer.console', 'composer.serve.app')\n"
        "print(json.dumps([m for m in heavy if m in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout) == []
