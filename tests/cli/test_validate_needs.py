"""``composer validate`` checks what the run will need on this machine, each finding at its
manifest key: the audit file's folder, every line of a memory seed, the extra a source,
provider type or runtime option imports, and an MCP server's command; all offline, nothing
started, nothing connected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from netblock import BLOCK_SOCKETS
from repofiles import location, put

from composer.cli import main

EXTRAS = """
version: 1
providers:
  - {name: pg, type: memory, source: {postgres: {dsn: "postgresql://u@127.0.0.1:1/db"}}}
  - {name: tool, type: mcp, server: {command: sh}, resource: "a://b"}
  - {name: off, type: mcp, server: {command: sh}, resource: "a://b", enabled: false}
runtime:
  cache: {redis: {url: "redis://127.0.0.1:1"}}
  traces: true
  metrics: true
"""


def validate_without(
    tmp_path: Path, blocked: tuple[str, ...], *args: str
) -> subprocess.CompletedProcess[str]:
    """``composer validate ARGS`` in a child Python where ``blocked`` cannot be imported (as
    when the extra is not installed) and no socket can connect."""
    prelude = (
        BLOCK_SOCKETS
        + f"import sys\nfor name in {blocked!r}:\n    sys.modules[name] = None\n"
        + "from composer.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", prelude, "validate", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_each_missing_extra_names_its_pip_command_at_its_key(tmp_path: Path) -> None:
    m = put(tmp_path / "m.yaml", EXTRAS)
    blocked = ("psycopg", "redis", "mcp", "prometheus_client", "opentelemetry")
    result = validate_without(tmp_path, blocked, str(m))
    assert result.returncode == 1
    assert result.stdout == ""
    install = "not installed: pip install 'context-composer"
    assert result.stderr.splitlines() == [
        f"{location(m, 'redis:', '{url')}: runtime.cache.redis: needs redis (the redis extra), "
        f"{install}[redis]'",
        f"{location(m, 'traces:', 'true')}: warning: runtime.traces: needs opentelemetry "
        f"(the otel extra), {install}[otel]'; turns run without it",
        f"{location(m, 'metrics:', 'true')}: warning: runtime.metrics: needs "
        f"prometheus_client (the metrics extra), {install}[metrics]'; turns run without it",
        f'{location(m, "postgres:", "{dsn")}: provider "pg": source.postgres: needs psycopg '
        f"(the postgres extra), {install}[postgres]'",
        f'{location(m, "name: tool", "mcp")}: provider "tool": type: needs mcp '
        f"(the mcp extra), {install}[mcp]'",
    ]


def test_installed_extras_and_warnings_alone_keep_it_valid(tmp_path: Path) -> None:
    """The same manifest where every extra is installed (as here) finds nothing; only the
    otel and metrics extras missing is a warning each, exit 0."""
    m = put(tmp_path / "m.yaml", EXTRAS)
    assert validate_without(tmp_path, (), str(m)).stderr == ""
    result = validate_without(tmp_path, ("prometheus_client", "opentelemetry"), str(m))
    assert result.returncode == 0
    assert [line.split(": ", 2)[1] for line in result.stderr.splitlines()] == ["warning"] * 2
    assert result.stdout.startswith(f"{m}: valid; 3 providers (2 enabled)")


def test_an_mcp_command_is_looked_up_on_the_real_path_never_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    marker = tmp_path / "ran"
    server = put(tools / "mcp-server-here", f"#!/bin/sh\ntouch {marker}\n")
    server.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([os.environ["PATH"], str(tools)]))
    m = put(
        tmp_path / "m.yaml",
        """
        version: 1
        providers:
          - {name: here, type: mcp, server: {command: mcp-server-here}, resource: "a://b"}
          - {name: gone, type: mcp, server: {command: mcp-server-gone}, resource: "a://b"}
          - {name: by-path, type: mcp, server: {command: ./tools/mcp-server-here}, tool: {name: t}}
        """,
    )
    assert main(["validate", str(m)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f'{location(m, "mcp-server-gone")}: provider "gone": server.command: '
        "no such command on PATH: mcp-server-gone"
    ]
    assert not marker.exists()  # looked up, not started


AUDITED = """
version: 1
runtime:
  audit: {path: %s}
"""


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("logs/turns.jsonl", "no such folder for the audit file: {tmp}/logs"),
        ("file.txt/turns.jsonl", "not a folder: {tmp}/file.txt"),
        ("folder", "not a regular file, which the writer refuses: {tmp}/folder"),
        ("link.jsonl", "a symbolic link, which the writer refuses: {tmp}/link.jsonl"),
        ("theirs.jsonl", "owned by uid 65534, not this user, which the writer refuses: "),
    ],
)
def test_an_audit_file_the_writer_cannot_use_is_an_error_at_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, problem: str
) -> None:
    """At run time each of these loses every turn's line (logged once a minute); validate
    says so before the first turn."""
    put(tmp_path / "file.txt", "x\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "file.txt")
    theirs = put(tmp_path / "theirs.jsonl", "")
    if path == "theirs.jsonl":
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(theirs, 65534, 65534)
    m = put(tmp_path / "m.yaml", AUDITED % path)
    assert main(["validate", str(m)]) == 1
    err = capsys.readouterr().err.splitlines()
    expected = f"{location(m, 'path:', path)}: runtime.audit.path: " + problem.format(tmp=tmp_path)
    assert len(err) == 1
    assert err[0].startswith(expected)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write in any folder")
def test_an_audit_folder_this_user_cannot_write_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o500)
    m = put(tmp_path / "m.yaml", AUDITED % "logs/turns.jsonl")
    try:
        assert main(["validate", str(m)]) == 1
    finally:
        logs.chmod(0o700)
    assert "runtime.audit.path: folder not writable by this user" in capsys.readouterr().err


def test_a_usable_audit_file_or_an_unknown_one_is_fine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "logs").mkdir()
    put(tmp_path / "logs" / "old.jsonl", "{}\n")
    for path in ("logs/turns.jsonl", "logs/old.jsonl"):
        m = put(tmp_path / "m.yaml", AUDITED % path)
        assert main(["validate", str(m)]) == 0
        assert capsys.readouterr().err == ""
    m = put(tmp_path / "m.yaml", AUDITED % '"${AUDIT_FILE}"')
    assert main(["validate", str(m), "--no-interpolate"]) == 0  # not known: not judged
    assert capsys.readouterr().err == ""
    m = put(tmp_path / "m.yaml", AUDITED % '"${AUDIT_FILE:-gone/turns.jsonl}"')
    assert main(["validate", str(m), "--no-interpolate"]) == 1  # the default is known
    assert "no such folder for the audit file" in capsys.readouterr().err


SEEDED = """
version: 1
providers:
  - {name: mem, type: memory, source: {sqlite: m.sqlite, seed: seed.jsonl}}
"""


def test_every_broken_seed_line_is_named_with_its_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = put(
        tmp_path / "seed.jsonl",
        '{"content": "kept"}\n'
        "not json\n"
        "\n"
        '{"content": "b", "id": "x"}\n'
        '{"content": "c", "id": "x"}\n'
        '{"tags": ["no content"]}\n'
        '{"content": "cut',
    )
    m = put(tmp_path / "m.yaml", SEEDED)
    assert main(["validate", str(m)]) == 1
    where = f'{location(m, "seed:", "seed.jsonl")}: provider "mem": source.seed: {seed}'
    err = capsys.readouterr().err.splitlines()
    assert [line.removeprefix(where) for line in err] == [
        ":2: not JSON: Expecting value (column 1); the line would be skipped",
        ":5: id 'x' is already there; the line would be skipped",
        ":6: no 'content'; the line would be skipped",
        ":7: not JSON: Unterminated string starting at (column 13); the line would be skipped",
    ]
    assert not (tmp_path / "m.sqlite").exists()  # checked, not imported


def test_a_good_seed_is_valid_and_many_broken_lines_are_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = put(tmp_path / "seed.jsonl", '{"content": "a"}\n{"content": "b", "tags": ["t"]}\n')
    m = put(tmp_path / "m.yaml", SEEDED)
    assert main(["validate", str(m)]) == 0
    assert capsys.readouterr().err == ""
    seed.write_text('{"content": "a"}\n' + "oops\n" * 25)
    assert main(["validate", str(m)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 11
    assert err[0].endswith(
        f"{seed}:2: not JSON: Expecting value (column 1); the line would be skipped"
    )
    assert err[9].split(f"{seed}:")[1].startswith("11: ")
    assert err[10].endswith(f"source.seed: {seed}: 15 more broken line(s)")


def test_a_seed_linking_out_of_its_folder_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(tmp_path / "elsewhere" / "real.jsonl", '{"content": "a"}\n')
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "seed.jsonl").symlink_to(tmp_path / "elsewhere" / "real.jsonl")
    m = put(tmp_path / "app" / "m.yaml", SEEDED)
    assert main(["validate", str(m)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f'{location(m, "seed:", "seed.jsonl")}: provider "mem": source.seed: memory file '
        f"{tmp_path / 'app' / 'seed.jsonl'} links out of its folder, to "
        f"{tmp_path / 'elsewhere' / 'real.jsonl'}: a seed's links are followed only inside it, "
        "as a ConfigMap's are (name the file itself)"
    ]


def test_a_seed_mounted_from_a_configmap_is_valid_and_seeds_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The kubelet mounts each ConfigMap file as a link through ``..data``."""
    put(tmp_path / "..2026_01_01" / "seed.jsonl", '{"content": "roll back first"}\n')
    put(tmp_path / "..2026_01_01" / "m.yaml", SEEDED)
    (tmp_path / "..data").symlink_to("..2026_01_01")
    for name in ("seed.jsonl", "m.yaml"):
        (tmp_path / name).symlink_to(Path("..data") / name)
    assert main(["validate", str(tmp_path / "m.yaml")]) == 0
    assert capsys.readouterr().err == ""
    argv = ["preview", str(tmp_path / "m.yaml"), "--instruction", "roll back", "--json"]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["providers"][0]["outcome"] == "fired"
    assert "roll back first" in document["guidance"]


def test_an_audit_table_without_psycopg_is_an_error_at_its_key(tmp_path: Path) -> None:
    m = put(
        tmp_path / "m.yaml",
        'version: 1\nruntime:\n  audit: {postgres: {dsn: "postgresql://u@127.0.0.1:1/db"}}\n',
    )
    result = validate_without(tmp_path, ("psycopg",), str(m))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"{location(m, 'postgres:', '{dsn')}: runtime.audit.postgres: needs psycopg "
        "(the postgres extra), not installed: pip install 'context-composer[postgres]'"
    ]
    assert validate_without(tmp_path, (), str(m)).returncode == 0  # nothing is connected
