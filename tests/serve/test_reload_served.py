"""``composer serve --watch`` built in process: an edited manifest serves from the next turn
once it has settled, a broken edit keeps the last good one while ``/readyz`` (still ready),
``/metrics`` and the log say where it is broken, and each audit line names the revision that
served its turn."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from localserver import JsonAnswer, serving
from starlette.testclient import TestClient

from composer import load_manifest
from composer.errors import ServeError
from composer.serve import ServerConfig, create_app
from composer.serve.reloading import Reloader, mask_served
from serve.apps import LOOPBACK, served

WATCHING = ServerConfig(watch=True, metrics=True, rate_limit=0)


def manifest(text: str, audit: Path) -> str:
    return (
        f"version: 1\nruntime: {{audit: {{path: {json.dumps(str(audit))}}}}}\n"
        f"providers:\n  - {{name: policy, type: static, text: {text!r}}}\n"
    )


def replace(path: Path, text: str) -> None:
    """Write ``text`` as a deploy does: a new file renamed over the old."""
    fresh = path.with_suffix(".new")
    fresh.write_text(text)
    fresh.replace(path)


def turn(client: TestClient, number: int) -> dict[str, Any]:
    body = {"branch": {"id": "inc-1"}, "system": "S\n", "instruction": {"text": f"{number}"}}
    answer = client.post("/v1/turns", json=body)
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def eventually(test: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait until ``test()`` holds (a bound that only catches a hang)."""
    deadline = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def reload_block(client: TestClient) -> dict[str, Any]:
    answer = client.get("/readyz")
    assert answer.status_code == 200, answer.text  # a broken edit never makes it unready
    assert answer.json()["status"] == "ready"
    block: dict[str, Any] = answer.json()["reload"]
    return block


def reloads(client: TestClient, result: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "composer_manifest_reloads_total" and sample.labels == {
                "result": result
            }:
                return float(sample.value)
    return 0.0


def audited(audit: Path, count: int) -> list[dict[str, Any]]:
    """The audit file's lines once it holds ``count`` (written off the turn's path)."""
    eventually(
        lambda: audit.exists() and len(audit.read_text().splitlines()) >= count, "audit lines"
    )
    return [json.loads(line) for line in audit.read_text().splitlines()]


def test_an_edit_serves_at_the_next_turn_and_a_broken_one_keeps_the_last_good(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
    path, audit = tmp_path / "m.yaml", tmp_path / "turns.jsonl"
    path.write_text(manifest("policy one", audit))
    with served(path, WATCHING) as client:
        first = reload_block(client)
        assert first["generation"] == 1
        assert first["watching"] in ("events", "poll")
        assert first["error"] is None
        assert turn(client, 1)["guidance"] == "S\npolicy one"
        ok, failed = reloads(client, "ok"), reloads(client, "error")

        replace(path, manifest("policy two", audit))
        eventually(lambda: reload_block(client)["generation"] == 2, "the edit served")
        second = reload_block(client)
        assert second["sha256"] != first["sha256"]
        assert turn(client, 2)["guidance"] == "S\npolicy two"
        assert reloads(client, "ok") == ok + 1

        caplog.set_level(logging.WARNING)
        replace(path, manifest("policy three", audit).replace("version: 1", "versio: 1"))
        eventually(lambda: reload_block(client)["failures"] == 1, "the broken edit refused")
        broken = reload_block(client)
        error = broken["error"]
        assert (error["path"], error["line"], error["column"]) == (str(path), 1, 1)
        assert error["message"].startswith(f"{path}:1:1: ")
        assert (broken["generation"], broken["sha256"]) == (2, second["sha256"])
        assert turn(client, 3)["guidance"] == "S\npolicy two"
        assert reloads(client, "error") == failed + 1
        logged = [r.getMessage() for r in caplog.records if "not reloaded" in r.getMessage()]
        assert logged
        assert f"{path}:1:1: " in logged[0]

        replace(path, manifest("policy four", audit))
        eventually(lambda: reload_block(client)["generation"] == 3, "the fix served")
        assert reload_block(client)["error"] is None
        assert turn(client, 4)["guidance"] == "S\npolicy four"
        third = reload_block(client)["sha256"]

    lines = audited(audit, 4)
    revisions = [line["manifest"]["sha256"] for line in lines]
    assert revisions == [first["sha256"], second["sha256"], second["sha256"], third]


def test_a_manifest_read_from_no_file_cannot_be_watched(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\nproviders: []\n")
    loaded = load_manifest(path)
    loaded._path = None
    with pytest.raises(ServeError, match="--watch follows a manifest's files"):
        create_app(loaded, ServerConfig(watch=True))


def test_a_reload_that_would_let_a_client_split_a_shared_store_is_refused(
    tmp_path: Path,
) -> None:
    """The edit is checked as the first manifest was: a shared memory whose namespace reads
    what a client states is a broken edit, the last good manifest goes on."""
    path, audit = tmp_path / "m.yaml", tmp_path / "turns.jsonl"
    path.write_text(manifest("policy one", audit))
    shared = (
        manifest("policy two", audit) + "  - name: notes\n    type: memory\n"
        "    source: {sqlite: notes.sqlite, shared: true}\n"
        '    namespace: "{{ branch.metadata.team }}"\n'
    )
    with served(path, ServerConfig(watch=True, rate_limit=0)) as client:
        replace(path, shared)
        eventually(lambda: reload_block(client)["failures"] == 1, "the split refused")
        assert "namespace" in reload_block(client)["error"]["message"]
        assert reload_block(client)["error"]["path"] is None  # not a manifest's own mistake
        assert turn(client, 1)["guidance"] == "S\npolicy one"


def test_the_console_shows_the_manifest_serving_now(tmp_path: Path) -> None:
    path, audit = tmp_path / "m.yaml", tmp_path / "turns.jsonl"
    path.write_text(manifest("policy one", audit))
    with served(path, ServerConfig(watch=True, console=True, rate_limit=0)) as client:
        assert "policy one" in client.get("/console/manifest").text
        replace(path, manifest("policy two", audit))
        eventually(lambda: reload_block(client)["generation"] == 2, "the edit served")
        page = client.get("/console/manifest")
        assert page.status_code == 200
        assert "policy two" in page.text
        assert "policy one" not in page.text


def test_readiness_shows_a_bounded_part_of_an_error_however_long(tmp_path: Path) -> None:
    """A probe's answer stays small: an error of any length shows at most 2,000 characters,
    masked before it is cut (a secret cut short would not match its mask)."""
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\nproviders: []\n")
    reloader = Reloader(path, watch=False)
    cut = "x" * 1990 + "secret-value"  # the cut falls inside the secret
    reloader.watcher.error = ServeError(cut + "\nmore\n" * 1000)
    reloader.watcher.last_failure = 1.0
    error = reloader.status(lambda text: text.replace("secret-value", "***")).error
    assert error is not None
    assert len(error.message) == 2000
    assert "secret" not in error.message
    assert error.message.startswith("x" * 1990 + "***")
    assert (error.path, error.line, error.column, error.time) == (None, None, None, 1.0)


def test_a_secret_a_reloaded_manifest_brings_is_masked_in_the_servers_lines(
    tmp_path: Path,
) -> None:
    """The log lines of ``composer serve`` (its handler, the JSON log) are masked by the
    manifest it started with and by ``mask_served``: a secret first read by a reload is
    masked there too, from the moment that manifest is accepted."""
    secret = f"reloaded-secret-{tmp_path.name}"
    path, audit = tmp_path / "m.yaml", tmp_path / "turns.jsonl"
    path.write_text(manifest("policy one", audit))
    config = ServerConfig(watch=True, rate_limit=0)
    with served(path, config, env={"RELOADED_SECRET": secret}) as client:
        assert secret in mask_served(f"a line with {secret}")  # no manifest has it yet
        replace(path, manifest("key ${RELOADED_SECRET}", audit))
        eventually(lambda: reload_block(client)["generation"] == 2, "the edit served")
        assert turn(client, 1)["guidance"] == "S\nkey ***"  # answers mask it too
        assert mask_served(f"a line with {secret}") == "a line with ***"


def test_a_console_preview_that_a_reload_overtakes_runs_on_its_own_manifest(
    tmp_path: Path,
) -> None:
    """A preview holds the manifest it began with: a reload meanwhile closes it only after."""
    arrived, release = threading.Event(), threading.Event()

    class Slow(JsonAnswer):
        def do_GET(self) -> None:
            arrived.set()
            release.wait(30)
            super().do_GET()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    httpd.daemon_threads = True
    path, audit = tmp_path / "m.yaml", tmp_path / "turns.jsonl"

    def text(policy: str) -> str:
        return manifest(policy, audit) + (
            f"  - name: status\n    type: http\n    request: {{url: 'http://127.0.0.1:"
            f"{httpd.server_address[1]}/search', timeout_s: 60}}\n"
            "    response: {template: '{{ json.results[0].title }}'}\n"
        )

    path.write_text(text("policy one"))
    config = ServerConfig(watch=True, console=True, console_preview=True, rate_limit=0)
    with serving(httpd, before_stop=release.set), served(path, config) as client:
        answers: list[Any] = []
        preview = threading.Thread(
            target=lambda: answers.append(
                client.post(
                    "/console/preview", data={"instruction": "x"}, headers={"origin": LOOPBACK}
                )
            )
        )
        preview.start()
        assert arrived.wait(30), "the preview reaches the status service"
        replace(path, text("policy two"))
        eventually(lambda: reload_block(client)["generation"] == 2, "the edit served")
        release.set()
        preview.join(60)
        assert answers[0].status_code == 200
        assert "all green" in answers[0].text  # the status block came back: not failed
        assert "policy one" in answers[0].text  # the manifest the preview began with
