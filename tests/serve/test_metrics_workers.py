"""``composer serve --workers 2 --metrics`` as a process, its branch state in the real
PostgreSQL: one scrape, whichever worker answers it, counts the turns both workers served;
the HTTP requests too; the token guards ``/metrics`` and the ``--metrics-port`` listener
needs none; the supervisor's multiprocess directory is gone once it stops."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import httpx
import pytest
from memory.services import postgres_schema
from memory.stores_fixtures import postgres_dsn

from serve.conftest import start_serve

__all__ = ["postgres_dsn"]  # the server's fixture

prometheus_client = pytest.importorskip(
    "prometheus_client", reason="the metrics extra is not installed"
)
from prometheus_client import CollectorRegistry  # noqa: E402
from prometheus_client.multiprocess import MultiProcessCollector  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

TOKEN = "workers-metrics-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MANIFEST = """\
version: 1
providers:
  - {name: rules, type: static, text: "House rules for {{ branch.name }}"}
"""
MAX_TURNS = 400  # a bound that only catches a kernel that never hands a worker a connection


def value(text: str, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly ``labels`` in a scrape (0 when absent)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def turns_by_worker(folder: Path, scratch: Path) -> dict[str, float]:
    """Each worker's own turn count, read from its own counter file alone."""
    counts: dict[str, float] = {}
    for file in sorted(folder.glob("counter_*.db")):
        alone = scratch / file.stem
        alone.mkdir(exist_ok=True)
        shutil.copy(file, alone / file.name)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(alone))  # type: ignore[no-untyped-call]
        for family in registry.collect():
            for sample in family.samples:
                if sample.name == "composer_turns_total":
                    counts[file.stem.removeprefix("counter_")] = sample.value
    return counts


def turn(n: int) -> dict[str, object]:
    branch = {"id": f"b-{n % 7}", "name": "ops"}
    return {"branch": branch, "system": "S\n", "instruction": {"text": f"q {n}"}}


def test_one_scrape_counts_the_turns_of_both_workers(tmp_path: Path, postgres_dsn: str) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST)
    spool = tmp_path / "spool"  # the server's TMPDIR: its multiprocess directory is made here
    spool.mkdir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with postgres_schema(postgres_dsn) as schema:
        args = [str(manifest), "--workers", "2", "--metrics", "--metrics-port", "0"]
        args += ["--state", postgres_dsn, "--state-schema", schema, "--rate-limit", "0"]
        server = start_serve(args, env={"COMPOSER_SERVE_TOKEN": TOKEN, "TMPDIR": str(spool)})
        try:
            found = re.search(r"without a token on port (\d+)", server.line)
            assert found is not None, server.line
            open_url = f"http://127.0.0.1:{found[1]}/metrics"
            (folder,) = spool.glob("composer-metrics-*")
            sent = 0
            while sent < MAX_TURNS:  # a new connection each: the kernel spreads them
                answer = httpx.post(f"{server.url}/v1/turns", json=turn(sent), headers=AUTH)
                assert answer.status_code == 200, answer.text
                sent += 1
                each = turns_by_worker(folder, scratch)
                if sent >= 10 and len(each) == 2 and min(each.values()) > 0:
                    break
            each = turns_by_worker(folder, scratch)
            assert len(each) == 2, each
            assert min(each.values()) > 0, each  # both workers served turns
            assert sum(each.values()) == sent

            assert httpx.get(f"{server.url}/metrics").status_code == 401
            for _ in range(4):  # whichever worker answers, the same whole count
                scrape = httpx.get(f"{server.url}/metrics", headers=AUTH)
                assert scrape.status_code == 200
                assert value(scrape.text, "composer_turns_total") == sent
                served = value(
                    scrape.text,
                    "composer_http_requests_total",
                    route="/v1/turns",
                    method="POST",
                    status="200",
                )
                assert served == sent
                assert (
                    value(
                        scrape.text,
                        "composer_http_request_duration_seconds_count",
                        route="/v1/turns",
                        method="POST",
                        status="200",
                    )
                    == sent
                )
            outcomes = value(
                scrape.text, "composer_provider_outcomes_total", provider="rules", outcome="fired"
            )
            assert outcomes == sent
            unauthenticated = httpx.get(open_url)
            assert unauthenticated.status_code == 200
            assert value(unauthenticated.text, "composer_turns_total") == sent
            assert httpx.get(open_url.replace("/metrics", "/v1/manifest")).status_code == 404
        finally:
            assert server.stop() == 0
    assert not folder.exists()
