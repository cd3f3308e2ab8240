"""The MCP server, driven by the SDK's own client: ``composer serve --mcp-stdio`` started as a
subprocess, and ``/mcp`` of ``composer serve``'s app (built in process) over streamable HTTP."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import INVALID_PARAMS, TextContent, TextResourceContents
from starlette.applications import Starlette

from composer import load_manifest
from composer.serve import ServerConfig
from composer.serve.mcp_server import mcp_server
from composer.serve.service import ContextService
from serve.apps import LOOPBACK, served_async
from serve.conftest import CONFIGS, PYTHON, ROOT

INSTRUCTION = "The API returns 502 errors after the deploy, what do I do?"


@contextlib.asynccontextmanager
async def stdio_client() -> AsyncIterator[Client]:
    """The SDK's client, running `composer serve --mcp-stdio configs --env dev` as a child
    (in the test's own task: anyio's scopes must be left by the task that entered them)."""
    params = StdioServerParameters(
        command=PYTHON,
        args=["-m", "composer", "serve", "--mcp-stdio", str(CONFIGS), "--env", "dev"],
        cwd=ROOT,
    )
    async with Client(params) as client:
        yield client


def previewed(*extra: str) -> dict[str, Any]:
    """What `composer preview --json` prints for the instruction."""
    command = ["preview", str(CONFIGS), "--env", "dev", "--instruction", INSTRUCTION, "--json"]
    result = subprocess.run(
        [PYTHON, "-m", "composer", *command, *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def text_of(content: Any) -> str:
    assert isinstance(content, TextContent)
    return content.text


@pytest.mark.parametrize(
    ("arguments", "preview_args"),
    [
        ({}, ["--system", ""]),  # MCP has no system role: the default is no system text
        (
            {"system": "You are the on-call assistant.\n"},
            ["--system", "You are the on-call assistant.\n"],
        ),
    ],
)
async def test_the_compose_prompt_is_the_text_preview_prints(
    arguments: dict[str, str], preview_args: list[str]
) -> None:
    async with stdio_client() as client:
        prompt = await client.get_prompt("compose", {"instruction": INSTRUCTION, **arguments})
    composed, instruction = (text_of(message.content) for message in prompt.messages)
    assert [message.role for message in prompt.messages] == ["user", "user"]
    assert instruction == INSTRUCTION
    assert composed == previewed(*preview_args)["guidance"]
    assert "Relevant runbook passages:" in composed


async def test_the_resource_template_reads_a_branch_s_last_composed_text() -> None:
    async with stdio_client() as client:
        templates = await client.list_resource_templates()
        with pytest.raises(MCPError, match="no composed turn yet"):
            await client.read_resource("composer://branches/payments/context")
        prompt = await client.get_prompt(
            "compose", {"instruction": INSTRUCTION, "branch": "payments"}
        )
        read = await client.read_resource("composer://branches/payments/context")
    assert [t.uri_template for t in templates.resource_templates] == [
        "composer://branches/{branch_id}/context"
    ]
    (content,) = read.contents
    assert isinstance(content, TextResourceContents)
    assert content.text == text_of(prompt.messages[0].content)


async def test_the_preview_tool_returns_the_report_and_outcomes() -> None:
    async with stdio_client() as client:
        result = await client.call_tool(
            "preview_turn", {"instruction": INSTRUCTION, "system": "S\n"}
        )
    assert not result.is_error
    data = result.structured_content
    assert data is not None
    report = data["report"]
    assert [row["provider_name"] for row in report["fired"]] == [
        "house-rules",
        "runbooks",
        "team-memory",
    ]
    assert [o["outcome"] for o in report["outcomes"]] == ["fired", "fired", "fired"]
    assert data["guidance"].startswith("S\nHouse rules for the ops team")


@contextlib.asynccontextmanager
async def token_server() -> AsyncIterator[tuple[Starlette, httpx2.AsyncClient]]:
    """``composer serve configs --env dev --rate-limit 0`` with a token: its app, and an
    httpx2 client of it (the MCP SDK's HTTP client)."""
    config = ServerConfig(env="dev", rate_limit=0)
    env = {"COMPOSER_SERVE_TOKEN": "mcp-token"}
    async with (
        served_async(CONFIGS, config, env=env) as (app, _),
        httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app), base_url=LOOPBACK, timeout=60
        ) as http,
    ):
        yield app, http


async def test_mcp_over_streamable_http_shares_the_servers_branches() -> None:
    """A turn posted to the HTTP API is the branch the MCP resource reads, with the token."""
    body = {
        "branch": {"id": "shared"},
        "system": "S\n",
        "instruction": {"text": INSTRUCTION},
    }
    headers = {"Authorization": "Bearer mcp-token"}
    async with token_server() as (_, http):
        posted = await http.post("/v1/turns", json=body, headers=headers)
        http.headers.update(headers)
        async with Client(streamable_http_client(f"{LOOPBACK}/mcp", http_client=http)) as client:
            read = await client.read_resource("composer://branches/shared/context")
    (content,) = read.contents
    assert isinstance(content, TextResourceContents)
    assert content.text == posted.json()["guidance"]


async def test_mcp_over_http_is_refused_without_the_token() -> None:
    async with token_server() as (_, http):
        response = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "unauthorized"


async def test_every_argument_of_the_prompt_and_the_tool_is_described() -> None:
    async with stdio_client() as client:
        (prompt,) = (await client.list_prompts()).prompts
        (tool,) = (await client.list_tools()).tools
    arguments = {a.name: a.description for a in prompt.arguments or ()}
    assert set(arguments) == {"instruction", "system", "branch", "guidance", "metadata"}
    assert all(arguments.values()), arguments
    properties = tool.input_schema["properties"]
    assert set(properties) == set(arguments)
    assert all(p.get("description") for p in properties.values()), properties
    assert "(default: 'mcp')" in (arguments["branch"] or "")


@contextlib.asynccontextmanager
async def in_process_client(tmp_path: Path) -> AsyncIterator[Client]:
    """The SDK's client talking to ``mcp_server`` in this process, so its logs are caught."""
    manifest = tmp_path / "m.yaml"
    manifest.write_text("version: 1\nproviders: [{name: rules, type: static, text: Be brief.}]\n")
    service = ContextService(load_manifest(manifest))
    try:
        async with Client(mcp_server(service)) as client:
            yield client
    finally:
        await service.aclose()


async def test_a_client_s_missing_or_bad_argument_is_its_error_not_the_server_s(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Answered as an error naming the argument, and never logged as a server error (no
    traceback on the operator's console for a client's mistake)."""
    caplog.set_level(logging.DEBUG)
    async with in_process_client(tmp_path) as client:
        with pytest.raises(MCPError, match="missing required argument: instruction") as missing:
            await client.get_prompt("compose", {"system": "S\n"})
        with pytest.raises(MCPError, match="metadata must be a JSON object") as bad:
            await client.get_prompt("compose", {"instruction": "x", "metadata": "[1]"})
        result = await client.call_tool("preview_turn", {"system": "S\n"})
        composed = await client.get_prompt("compose", {"instruction": "x"})
    assert missing.value.code == bad.value.code == INVALID_PARAMS
    assert result.is_error
    assert "instruction" in text_of(result.content[0])
    assert [text_of(m.content) for m in composed.messages] == ["Be brief.", "x"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert not any(r.exc_info for r in caplog.records)
