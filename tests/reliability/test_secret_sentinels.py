"""A secret sentinel is hunted in every output: reprs, dumps, errors, logs at DEBUG, the CLI.

Every value a ``${VAR}`` went into is a secret. The sentinel is put into each kind of field
of each built-in type, and into a server's answer (reason phrase and body) that echoes the
token it was sent; nothing composer prints, logs, raises or reports may contain it, in any
letter case or percent-encoded.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from localserver import serving
from memory.services import (
    DEFAULT_POSTGRES_DSN,
    postgres_answers,
    throwaway_postgres,
    unavailable,
)

import composer
from composer.build import EnginePlan, ManagedProvider
from composer.cli import main
from composer.cli.logs import log_records_to
from composer.cli.output import Output
from composer.errors import ManifestError
from composer.manifest.models import redact

SENTINEL = "Sntl-7f3Q-Secret"
HOSTILE = 'Sntl "7f3Q" \\ é/+ Secret'
"""A sentinel with a quote, a backslash, a non-ASCII letter, spaces, a slash and a plus."""
HOSTILE_ASCII = 'Sntl "9kQ2" \\ +/ Header'
"""The same for an HTTP header, which httpx sends only in ASCII."""


def spellings(secret: str) -> set[str]:
    """How ``secret`` may read where it ends up: as is, percent-encoded (all of it, or with
    ``/`` kept as urllib and httpx keep it), form-encoded, JSON-escaped."""
    return {
        secret,
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret, safe=""),
        quote_plus(secret),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
    }


def assert_clean(text: str, where: str = "", secret: str = SENTINEL) -> None:
    """No spelling of ``secret`` in ``text``, in any letter case."""
    folded = text.lower()
    for form in spellings(secret):
        assert form.lower() not in folded, f"secret ({form}) in {where}: {text[:500]}"


class Echo(BaseHTTPRequestHandler):
    """Answers 500 with the Authorization header echoed in the reason phrase and the body."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        token = self.headers.get("Authorization", "")
        body = json.dumps({"error": f"bad token {token}"}).encode()
        self.send_response(500, f"Rejected {token}")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def echo_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    with serving(httpd):
        yield f"http://127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture
def folder(tmp_path: Path, echo_server: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A manifest folder (base + two environments) with the sentinel in every kind of field."""
    monkeypatch.setenv("TOKEN", SENTINEL)
    monkeypatch.setenv("API", echo_server)
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.md").write_text("# Deploy\n\nhow to deploy\n")
    (tmp_path / "memory.jsonl").write_text('{"content": "deploy notes", "tags": ["ops"]}\n')
    (tmp_path / "base.yaml").write_text(
        textwrap.dedent(
            """\
            version: 1
            providers:
              - {name: rules, type: static, text: "key ${TOKEN}"}
              - name: api
                type: http
                request:
                  url: "${API}/search?k=${TOKEN}"
                  headers: {Authorization: "Bearer ${TOKEN}"}
                  params: {q: "{{ instruction.text }}", key: "${TOKEN}"}
              - name: docs
                type: file_corpus
                root: corpus
                query: "{{ instruction.text }} ${TOKEN}"
              - name: notes
                type: memory
                source: {jsonl: memory.jsonl}
                query: {text: "deploy", tags: ["${TOKEN}"]}
                header: "Notes ${TOKEN}"
            """
        )
    )
    (tmp_path / "dev.yaml").write_text("extends: base.yaml\nbudget: 100\n")
    (tmp_path / "prod.yaml").write_text("extends: base.yaml\nbudget: 2000\n")
    return tmp_path


def test_reprs_and_dumps_hold_no_secret(folder: Path) -> None:
    manifest = composer.load_manifest(folder, env="dev")
    outputs = {
        "repr(manifest)": repr(manifest),
        "str(manifest)": str(manifest),
        "model_dump_json": manifest.model_dump_json(),
        "model_dump_json(by_alias)": manifest.model_dump_json(by_alias=True),
        "model_dump": str(manifest.model_dump()),
        "model_dump(json)": str(manifest.model_dump(mode="json")),
    }
    for config in manifest.providers:
        outputs[f"repr({config.name})"] = repr(config)
        outputs[f"str({config.name})"] = str(config)
    registry = composer.build_registry(manifest)
    for managed in registry.managed:
        held = {slot: getattr(managed, slot) for slot in ManagedProvider.__slots__}
        plan = {slot: getattr(managed.plan, slot) for slot in EnginePlan.__slots__}
        outputs[f"slots(managed {managed.name})"] = repr(held)
        outputs[f"slots(plan {managed.name})"] = repr(plan)
        outputs[f"vars({managed.name})"] = repr(vars(managed.provider))
        outputs[f"repr({managed.name})"] = repr(managed)
    for where, text in outputs.items():
        assert_clean(text, where)
    # the value itself is still there to be used
    assert manifest.providers[0].text == "key " + SENTINEL  # type: ignore[attr-defined]


async def test_a_turn_leaks_no_secret_into_reports_errors_or_composer_logs(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = composer.load_manifest(folder, env="prod")
    branch = composer.Branch("sys\n")
    registry = composer.attach(branch, manifest)
    with caplog.at_level(logging.DEBUG):
        turn = await composer.prepare_turn(branch, "how do I deploy")
    await registry.aclose()
    assert turn.report is not None
    assert turn.report.failed == ["api"]  # the 500: its text echoed the token
    assert_clean(repr(turn.report.failed) + repr(turn.report.skipped), "report")
    ours = [r for r in caplog.records if r.name.startswith(("composer", "builtin_providers"))]
    assert ours, "the failure is logged"
    for record in ours:
        assert_clean(record.getMessage(), f"log {record.name}")
        if record.exc_info and record.exc_info[1] is not None:
            assert_clean(str(record.exc_info[1]), f"exception in log {record.name}")


def test_a_located_error_masks_a_lower_cased_secret_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOST", f"{SENTINEL}.Example.com")
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\nproviders:\n"
        "  - name: h\n    type: http\n"
        "    request: {url: 'https://${HOST}/x', allowed_hosts: [other.example.com]}\n"
    )
    with pytest.raises(ManifestError) as caught:
        composer.load_manifest(path)
    assert "is not in allowed_hosts" in str(caught.value)
    assert_clean(str(caught.value), "error")


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "{folder}", "--env", "dev"],
        ["explain", "{folder}", "--env", "dev"],
        ["diff", "{folder}", "--env", "dev", "--env", "prod"],
        ["preview", "{folder}", "--env", "dev", "--instruction", "deploy"],
        ["preview", "{folder}", "--env", "prod", "--instruction", "deploy", "--json"],
        ["validate", "{folder}", "--all-envs", "--json"],
        ["explain", "{folder}", "--env", "prod", "--json"],
        ["diff", "{folder}", "--env", "dev", "--env", "prod", "--json"],
    ],
    ids=lambda argv: " ".join(a for a in argv if not a.startswith("{")),
)
def test_the_command_line_prints_no_secret(
    folder: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    main([a.format(folder=folder) for a in argv])
    out, err = capsys.readouterr()
    assert out or err
    assert_clean(out, "stdout")
    assert_clean(err, "stderr")


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "{folder}", "--env", "dev"],
        ["preview", "{folder}", "--env", "dev", "--instruction", "deploy"],
        ["preview", "{folder}", "--env", "prod", "--instruction", "deploy", "--json"],
        ["validate", "{folder}", "--all-envs", "--json"],
        ["explain", "{folder}", "--env", "prod", "--json"],
        ["diff", "{folder}", "--env", "dev", "--env", "prod", "--json"],
    ],
    ids=lambda argv: " ".join(a for a in argv if not a.startswith("{")),
)
@pytest.mark.parametrize("secret", [HOSTILE, HOSTILE_ASCII], ids=["non-ascii", "ascii"])
def test_the_command_line_prints_no_spelling_of_a_hostile_secret(
    folder: Path,
    argv: list[str],
    secret: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An ASCII one reaches the echo server in a header, which sends it back."""
    monkeypatch.setenv("TOKEN", secret)
    main([a.format(folder=folder) for a in argv])
    out, err = capsys.readouterr()
    assert out or err
    assert_clean(out + err, "the output", secret)


@pytest.mark.parametrize(
    "name", ["psycopg", "psycopg.pool", "httpx", "httpcore.http11", "mcp.client.stdio"]
)
def test_a_librarys_log_records_are_masked_before_any_handler_formats_them(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI's handler masks a record in place: its own line, and an application's handler
    added after it (full traceback and all), show no spelling of the secret."""
    shown, later = io.StringIO(), io.StringIO()
    application = logging.StreamHandler(later)
    application.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    with log_records_to(Output(io.StringIO(), shown), lambda text: redact(text, [HOSTILE])):
        root.addHandler(application)
        try:
            log = logging.getLogger(name)
            log.warning('invalid percent-encoded token: "%s"', f"p%{HOSTILE}")
            log.warning("sent %s", quote_plus(HOSTILE))
            try:
                raise OSError(f"refused {json.dumps({'password': HOSTILE})}")
            except OSError:
                log.warning("connection failed", exc_info=True)
        finally:
            root.removeHandler(application)
    lines = shown.getvalue().splitlines()
    assert lines == [
        'composer: warning: invalid percent-encoded token: "p%***"',
        "composer: warning: sent ***",
        'composer: warning: connection failed: OSError: refused {"password": "***"}',
    ]
    assert "Traceback" in later.getvalue()
    for text in (later.getvalue(), *capsys.readouterr()):
        assert_clean(text, "a log line", HOSTILE)


@pytest.fixture(scope="module")
def postgres() -> Iterator[dict[str, str]]:
    """Host, port and database of a PostgreSQL server that answers (as the memory tests')."""
    try:
        import psycopg_pool  # noqa: F401
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[postgres]')")

    def parts(dsn: str) -> dict[str, str]:
        found = conninfo_to_dict(dsn)
        return {key: str(found[key]) for key in ("host", "port", "dbname")}

    dsn = os.environ.get("COMPOSER_TEST_POSTGRES_DSN", DEFAULT_POSTGRES_DSN)
    if postgres_answers(dsn):
        yield parts(dsn)
        return
    with throwaway_postgres() as cluster:
        yield parts(cluster.dsn)


_AT = "{host}:{port}/{dbname}"


@pytest.mark.parametrize(
    ("dsn", "via", "secret", "said"),
    [
        (  # libpq refuses the stray % and quotes the password, once per pool attempt
            f"postgresql://postgres:p%{SENTINEL}@{_AT}",
            "literal",
            SENTINEL,
            "invalid percent-encoded token",
        ),
        (f"postgresql://postgres:p%{SENTINEL}@{_AT}", "variable", SENTINEL, "percent-encoded"),
        (  # a raw / in the password: libpq quotes what comes before it as a port
            f"postgresql://postgres:p%{HOSTILE}@{_AT}",
            "literal",
            HOSTILE.split("/")[0],
            "invalid percent-encoded token",
        ),
        (f"postgresql://{SENTINEL}:pw@{_AT}", "literal", SENTINEL, "does not exist"),
        (  # the server quotes a setting's value
            "host={host} port={port} dbname={dbname} user=postgres"
            f" options='-c statement_timeout={SENTINEL}'",
            "literal",
            SENTINEL,
            'invalid value for parameter "statement_timeout"',
        ),
    ],
    ids=["stray-percent", "stray-percent-from-variable", "hostile", "user", "options"],
)
def test_preview_shows_no_part_of_a_dsn_in_the_warnings_of_libpq_and_its_pool(
    tmp_path: Path, postgres: dict[str, str], dsn: str, via: str, secret: str, said: str
) -> None:
    """A real ``composer preview`` against the real server: psycopg_pool logs each failed
    attempt with libpq's message, which quotes the DSN's password, user or options."""
    written = dsn.format(**postgres)
    value = json.dumps(written) if via == "literal" else '"${PG_DSN}"'
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\nproviders:\n  - name: notes\n    type: memory\n"
        f"    source: {{postgres: {{dsn: {value}, connect_timeout_s: 1}}}}\n"
        "    query: {text: '{{ instruction.text }}'}\n",
        encoding="utf-8",
    )
    environ = {**os.environ, "NO_COLOR": "1", "PG_DSN": written, "PYTHONIOENCODING": "utf-8"}
    result = subprocess.run(
        [sys.executable, "-m", "composer", "preview", str(path), "--instruction", "deploy"],
        capture_output=True,
        env=environ,
        timeout=60,
    )
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, err
    assert "notes" in out
    assert "failed" in out
    assert said in err  # the library's warning was printed, masked
    assert_clean(out + err, "preview", secret)
