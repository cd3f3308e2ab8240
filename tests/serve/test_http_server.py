"""``composer serve``'s app built in process and driven by httpx through its ASGI interface:
turns, writeback, manifest, health, auth, limits, errors, OpenAPI; and as a process on
127.0.0.1: a graceful stop on SIGTERM."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from starlette.testclient import TestClient

from composer import Branch, Instruction, attach, load_manifest, prepare_turn
from composer.cli.main import main
from composer.serve import ServerConfig
from composer.serve.openapi import openapi_document
from serve.apps import served, served_async
from serve.conftest import CONFIGS, ROOT, notes_entry, process_gone, start_serve, stop

JSON = {"content-type": "application/json"}
TURN = {
    "branch": {"id": "payments-1", "name": "payments", "metadata": {"team": "pay"}},
    "system": "You are the on-call assistant.\n",
    "instruction": {"text": "The API returns 502 errors after the deploy, what do I do?"},
}


async def in_process(request: dict[str, Any]) -> Any:
    """The same turn through ``prepare_turn`` in this process, as a Python agent would run it."""
    manifest = load_manifest(CONFIGS, env="dev")
    given = request["branch"]
    branch = Branch(request.get("system"), name=given.get("name"), metadata=given.get("metadata"))
    attach(branch, manifest)
    instruction = request["instruction"]
    try:
        return await prepare_turn(
            branch,
            Instruction(
                instruction["text"],
                guidance=instruction.get("guidance"),
                context=instruction.get("context"),
            ),
        )
    finally:
        await manifest.aclose()


DEV = ServerConfig(env="dev", rate_limit=0)
"""``composer serve configs --env dev --rate-limit 0``: without a token, no rate limit."""


@pytest.fixture(scope="module")
def dev_app() -> Iterator[TestClient]:
    with served(CONFIGS, DEV) as client:
        yield client


@pytest.mark.parametrize(
    "request_body",
    [
        TURN,
        {**TURN, "instruction": {"text": "restart payments", "guidance": {"format": "steps"}}},
        {**TURN, "system": None},  # systemless: every provider skipped, none called (ADR D4)
    ],
)
async def test_a_turn_answers_what_prepare_turn_gives_in_process(
    request_body: dict[str, Any],
) -> None:
    async with served_async(CONFIGS, DEV) as (_, client):
        response = await client.post("/v1/turns", json=request_body)
    assert response.status_code == 200, response.text
    served = response.json()
    local = await in_process(request_body)
    assert served["guidance"] == local.guidance
    report = served["report"]
    for field in ("blocks", "fired", "skipped", "failed"):
        assert report[field] == getattr(local.report, field), field
    assert report["budget"] == local.report.budget
    assert report["tokens_used"] == local.report.tokens_used
    assert [(o["name"], o["outcome"], o["tokens"]) for o in report["outcomes"]] == [
        (o.name, o.outcome, o.tokens) for o in local.report.outcomes
    ]
    assert report["turn_id"]
    assert report["turn_id"] != local.report.turn_id


def test_each_branch_keeps_its_own_registry_and_the_request_names_it(dev_app: TestClient) -> None:
    client = dev_app
    one = client.post("/v1/turns", json={**TURN, "branch": {"id": "b-1", "name": "search"}})
    two = client.post("/v1/turns", json={**TURN, "branch": {"id": "b-2"}})
    assert "House rules for search:" in one.json()["guidance"]
    assert "House rules for the ops team:" in two.json()["guidance"]
    assert one.json()["branch_id"] == "b-1"


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b"{not json", []),
        (b"", []),
        (json.dumps({"branch": {"id": "b"}}).encode(), ["instruction"]),
        (json.dumps({**TURN, "branch": {"id": "has space"}}).encode(), ["branch", "id"]),
        (json.dumps({**TURN, "extra": 1}).encode(), ["extra"]),
        (json.dumps([1, 2]).encode(), []),
    ],
)
def test_a_bad_body_is_a_422_naming_the_problem_never_a_traceback(
    dev_app: TestClient, body: bytes, where: list[str]
) -> None:
    response = dev_app.post("/v1/turns", content=body, headers=JSON)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["type"] == "invalid_body"
    locations = [detail["loc"] for detail in error["details"]]
    assert any(loc[: len(where)] == where for loc in locations), locations
    assert "Traceback" not in response.text


def test_unknown_paths_and_methods_answer_json(dev_app: TestClient) -> None:
    missing = dev_app.get("/v2/nothing")
    wrong = dev_app.delete("/v1/turns")
    assert (missing.status_code, missing.json()["error"]["type"]) == (404, "not_found")
    assert (wrong.status_code, wrong.json()["error"]["type"]) == (405, "method_not_allowed")


def test_health_readiness_and_the_served_openapi_document(dev_app: TestClient) -> None:
    assert dev_app.get("/healthz").json() == {"status": "ok"}
    ready = dev_app.get("/readyz")
    assert (ready.status_code, ready.json()["status"]) == (200, "ready")
    served = dev_app.get("/openapi.json").json()
    assert served == openapi_document()


def test_the_committed_openapi_document_is_the_served_one() -> None:
    """Regenerate with `python -m composer.serve.openapi > docs/openapi.json`."""
    committed = json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))
    assert committed == openapi_document()


def test_the_manifest_is_the_effective_one(dev_app: TestClient) -> None:
    document = dev_app.get("/v1/manifest").json()
    assert document["env"] == "dev"
    assert document["path"].endswith("dev.yaml")
    providers = {p["name"]: p for p in document["manifest"]["providers"]}
    assert providers["status"]["enabled"] is False  # the dev overlay, applied
    assert document["manifest"]["budget"] == 1200


def test_secrets_are_masked_in_every_answer(tmp_path: Path) -> None:
    secret = "tok-8c1f0e2b9a"
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "version": 1,
                "providers": [{"name": "s", "type": "static", "text": "key ${SERVE_SECRET} here"}],
            }
        )
    )
    with served(manifest, env={"SERVE_SECRET": secret}) as client:
        turn = client.post("/v1/turns", json={**TURN, "system": "S\n"})
        document = client.get("/v1/manifest")
    assert turn.json()["report"]["blocks"] == ["key *** here"]
    assert turn.json()["guidance"] == "S\nkey *** here"
    assert document.json()["manifest"]["providers"][0]["text"] == "***"
    assert secret not in turn.text + document.text


def test_writeback_reaches_the_providers_hooks_and_the_next_turn(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    memory.write_text("")
    manifest = tmp_path / "m.yaml"
    entry = {
        "name": "notes",
        "type": "memory",
        "source": {"jsonl": str(memory)},
        "writeback": True,
        "query": {"tags": ["action_response"]},
    }
    manifest.write_text(yaml.safe_dump({"version": 1, "providers": [entry]}))
    result = {"action_responses": ["refund R-7 failed: card expired"]}
    with served(manifest) as client:
        url = "/v1/branches/payments-1/writeback"
        unknown = client.post(url, json=result)
        stored = client.post(url, json={**result, "branch": {"name": "payments"}})
        turn = client.post("/v1/turns", json=TURN)
        bad = client.post(url, json={"x": []})
    assert unknown.status_code == 409  # no turn and no branch: never a default namespace
    assert unknown.json()["error"]["type"] == "unknown_branch"
    assert stored.status_code == 200
    assert stored.json() == {
        "branch_id": "payments-1",
        "providers": [{"name": "notes", "stored": 1, "error": None, "cut": 0}],
        "stored": 1,
    }
    assert turn.json()["report"]["blocks"] == ["- refund R-7 failed: card expired"]
    assert bad.status_code == 422


@pytest.fixture
def guarded_server() -> Iterator[TestClient]:
    """A server with a bearer token, a small body limit and a tight rate limit (a bucket of
    two requests, refilled at one a second): each test starts with it full."""
    config = ServerConfig(env="dev", max_body_bytes=2000, rate_limit=1)
    with served(CONFIGS, config, env={"COMPOSER_SERVE_TOKEN": "the-token"}) as client:
        yield client


def test_without_the_token_a_request_is_refused() -> None:
    cases = [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic the-token"}]
    with served(
        CONFIGS, ServerConfig(env="dev"), env={"COMPOSER_SERVE_TOKEN": "the-token"}
    ) as client:
        for headers in cases:
            response = client.post("/v1/turns", json=TURN, headers=headers)
            assert response.status_code == 401, headers
            assert response.json()["error"]["type"] == "unauthorized"
            assert response.headers["www-authenticate"].startswith("Bearer")
        assert client.get("/healthz").status_code == 200  # probes are open


def test_with_the_token_a_turn_is_served_and_limits_apply(guarded_server: TestClient) -> None:
    headers = {"Authorization": "Bearer the-token"}
    client = guarded_server
    assert client.post("/v1/turns", json=TURN, headers=headers).status_code == 200
    too_large = client.post("/v1/turns", content=b"x" * 5000, headers={**JSON, **headers})
    limited = client.post("/v1/turns", json=TURN, headers=headers)
    assert (too_large.status_code, too_large.json()["error"]["type"]) == (413, "too_large")
    assert (limited.status_code, limited.json()["error"]["type"]) == (429, "rate_limited")
    assert int(limited.headers["retry-after"]) >= 1


def test_a_non_loopback_address_without_a_token_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COMPOSER_SERVE_TOKEN", raising=False)
    code = main(["serve", str(CONFIGS), "--env", "dev", "--host", "0.0.0.0", "--port", "0"])
    assert code == 1
    assert "refusing to listen on 0.0.0.0 without a token" in capsys.readouterr().err


def test_an_empty_token_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = tmp_path / "token"
    token.write_text("\n")
    code = main(["serve", str(CONFIGS), "--env", "dev", "--token-file", str(token)])
    assert code == 1
    assert "is empty" in capsys.readouterr().err


def test_sigterm_closes_every_provider(tmp_path: Path) -> None:
    """A graceful stop closes the branches' registries and the shared state: the MCP server
    process an `mcp` provider started is gone once `composer serve` has exited."""
    pid_file = tmp_path / "pid"
    entry = notes_entry(pid_file)
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump({"version": 1, "providers": [entry]}))
    server = start_serve([str(manifest)])
    turn = httpx.post(f"{server.url}/v1/turns", json=TURN, timeout=60)
    child = int(pid_file.read_text())
    assert stop(server.process) == 0
    assert turn.json()["report"]["outcomes"][0]["outcome"] == "fired"
    assert process_gone(child)


def test_a_killed_mcp_child_is_restarted_on_the_next_turn(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    entry = notes_entry(pid_file)
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump({"version": 1, "providers": [entry]}))
    with served(manifest) as client:
        before = client.post("/v1/turns", json=TURN).json()
        first_child = int(pid_file.read_text())
        os.kill(first_child, 9)
        after = client.post("/v1/turns", json=TURN).json()
    assert before["report"]["failed"] == after["report"]["failed"] == []
    assert after["report"]["blocks"] == before["report"]["blocks"]
    assert int(pid_file.read_text()) != first_child
