"""The ``mcp`` provider type against a real MCP server written with the SDK (tests/serve/mcp_peer.py),
started over stdio or reached over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from composer import Branch, Instruction, ManifestError, load_manifest, prepare_turn
from composer.build import attach
from composer.cli.main import main
from composer.manifest import Manifest
from serve.conftest import PYTHON, notes_entry, peer_server, process_gone


def write_manifest(folder: Path, *providers: dict[str, Any], **top: Any) -> Path:
    path = folder / "manifest.yaml"
    path.write_text(yaml.safe_dump({"version": 1, **top, "providers": list(providers)}))
    return path


def mcp_entry(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "type": "mcp", "server": peer_server(), **fields}


async def one_turn(manifest: Manifest, text: str, *, name: str = "ops") -> Any:
    branch = Branch("SYSTEM\n", name=name)
    attach(branch, manifest)
    return await prepare_turn(branch, Instruction(text))


async def test_resource_prompt_and_tool_over_stdio_each_give_their_text(tmp_path: Path) -> None:
    manifest = load_manifest(
        write_manifest(
            tmp_path,
            mcp_entry("notes", resource="notes://{{ branch.name }}"),
            mcp_entry(
                "brief", prompt={"name": "brief", "arguments": {"topic": "{{ instruction.text }}"}}
            ),
            mcp_entry(
                "lookup",
                tool={
                    "name": "lookup",
                    "arguments": {"query": "{{ instruction.text }}", "limit": 2},
                },
            ),
        )
    )
    try:
        turn = await one_turn(manifest, "db outage", name="payments team")
    finally:
        await manifest.aclose()
    assert turn.report.blocks == [
        "Notes on payments team: restart the worker first.",
        "Brief (plain) on db outage.",
        "Found 2 for db outage.",
    ]
    assert [o.outcome for o in turn.report.outcomes] == ["fired", "fired", "fired"]


async def test_a_branch_name_is_percent_encoded_in_the_resource_uri(tmp_path: Path) -> None:
    """User text cannot add a path segment or a query to the URI the manifest fixed."""
    manifest = load_manifest(
        write_manifest(tmp_path, mcp_entry("notes", resource="notes://{{ branch.name }}"))
    )
    try:
        turn = await one_turn(manifest, "x", name="a/b?c=d")
    finally:
        await manifest.aclose()
    assert turn.report.blocks == ["Notes on a/b?c=d: restart the worker first."]


async def test_reads_over_streamable_http_with_headers(tmp_path: Path, http_peer: str) -> None:
    entry = {
        "name": "notes",
        "type": "mcp",
        "server": {"url": http_peer, "headers": {"X-Team": "ops"}},
        "resource": "notes://{{ instruction.text }}",
    }
    manifest = load_manifest(write_manifest(tmp_path, entry))
    try:
        first = await one_turn(manifest, "cache")
        second = await one_turn(manifest, "queue")
    finally:
        await manifest.aclose()
    assert first.report.blocks == ["Notes on cache: restart the worker first."]
    assert second.report.blocks == ["Notes on queue: restart the worker first."]


async def test_non_text_parts_are_skipped_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = load_manifest(
        write_manifest(
            tmp_path,
            mcp_entry(
                "chart",
                tool={"name": "mixed"},
                template="{{ text }} [skipped: {{ skipped | join(', ') }}]",
            ),
            mcp_entry("image", resource="blob://image"),
        )
    )
    caplog.set_level(logging.INFO, logger="builtin_providers.mcp")
    try:
        turn = await one_turn(manifest, "x")
    finally:
        await manifest.aclose()
    assert turn.report.blocks == ["A chart follows. [skipped: image]"]
    assert [o.outcome for o in turn.report.outcomes] == ["fired", "empty"]
    skipped = [r.getMessage() for r in caplog.records if "not text" in r.getMessage()]
    assert any("'chart'" in m and "image" in m for m in skipped)
    assert any("'image'" in m and "blob" in m for m in skipped)


async def test_a_tool_error_fails_the_provider_with_its_first_line(tmp_path: Path) -> None:
    manifest = load_manifest(
        write_manifest(
            tmp_path,
            mcp_entry("broken", tool={"name": "broken"}),
            {"name": "s", "type": "static", "text": "ok"},
        )
    )
    try:
        turn = await one_turn(manifest, "x")
    finally:
        await manifest.aclose()
    assert turn.report.failed == ["broken"]
    assert turn.report.blocks == ["ok"]
    record = turn.report.outcomes[0]
    assert record.outcome == "failed"
    assert record.error is not None
    assert "the index is offline" in record.error
    assert "second line" not in record.error


async def test_the_child_gets_only_the_variables_passed_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child inherits no secret of ours: what it needs is passed in `env`, explicitly."""
    monkeypatch.setenv("PEER_TOKEN", "s3cret-value")
    monkeypatch.setenv("UNRELATED_SECRET", "must-not-leak")
    manifest = load_manifest(
        write_manifest(
            tmp_path,
            {
                "name": "given",
                "type": "mcp",
                "server": peer_server(env={"TOKEN": "${PEER_TOKEN}"}),
                "resource": "env://TOKEN",
            },
            mcp_entry("other", resource="env://UNRELATED_SECRET"),
        )
    )
    try:
        turn = await one_turn(manifest, "x")
    finally:
        await manifest.aclose()
    assert turn.report.blocks == ["s3cret-value", "(unset)"]


async def test_branches_of_one_manifest_share_one_server_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    entry = notes_entry(pid_file)
    manifest = load_manifest(write_manifest(tmp_path, entry))
    try:
        await one_turn(manifest, "a", name="one")
        first = pid_file.read_text()
        pid_file.unlink()
        await one_turn(manifest, "b", name="two")
        assert not pid_file.exists()  # no second process was started
    finally:
        await manifest.aclose()
    assert process_gone(int(first)), "Manifest.aclose() stops the server process"


async def test_a_server_killed_between_turns_is_restarted_by_the_next_turn(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    entry = notes_entry(pid_file)
    manifest = load_manifest(write_manifest(tmp_path, entry))
    try:
        assert (await one_turn(manifest, "before")).report.fired
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        after = await one_turn(manifest, "after")
        assert after.report.blocks == ["Notes on after: restart the worker first."]
        assert pid_file.exists()
    finally:
        await manifest.aclose()


async def test_the_engine_timeout_bounds_a_server_that_never_starts(tmp_path: Path) -> None:
    hang = tmp_path / "hang.py"
    hang.write_text("import time\ntime.sleep(60)\n")
    entry = {
        "name": "slow",
        "type": "mcp",
        "timeout_s": 0.5,
        "server": {"command": PYTHON, "args": [str(hang)]},
        "resource": "notes://x",
    }
    manifest = load_manifest(write_manifest(tmp_path, entry))
    started = time.monotonic()
    try:
        turn = await one_turn(manifest, "x")
    finally:
        await manifest.aclose()
    assert turn.report.failed == ["slow"]
    assert turn.report.outcomes[0].outcome == "timeout"
    assert time.monotonic() - started < 30  # generous: catches only a hang


async def test_a_command_that_does_not_exist_fails_the_provider(tmp_path: Path) -> None:
    entry = {
        "name": "nope",
        "type": "mcp",
        "server": {"command": str(tmp_path / "missing")},
        "resource": "notes://x",
    }
    manifest = load_manifest(write_manifest(tmp_path, entry))
    try:
        turn = await one_turn(manifest, "x")
    finally:
        await manifest.aclose()
    assert turn.report.failed == ["nope"]
    error = turn.report.outcomes[0].error or ""
    assert f"cannot start the MCP server: cannot run '{tmp_path / 'missing'}'" in error


def test_validate_names_a_command_that_this_machine_cannot_run(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    script = tools / "server"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    (tools / "plain").write_text("")
    servers: list[dict[str, Any]] = [
        {"command": "no-such-mcp-server-here"},
        {"command": "server", "env": {"PATH": str(tools)}},  # the PATH the child gets
        {"command": "./tools/server", "cwd": "."},
        {"command": "./tools/plain", "cwd": "."},
        {"command": "server", "cwd": "nowhere"},
        {"command": PYTHON},
    ]
    entries = [
        {"name": f"m{n}", "type": "mcp", "server": server, "resource": "a://b"}
        for n, server in enumerate(servers)
    ]
    path = write_manifest(tmp_path, *entries)
    assert main(["validate", str(path)]) == 1
    errors = capfd.readouterr().err.splitlines()
    assert [line.split(": ", 1)[1] for line in errors] == [
        'provider "m0": server.command: no such command on PATH: no-such-mcp-server-here',
        f'provider "m3": server.command: not executable: {tmp_path / "tools" / "plain"}',
        f'provider "m4": server.cwd: no such folder: {tmp_path / "nowhere"}',
    ]
    assert errors[0].startswith(f"{path}:")


def test_cache_key_is_the_rendered_request(tmp_path: Path) -> None:
    manifest = load_manifest(
        write_manifest(
            tmp_path,
            mcp_entry(
                "brief", prompt={"name": "brief", "arguments": {"topic": "{{ instruction.text }}"}}
            ),
        )
    )
    provider = attach(Branch("s"), manifest).managed[0].provider
    key = provider.cache_key(Branch("s"), Instruction("db"))  # type: ignore[attr-defined]
    assert json.loads(key) == ["prompt", "brief", {"topic": "db"}]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"server": {"command": "x", "url": "http://127.0.0.1/mcp"}, "resource": "a://b"},
            "either command",
        ),
        ({"server": {}, "resource": "a://b"}, "either command"),
        ({"server": {"url": "ftp://h/mcp"}, "resource": "a://b"}, "http:// or https://"),
        (
            {"server": {"url": "http://h/mcp", "env": {"A": "b"}}, "resource": "a://b"},
            "go with command",
        ),
        ({"server": {"command": "x"}}, "exactly one of resource, prompt or tool"),
        ({"server": {"command": "x"}, "resource": "a://b", "tool": {"name": "t"}}, "exactly one"),
        ({"server": {"command": "x"}, "resource": "{{ nope }}"}, "unknown name 'nope'"),
        (
            {"server": {"command": "x"}, "tool": {"name": "t"}, "template": "{{ json }}"},
            "unknown name 'json'",
        ),
        ({"server": {"command": "x", "max_response_bytes": 0}, "resource": "a://b"}, "1"),
        ({"server": {"command": "x"}, "resource": "a://b", "request_timeout_s": 0}, "0"),
    ],
)
def test_invalid_configs_are_located_errors(
    tmp_path: Path, entry: dict[str, Any], message: str
) -> None:
    path = write_manifest(tmp_path, {"name": "m", "type": "mcp", **entry})
    with pytest.raises(ManifestError, match=message) as raised:
        load_manifest(path)
    assert raised.value.path.endswith("manifest.yaml")
    assert raised.value.line > 0


def test_a_resource_fires_through_composer_preview(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = write_manifest(tmp_path, mcp_entry("notes", resource="notes://{{ instruction.text }}"))
    code = main(["preview", str(path), "--instruction", "payments", "--json"])
    captured = capfd.readouterr()
    assert code == 0, captured.err
    document = json.loads(captured.out)
    assert [(r["name"], r["outcome"]) for r in document["providers"]] == [("notes", "fired")]
    assert "Notes on payments: restart the worker first." in document["guidance"]


def test_without_the_sdk_the_provider_fails_saying_what_to_install(tmp_path: Path) -> None:
    """The entry point loads without the SDK (the schema and reference list the type); a turn
    that needs it fails that provider alone, naming the extra."""
    path = write_manifest(
        tmp_path,
        mcp_entry("notes", resource="notes://x"),
        {"name": "s", "type": "static", "text": "still here"},
    )
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.modules["mcp"] = None  # as if the SDK were not installed
        import composer
        manifest = composer.load_manifest({str(path)!r})
        branch = composer.Branch("S")
        composer.attach(branch, manifest)
        turn = asyncio.run(composer.prepare_turn(branch, composer.Instruction("x")))
        print(turn.report.blocks, turn.report.outcomes[0].error)
        """
    )
    result = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "['still here']" in result.stdout
    assert "the MCP SDK is not installed: pip install 'context-composer[mcp]'" in result.stdout
