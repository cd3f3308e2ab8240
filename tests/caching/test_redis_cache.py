"""runtime.cache.redis: provider caches shared through a real Redis server, between manifests
loaded separately (as two processes would), with expiry; an unreachable Redis is no cache,
never a failed turn."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from memory.services import free_port, require_redis_extra

from composer.caching import MISS, RedisCache
from composer.catalog import ProviderTypes
from composer.manifest import Manifest
from composer.manifest.loader import load_manifest
from composer.turn import Branch, Instruction, prepare_turn


@pytest.fixture
def prefix(redis_url: str) -> Any:
    """A key prefix of this test's own; its keys are removed afterwards."""
    import redis

    name = f"composer-test:{uuid.uuid4().hex}:"
    yield name
    client = redis.Redis.from_url(redis_url)
    try:
        for key in client.scan_iter(match=f"{name}*"):
            client.delete(key)
    finally:
        client.close()


def manifest_file(tmp_path: Path, url: str, prefix: str) -> Path:
    (tmp_path / "memory.jsonl").write_text('{"content": "deploy on tuesdays"}\n')
    path = tmp_path / "m.yaml"
    path.write_text(
        f"""\
version: 1
runtime:
  cache: {{redis: {{url: "{url}", prefix: "{prefix}"}}}}
providers:
  - name: notes
    type: memory
    source: {{jsonl: memory.jsonl}}
    cache: {{ttl_s: 60}}
"""
    )
    return path


async def turn(manifest: Manifest) -> tuple[str | None, list[str]]:
    import composer

    branch = Branch("system\n")
    composer.attach(branch, manifest)
    prepared = await prepare_turn(branch, Instruction("when do we deploy?"))
    report = branch.last_context_report
    assert report is not None
    return prepared.guidance, [outcome.outcome for outcome in report.outcomes]


async def test_two_separately_loaded_manifests_share_the_cache(
    tmp_path: Path, redis_url: str, prefix: str
) -> None:
    path = manifest_file(tmp_path, redis_url, prefix)
    first, second = load_manifest(path), load_manifest(path)  # two replicas, two caches
    try:
        guidance, outcomes = await turn(first)
        assert guidance == "system\n- deploy on tuesdays"
        assert outcomes == ["fired"]
        (tmp_path / "memory.jsonl").write_text('{"content": "changed"}\n')
        guidance, outcomes = await turn(second)
        assert guidance == "system\n- deploy on tuesdays"  # the first replica's answer
        assert outcomes == ["cached"]
    finally:
        await first.aclose()
        await second.aclose()


async def test_entries_expire_and_nothing_is_cached_too(redis_url: str, prefix: str) -> None:
    cache = RedisCache(redis_url, prefix=prefix)
    try:
        await cache.set("k", "text", 2.0)  # long enough to read back on a loaded machine
        await cache.set("empty", None, 60)
        assert await cache.get("k") == "text"
        assert await cache.get("empty") is None  # a cached "nothing this turn"
        assert await cache.get("unknown") is MISS
        await asyncio.sleep(2.5)
        assert await cache.get("k") is MISS
    finally:
        await cache.aclose()


async def test_an_unreachable_redis_means_no_cache_not_a_failed_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    require_redis_extra()  # without the client the cache is a ProviderError, not an outage
    url = f"redis://user:hunter2@127.0.0.1:{free_port()}/0"  # nothing listens there
    manifest = load_manifest(manifest_file(tmp_path, url, "down:"), types=ProviderTypes.installed())
    try:
        with caplog.at_level(logging.WARNING):
            for _ in range(2):
                guidance, outcomes = await turn(manifest)
                assert guidance == "system\n- deploy on tuesdays"
                assert outcomes == ["fired"]
        warnings = [r for r in caplog.records if "redis cache" in r.getMessage()]
        assert len(warnings) == 1  # once per outage, not once per turn
        assert "hunter2" not in caplog.text
    finally:
        await manifest.aclose()
