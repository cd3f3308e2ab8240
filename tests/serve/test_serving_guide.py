"""The serving guide's first request works as printed, and a caller is authenticated before
its body's type is looked at.

The guide's ``curl`` command is read from ``docs/guides/serving.md`` and run by a shell, as a
reader would paste it, against ``composer serve`` on a copy of ``configs/`` (its address put in
for the guide's ``127.0.0.1:8080``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator

import httpx
import pytest
from docpages import DOCS, blocks, copy_configs

from serve.conftest import STARTUP_S, Server, start_serve

TOKEN = "the-guides-token-0123456789"
GUIDE = DOCS / "guides" / "serving.md"
GUIDE_URL = "http://127.0.0.1:8080"


def guide_curl() -> str:
    """The guide's first ``curl`` command, as printed."""
    found = [b.text for b in blocks(GUIDE, "sh") if b.text.lstrip().startswith("curl ")]
    assert found, "the serving guide shows no curl command"
    return found[0]


@pytest.fixture(scope="module")
def prod_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``composer serve configs --env prod`` with a token, as the guide starts it."""
    configs = copy_configs(tmp_path_factory.mktemp("guide"))
    env = {"COMPOSER_SERVE_TOKEN": TOKEN, "STATUS_TOKEN": "unused"}
    server = start_serve([str(configs), "--env", "prod"], env=env)
    yield server
    assert server.stop() == 0


def run_curl(command: str, server: Server, token: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    assert GUIDE_URL in command
    return subprocess.run(
        ["bash", "-c", command.replace(GUIDE_URL, server.url)],
        env={**os.environ, "COMPOSER_SERVE_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=STARTUP_S,
        check=True,
    )


def test_the_guides_curl_command_gets_the_turn_it_shows(prod_server: Server) -> None:
    answer = json.loads(run_curl(guide_curl(), prod_server, TOKEN).stdout)
    assert answer["branch_id"] == "inc-4711"
    assert answer["guidance"].startswith("You are the on-call assistant.\nHouse rules for payments")
    fired = [entry["provider_name"] for entry in answer["report"]["fired"]]
    assert "house-rules" in fired


def test_a_wrong_token_is_a_401_whatever_the_bodys_type(prod_server: Server) -> None:
    """curl's default body type (a form) with a wrong token: refused for the token."""
    command = guide_curl().replace('-H "Content-Type: application/json" \\\n', "")
    assert "Content-Type" not in command
    command = command.replace("curl -s", "curl -s -w '\\n%{http_code}'")
    wrong = run_curl(command, prod_server, "not-the-token").stdout.splitlines()
    assert wrong[-1] == "401"
    assert json.loads(wrong[0])["error"]["type"] == "unauthorized"
    right = run_curl(command, prod_server, TOKEN).stdout.splitlines()
    assert right[-1] == "415"  # the right token, the wrong type: then the type is refused
    assert "Content-Type: application/json" in json.loads(right[0])["error"]["message"]


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", None])
def test_only_a_json_body_type_is_taken_and_only_after_the_token(
    prod_server: Server, kind: str | None
) -> None:
    url = f"{prod_server.url}/v1/turns"
    body = json.dumps({"branch": {"id": "b"}, "system": "S\n", "instruction": {"text": "x"}})
    headers = {} if kind is None else {"Content-Type": kind}
    for token, status in (("wrong", 401), (TOKEN, 415)):
        sent = {**headers, "Authorization": f"Bearer {token}"}
        response = httpx.post(url, content=body, headers=sent, timeout=STARTUP_S)
        assert response.status_code == status, (kind, token, response.text)
    no_token = httpx.post(url, content=body, headers=headers, timeout=STARTUP_S)
    assert no_token.status_code == 401
