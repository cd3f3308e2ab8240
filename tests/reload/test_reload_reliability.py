"""Reloads under load: 100 edits, every other one broken, while 20 branches keep taking turns.

The manifest is an overlay (edited) on a base with an http provider (a real keep-alive server
on 127.0.0.1: connections) and a corpus (files). Edit ``k`` stamps ``k`` into two providers'
texts and the budget, so a turn that saw parts of two edits would show two stamps. Edits are
written as deployers write them, to a new file renamed over the old one, and the watcher
notices them itself (polling every 10 ms). Must hold: no turn fails; every turn saw exactly one
valid edit, whole; every valid edit is served and seen by a turn; every broken one is refused
with a located error while the last good one serves; no descriptor (file, socket) is left
open when the watcher is closed.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from localserver import serving_json
from observe.conftest import write

import composer
from composer.errors import ManifestError
from reload.waiting import eventually

EDITS = 100
BRANCHES = 20
BUDGET = 1000


@pytest.fixture
def status_url() -> Iterator[str]:
    with serving_json() as url:
        yield url


def descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def overlay(k: int) -> str:
    """Edit ``k``: valid when odd; even edits are broken, alternately in YAML and in a key."""
    if k % 2 == 0:
        if k % 4 == 0:
            return f"extends: base.yaml\nbudget: [{k}\n"  # YAML that does not parse
        return f"extends: base.yaml\nbudget: {BUDGET + k}\nbudgett: {k}\n"  # an unknown key
    return (
        f"extends: base.yaml\nbudget: {BUDGET + k}\nproviders:\n"
        f"  - {{name: a, type: static, text: 'A{k}'}}\n"
        f"  - {{name: b, type: static, text: 'B{k}'}}\n"
    )


def replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole: a new file renamed over the old one."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def grown(count: Callable[[], int], start: int) -> Callable[[], bool]:
    return lambda: count() > start


async def test_reloads_under_load_keep_every_turn_whole(tmp_path: Path, status_url: str) -> None:
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "deploy.md").write_text("# Deploy\n\nhow to deploy and roll back\n")
    write(
        tmp_path / "base.yaml",
        f"""\
        version: 1
        runtime: {{report: {{history: 3}}}}
        providers:
          - name: status
            type: http
            request: {{url: "{status_url}/search"}}
            response: {{template: "{{{{ json.results[0].title }}}}"}}
          - {{name: runbooks, type: file_corpus, root: corpus}}
        """,
    )
    path = tmp_path / "dev.yaml"
    replace(path, overlay(-1))

    # what the process holds before: a first watcher run, so lazy one-time set-up is done
    async with composer.ManifestWatcher(tmp_path, env="dev", watch="poll") as warm:
        warm_branch = composer.Branch("sys\n")
        warm.attach(warm_branch)
        await composer.prepare_turn(warm_branch, "deploy")
    await asyncio.sleep(0.1)
    before = descriptors()

    # Each edit is renamed into place whole: a short settle delay keeps 100 reloads quick.
    watcher = composer.ManifestWatcher(
        tmp_path, env="dev", watch="poll", poll_s=0.01, settle_s=0.02
    )
    await watcher.start()
    seen: set[int] = set()
    problems: list[str] = []
    turns_taken = 0
    stop = asyncio.Event()

    async def branch_loop(n: int) -> None:
        nonlocal turns_taken
        branch = composer.Branch("sys\n", name=f"b{n}")
        watcher.attach(branch)
        while not stop.is_set():
            turn = await composer.prepare_turn(branch, "deploy")
            report = turn.report
            assert report is not None
            turns_taken += 1
            stamps = {block[1:] for block in report.blocks if block[:1] in "AB"}
            k = (report.budget or 0) - BUDGET
            if report.failed or len(report.blocks) != 4 or stamps != {str(k)} or k % 2 == 0:
                problems.append(
                    f"branch {n}: budget {report.budget} {[(o.name, o.outcome, o.error) for o in report.outcomes]}"
                )
            seen.add(k)
            await asyncio.sleep(0.05)

    manifests = [watcher.manifest]
    loops = [asyncio.ensure_future(branch_loop(n)) for n in range(BRANCHES)]
    started = time.monotonic()
    for k in range(1, EDITS + 1):
        failures, generation = watcher.failures, watcher.generation
        replace(path, overlay(k))
        if k % 2:
            await eventually(grown(lambda: watcher.generation, generation), f"edit {k} served")
            assert watcher.manifest.budget == BUDGET + k
            manifests.append(watcher.manifest)
            await eventually(functools.partial(set.__contains__, seen, k), f"edit {k} seen")
        else:
            await eventually(grown(lambda: watcher.failures, failures), f"edit {k} refused")
            assert isinstance(watcher.error, ManifestError)
            assert watcher.error.path == str(tmp_path / "dev.yaml")
            assert watcher.error.line >= 1
            assert watcher.manifest.budget == BUDGET + k - 1  # the last good one serves
    elapsed = time.monotonic() - started
    stop.set()
    await asyncio.gather(*loops)
    await watcher.aclose()

    assert problems == []
    assert [m.budget for m in manifests if m.shared] == []  # every manifest closed
    assert seen >= set(range(1, EDITS + 1, 2))
    assert (watcher.reloads, watcher.failures) == (EDITS // 2, EDITS // 2)
    assert turns_taken > EDITS * 2
    await eventually(lambda: descriptors() <= before, f"descriptors back to {before}", 10)
    assert elapsed < 120  # a bound that only catches a runaway
