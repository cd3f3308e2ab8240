"""Many live branches on one manifest with an http provider share one connection pool.

Each branch of a long-running service keeps its registry; against a keep-alive server, a
client per branch would keep a connection (a descriptor) per branch until the process runs
out. The pool is the manifest's: descriptors stay flat however many branches there are.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from localserver import serving_json

import composer


@pytest.fixture
def keep_alive() -> Iterator[str]:
    with serving_json() as url:
        yield url


def descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_live_branches_do_not_each_hold_a_connection(tmp_path: Path, keep_alive: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "version: 1\nproviders:\n  - name: status\n    type: http\n"
        f"    request: {{url: '{keep_alive}/search', max_connections: 4}}\n"
    )
    manifest = composer.load_manifest(path)
    branches = []
    before = descriptors()
    for _ in range(300):
        branch = composer.Branch("sys\n")
        composer.attach(branch, manifest)
        turn = await composer.prepare_turn(branch, "status")
        assert turn.report is not None
        assert turn.report.failed == []
        branches.append(branch)  # every conversation stays alive
    assert descriptors() - before <= 12  # a pool of 4 connections and the loop's own
    await manifest.aclose()
