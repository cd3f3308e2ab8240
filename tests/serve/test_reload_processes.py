"""``composer serve`` as processes following their manifest: ``--watch`` on a folder the
kubelet's atomic writer updates (``reload.configmap``), turns going on throughout; SIGHUP
without ``--watch``; and each worker of ``--workers 2`` reloading by itself, on an edit or on
the SIGHUP its supervisor forwards."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from memory.services import postgres_schema
from memory.stores_fixtures import postgres_dsn
from reload.configmap import ConfigMapVolume, version

from serve.conftest import Server, start_serve

__all__ = ["postgres_dsn"]  # the workers' state store

BOUND_S = 60.0  # a bound that only catches a server that never reloads


def eventually(test: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not test():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def readiness(server: Server) -> dict[str, Any]:
    answer = httpx.get(f"{server.url}/readyz", timeout=BOUND_S)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def blocks(server: Server, branch: str = "inc-1") -> list[str]:
    body = {"branch": {"id": branch}, "system": "S\n", "instruction": {"text": "x"}}
    answer = httpx.post(f"{server.url}/v1/turns", json=body, timeout=BOUND_S)
    assert answer.status_code == 200, answer.text
    found: list[str] = answer.json()["report"]["blocks"]
    return found


def reload_errors(server: Server) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{server.url}/metrics", timeout=BOUND_S).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "composer_manifest_reloads_total" and sample.labels == {
                "result": "error"
            }:
                return float(sample.value)
    return 0.0


def static(text: str) -> str:
    return f"version: 1\nproviders:\n  - {{name: policy, type: static, text: {text!r}}}\n"


def replace(path: Path, text: str) -> None:
    fresh = path.with_suffix(".new")
    fresh.write_text(text)
    fresh.replace(path)


def test_a_served_configmap_update_serves_and_no_turn_sees_two_versions(tmp_path: Path) -> None:
    """Clients send turns throughout; the ConfigMap is updated, broken, fixed."""
    pytest.importorskip("prometheus_client", reason="the metrics extra is not installed")
    volume = ConfigMapVolume(tmp_path / "manifests")
    volume.publish(version(1))
    server = start_serve(
        [str(volume.root), "--env", "dev", "--watch", "--metrics", "--rate-limit", "0"]
    )
    seen: list[list[int]] = [[] for _ in range(3)]
    done = threading.Event()
    failures: list[BaseException] = []

    def client(index: int) -> None:
        try:
            while not done.is_set():
                texts = blocks(server, f"c{index}")
                numbers = {int(text.rsplit("v", 1)[1]) for text in texts}
                assert len(numbers) == 1, texts  # one version's two files, never a mix
                seen[index].append(numbers.pop())
        except BaseException as e:
            failures.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(seen))]
    try:
        first = readiness(server)["reload"]
        assert first["generation"] == 1
        assert first["watching"] in ("events", "poll")  # events with the watch extra
        for thread in threads:
            thread.start()
        volume.publish(version(2))
        eventually(lambda: readiness(server)["reload"]["generation"] == 2, "v2 served")
        assert blocks(server) == ["base v2", "dev v2"]

        volume.publish(version(3, broken=True))
        eventually(lambda: readiness(server)["reload"]["failures"] == 1, "v3 refused")
        reload = readiness(server)["reload"]
        error = reload["error"]
        assert (error["path"], error["line"], error["column"]) == (
            str(volume.root / "dev.yaml"),
            2,
            1,
        )
        assert reload["generation"] == 2
        assert blocks(server) == ["base v2", "dev v2"]
        assert reload_errors(server) == 1

        volume.publish(version(4))
        eventually(lambda: readiness(server)["reload"]["generation"] == 3, "v4 served")
        assert readiness(server)["reload"]["error"] is None
        eventually(lambda: all(s and s[-1] == 4 for s in seen), "every client on v4")
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=BOUND_S)
        assert server.stop() == 0
    assert not failures, failures
    for numbers in seen:
        assert numbers == sorted(numbers)  # a branch never goes back to an older version
        assert 3 not in numbers


def test_sighup_reloads_a_server_that_does_not_watch(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(static("one"))
    server = start_serve([str(path), "--rate-limit", "0"])
    try:
        assert readiness(server)["reload"]["watching"] == "manual"
        replace(path, static("two"))
        assert blocks(server) == ["one"]  # nothing is watched
        server.process.send_signal(signal.SIGHUP)
        eventually(lambda: readiness(server)["reload"]["generation"] == 2, "the SIGHUP reload")
        assert blocks(server) == ["two"]

        replace(path, "version: [\n")
        server.process.send_signal(signal.SIGHUP)
        eventually(lambda: readiness(server)["reload"]["failures"] == 1, "the broken edit")
        assert readiness(server)["reload"]["error"]["path"] == str(path)
        server.process.send_signal(signal.SIGHUP)  # nothing new: nothing happens
        assert blocks(server) == ["two"]
        assert server.process.poll() is None

        replace(path, static("three"))
        for _ in range(500):  # a storm: one look running, one more asked for, no queue
            server.process.send_signal(signal.SIGHUP)
        eventually(lambda: readiness(server)["reload"]["generation"] == 3, "the storm's reload")
        assert readiness(server)["reload"]["reloads"] == 2
        assert blocks(server) == ["three"]
        assert server.process.poll() is None
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("how", ["--watch", "SIGHUP"])
def test_each_worker_reloads_by_itself(tmp_path: Path, postgres_dsn: str, how: str) -> None:
    """Two workers: each writes its own reload line (JSON log), then every turn, whichever
    worker takes it, is served by the new manifest."""
    path = tmp_path / "m.yaml"
    path.write_text(static("one"))
    log = tmp_path / "stderr.log"
    with postgres_schema(postgres_dsn) as schema, log.open("w") as stderr:
        args = [str(path), "--workers", "2", "--state", postgres_dsn, "--state-schema", schema]
        args += ["--log-format", "json", "--rate-limit", "0"]
        server = start_serve([*args, *([how] if how == "--watch" else [])], stderr=stderr)
        try:
            assert {blocks(server) == ["one"] for _ in range(6)} == {True}
            replace(path, static("two"))
            if how == "SIGHUP":
                server.process.send_signal(signal.SIGHUP)  # the supervisor's: it forwards it

            def reloaded() -> int:
                lines = [json.loads(line) for line in log.read_text().splitlines() if line]
                return sum(1 for line in lines if "manifest reloaded" in line["message"])

            eventually(lambda: reloaded() == 2, "both workers' reload lines")
            assert {tuple(blocks(server)) for _ in range(10)} == {("two",)}
            assert server.process.poll() is None
        finally:
            assert server.stop() == 0
