"""``/readyz`` of ``composer serve``'s app (built in process) reports its audit sink: the kind, whether it is
writing, the lines lost; never where it writes (no DSN, no password), and a sink that fails
never makes the server unready."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from memory.services import free_port, postgres_schema, postgres_server

from composer.serve import ServerConfig
from serve.apps import served
from serve.conftest import STARTUP_S

TURN = {"branch": {"id": "b-1"}, "system": "You are on call.\n", "instruction": {"text": "deploy"}}


@pytest.fixture(scope="module")
def postgres_dsn() -> Iterator[str]:
    with postgres_server() as dsn:
        yield dsn


def manifest(folder: Path, dsn: str, schema: str) -> Path:
    path = folder / "m.yaml"
    audit = f"{{postgres: {{dsn: {json.dumps(dsn)}, schema: {schema}}}}}"
    path.write_text(
        f"version: 1\nruntime: {{audit: {audit}}}\n"
        "providers:\n  - {name: rules, type: static, text: 'Answer in English.'}\n"
    )
    return path


def readiness_after_turns(path: Path, turns: int, done: Callable[[Any], bool]) -> Any:
    """``/readyz`` of a server of ``path`` after ``turns`` turns, once ``done(audit)`` holds
    (the writer lingers, and waits after a failure, before its next batch)."""
    with served(path, ServerConfig(rate_limit=0)) as client:
        for _ in range(turns):
            assert client.post("/v1/turns", json=TURN).status_code == 200
        deadline = time.monotonic() + STARTUP_S  # a bound that only catches a writer that hangs
        while True:
            ready = client.get("/readyz")
            assert ready.status_code == 200
            body = ready.json()
            if done(body["audit"]) or time.monotonic() > deadline:
                return body
            time.sleep(0.05)


def test_readyz_reports_a_writing_table(tmp_path: Path, postgres_dsn: str) -> None:
    with postgres_schema(postgres_dsn) as schema:
        path = manifest(tmp_path, postgres_dsn, schema)
        body = readiness_after_turns(path, 2, lambda audit: audit["writing"] is not None)
    assert body["audit"] == {"kind": "postgres", "writing": True, "lost": 0}


def test_readyz_reports_an_unreachable_table_and_stays_ready(tmp_path: Path) -> None:
    dsn = f"postgresql://postgres:Sekr1t-readyz@127.0.0.1:{free_port()}/test"
    body = readiness_after_turns(manifest(tmp_path, dsn, "audit"), 2, lambda a: a["lost"] >= 2)
    assert body["status"] == "ready"
    assert body["audit"] == {"kind": "postgres", "writing": False, "lost": 2}
    assert "Sekr1t" not in json.dumps(body)
    assert "127.0.0.1" not in json.dumps(body)
