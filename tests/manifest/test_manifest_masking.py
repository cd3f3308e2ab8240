"""What is masked: every value from a variable, except a URL's scheme, host and port, which a
failure must be able to name. Header values, query values, bodies, credentials in a URL and a
path from a variable stay masked."""

from __future__ import annotations

import socket
from pathlib import Path

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
