"""What is masked: every value from a variable, except a URL's scheme, host and port, which a
failure must be able to name. Header values, query values, bodies, credentials in a URL and a
path from a variable stay masked."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from urllib.parse import quote, quote_plus

import httpx
import pytest
from repofiles import put

from composer.cli import main
from composer.manifest.loader import load_manifest

TOKEN = "tok-5ecret-91"
HOST = "http://127.0.0.1:48123"


def manifest(tmp_path: Path, url: str, extra: str = "") -> Path:
    return put(
        tmp_path / "m.yaml",
        f"""
        version: 1
        providers:
          - name: status
            type: http
            request:
              url: "{url}"
              headers: {{Authorization: "Bearer ${{TOKEN}}"}}
              params: {{q: "${{QUERY}}"}}
              timeout_s: 1
        {extra}
        """,
    )


@pytest.mark.parametrize(
    ("url", "environ", "shown", "masked"),
    [
        ("${STATUS_URL}/search", {"STATUS_URL": HOST}, HOST, []),
        ("${STATUS_URL}", {"STATUS_URL": HOST}, HOST, []),
        ("${STATUS_URL}?q=1", {"STATUS_URL": HOST}, HOST, []),
        # a user and password in the URL, or a path from the variable: a secret whole
        ("${STATUS_URL}/search", {"STATUS_URL": "http://me:pw@127.0.0.1:48123"}, None, ["pw"]),
        ("${STATUS_URL}/search", {"STATUS_URL": f"{HOST}/private"}, None, ["private"]),
        # a variable after the start of the string, or not followed by a path, is no origin
        ("http://${HOSTNAME}:48123/search", {"HOSTNAME": "127.0.0.1"}, None, ["127.0.0.1"]),
        ("${STATUS_URL}x", {"STATUS_URL": HOST}, None, ["48123"]),
    ],
)
def test_only_a_urls_origin_is_shown(
    tmp_path: Path, url: str, environ: dict[str, str], shown: str | None, masked: list[str]
) -> None:
    put(
        tmp_path / "m.yaml",
        f'version: 1\nproviders:\n  - {{name: s, type: static, text: "{url}"}}\n',
    )
    loaded = load_manifest(tmp_path / "m.yaml", environ=environ)
    text = str(loaded.providers[0].model_dump(mode="python", round_trip=True)["text"])
    config_text = vars(loaded.providers[0])["text"]
    line = loaded.redact(f"GET {config_text} failed")
    if shown is not None:
        assert shown in line
        assert text == config_text  # not a Secret: its dump is the value
    for secret in masked:
        assert secret not in line
        assert text == "***"  # a Secret dumps as ***


def test_the_same_value_as_a_header_is_a_secret_everywhere(tmp_path: Path) -> None:
    path = manifest(tmp_path, "${STATUS_URL}/search")
    loaded = load_manifest(path, environ={"STATUS_URL": HOST, "TOKEN": HOST, "QUERY": "x"})
    assert HOST not in loaded.redact(f"GET {HOST}/search")


def test_a_failure_names_the_host_it_could_not_reach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("STATUS_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("TOKEN", TOKEN)
    monkeypatch.setenv("QUERY", "who-asked-7")
    path = manifest(tmp_path, "${STATUS_URL}/search")
    assert main(["preview", str(path), "--instruction", "x", "--json"]) == 0
    out = capsys.readouterr().out
    assert f"GET http://127.0.0.1:{port}/search?q=***" in out
    assert TOKEN not in out
    assert "who-asked-7" not in out


HOSTILE = 'Sntl "7f3Q" \\ é/+ Key'
"""A secret with a quote, a backslash, a non-ASCII letter, a space, a slash and a plus."""


def encoded(secret: str) -> dict[str, str]:
    """How ``secret`` reads once a library has written it somewhere (each spelling alone)."""
    return {
        "as written": secret,
        "json": json.dumps(secret)[1:-1],
        "json, utf-8": json.dumps(secret, ensure_ascii=False)[1:-1],
        "percent": quote(secret, safe=""),
        "percent, lower-case": quote(secret, safe="").lower(),
        "percent, / kept": quote(secret),
        "form": quote_plus(secret, safe=""),
        "httpx params": str(httpx.QueryParams({"k": secret}))[2:],
        "httpx url path": httpx.URL(f"http://h/{secret}").raw_path.decode()[1:],
        "upper-case": secret.upper(),
    }


@pytest.mark.parametrize("spelling", list(encoded(HOSTILE)))
def test_a_secret_is_masked_however_it_was_escaped(tmp_path: Path, spelling: str) -> None:
    put(tmp_path / "m.yaml", 'version: 1\nproviders:\n  - {name: s, type: static, text: "${T}"}\n')
    loaded = load_manifest(tmp_path / "m.yaml", environ={"T": HOSTILE})
    form = encoded(HOSTILE)[spelling]
    assert loaded.redact(f'sent {{"h": "{form}"}} here') == 'sent {"h": "***"} here'


def test_a_json_document_of_headers_keeps_no_secret(tmp_path: Path) -> None:
    put(tmp_path / "m.yaml", 'version: 1\nproviders:\n  - {name: s, type: static, text: "${T}"}\n')
    loaded = load_manifest(tmp_path / "m.yaml", environ={"T": HOSTILE})
    document = json.dumps(["GET", [["Authorization", f"Bearer {HOSTILE}"]]])
    assert loaded.redact(document) == '["GET", [["Authorization", "Bearer ***"]]]'


def memory_manifest(tmp_path: Path, dsn: str) -> Path:
    """A memory provider on PostgreSQL; the DSN as a double-quoted YAML string (JSON's)."""
    return put(
        tmp_path / "m.yaml",
        "version: 1\nproviders:\n  - name: notes\n    type: memory\n"
        f"    source: {{postgres: {{dsn: {json.dumps(dsn)}}}}}\n    query: {{text: x}}\n",
    )


OPTIONS = "-c search_path=tenant_acme -c statement_timeout=5000 -c jit=off"
KEYWORDS = (
    r"host=127.0.0.1 dbname=test user=svc-reader password='p%s \'q\" \\ é'"
    f" options='{OPTIONS}'"
)


@pytest.mark.parametrize(
    ("dsn", "masked", "shown"),
    [
        (  # a stray % that libpq refuses, quoting the password
            "postgresql://app_user:p%sk-live-9f@127.0.0.1:5432/test",
            ["app_user", "p%sk-live-9f"],
            ["127.0.0.1:5432/test"],
        ),
        (  # percent-encoded: the decoded password too; the default role is no secret
            "postgresql://postgres:s3cr%2Ft-Value@db.example:5432/prod",
            ["s3cr%2Ft-Value", "s3cr/t-Value"],
            ["postgres", "db.example:5432/prod"],
        ),
        (  # a raw / in a password: libpq quotes its start as a port
            "postgresql://postgres:p%Sn/tl-9f@127.0.0.1:5432/test",
            ["p%Sn/tl-9f", "p%Sn"],
            ["127.0.0.1:5432/test"],
        ),
        (  # key=value with escapes; a setting's value, but not a switch or a number
            KEYWORDS,
            ["svc-reader", "p%s 'q\" \\ é", "tenant_acme", OPTIONS],
            ["127.0.0.1", "test", "5000", "off"],
        ),
    ],
    ids=["url-stray-percent", "url-encoded", "url-raw-slash", "keywords"],
)
@pytest.mark.parametrize("via", ["literal", "variable"])
def test_a_dsns_password_user_and_options_are_secrets_however_written(
    tmp_path: Path, dsn: str, masked: list[str], shown: list[str], via: str
) -> None:
    path = memory_manifest(tmp_path, dsn if via == "literal" else "${PG_DSN}")
    loaded = load_manifest(path, environ={"PG_DSN": dsn})
    for part in masked:
        assert loaded.redact(f'libpq: "{part}" refused') == 'libpq: "***" refused'
    for part in shown:
        assert loaded.redact(f"at {part}") == f"at {part}"
