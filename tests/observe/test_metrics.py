"""Prometheus metrics, scraped over HTTP from prometheus_client's own server on 127.0.0.1.

Counters are process-wide (one default registry), so each test reads the change its own turns
made: a scrape before, a scrape after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import composer

from .conftest import turns, write

prometheus_client = pytest.importorskip(
    "prometheus_client", reason="the metrics extra is not installed"
)
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def scrape() -> Iterator[str]:
    """The URL of a metrics endpoint serving the default registry."""
    server, thread = prometheus_client.start_http_server(0, addr="127.0.0.1")
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def read(url: str) -> Samples:
    text = httpx.get(url, timeout=10).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def change(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


MANIFEST = """\
    version: 1
    budget: 10
    runtime: {metrics: true}
    providers:
      - {name: m-rules, type: static, priority: 5, text: "Answer in English.\\n"}
      - {name: m-long, type: static, text: "{{ 'word ' * 30 }}"}
      - {name: m-broken, type: static, text: "{{ instruction.context.ticket.id }}"}
"""


async def test_provider_outcomes_durations_and_tokens_against_budget_are_scraped(
    tmp_path: Path, scrape: str
) -> None:
    manifest = composer.load_manifest(write(tmp_path / "m.yaml", MANIFEST))
    before = await asyncio.to_thread(read, scrape)
    await turns(manifest, 3)
    after = await asyncio.to_thread(read, scrape)
    outcomes = "composer_provider_outcomes_total"
    assert change(before, after, outcomes, provider="m-rules", outcome="fired") == 3
    assert change(before, after, outcomes, provider="m-long", outcome="over_budget") == 3
    assert change(before, after, outcomes, provider="m-broken", outcome="failed") == 3
    duration = "composer_provider_duration_seconds_count"
    assert change(before, after, duration, provider="m-rules", outcome="fired") == 3
    assert change(before, after, "composer_turns_total") == 3
    assert change(before, after, "composer_turn_tokens_sum") == 3 * 4
    assert change(before, after, "composer_turn_tokens_count") == 3
    # 4 of 10 tokens: in the 0.5 bucket, not in the 0.25 one
    ratio = "composer_turn_budget_used_ratio_bucket"
    assert change(before, after, ratio, le="0.5") == 3
    assert change(before, after, ratio, le="0.25") == 0
    await manifest.aclose()


async def test_audit_lines_are_counted_by_result(tmp_path: Path, scrape: str) -> None:
    text = MANIFEST.replace("{metrics: true}", "{metrics: true, audit: {path: /dev/full}}")
    manifest = composer.load_manifest(write(tmp_path / "m.yaml", text))
    before = await asyncio.to_thread(read, scrape)
    await turns(manifest, 2)
    assert manifest.shared["observe"].audit.flush()
    after = await asyncio.to_thread(read, scrape)
    assert change(before, after, "composer_audit_lines_total", result="failed") == 2
    await manifest.aclose()


async def test_reloads_are_counted_with_the_time_of_the_last_good_one(
    tmp_path: Path, scrape: str
) -> None:
    path = write(tmp_path / "m.yaml", MANIFEST)
    before = await asyncio.to_thread(read, scrape)
    async with composer.ManifestWatcher(path, watch="poll", poll_s=3600) as watcher:
        path.write_text(path.read_text().replace("budget: 10", "budget: 11"))
        assert await watcher.check()
        path.write_text("version: 1\nbudgett: 3\n")
        assert not await watcher.check()
        after = await asyncio.to_thread(read, scrape)
        assert change(before, after, "composer_manifest_reloads_total", result="ok") == 1
        assert change(before, after, "composer_manifest_reloads_total", result="error") == 1
        gauge = after[("composer_manifest_last_good_load_timestamp_seconds", ())]
        assert gauge == pytest.approx(watcher.last_good_load)
