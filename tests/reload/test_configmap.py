"""A ConfigMap update, as the kubelet's atomic writer makes it (``reload.configmap``), is
followed by ``ManifestWatcher``: the links the manifest is read through never change, only
the ``..data`` link they go through, so a watcher must watch the folder and compare what the
links lead to. A broken version keeps the last good one; no turn sees two versions; a load
that raced a swap is never served."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Literal

import pytest

import composer
from composer.errors import ManifestError
from reload.configmap import ConfigMapVolume, version
from reload.waiting import blocks, eventually

SETTLE_S = 0.05


@pytest.mark.parametrize("mode", ["events", "poll"])
async def test_a_configmap_update_is_served_and_a_broken_one_keeps_the_last_good(
    tmp_path: Path, mode: Literal["events", "poll"]
) -> None:
    if mode == "events":
        pytest.importorskip("watchfiles", reason="the watch extra is not installed")
    volume = ConfigMapVolume(tmp_path / "manifests")
    first = volume.publish(version(1))
    assert first.name.startswith("..20")
    link = volume.root / "dev.yaml"
    before = os.lstat(link)
    async with composer.ManifestWatcher(
        volume.root, env="dev", watch=mode, poll_s=0.05, debounce_s=0.05, settle_s=SETTLE_S
    ) as watcher:
        branch = composer.Branch("sys\n")
        watcher.attach(branch)
        assert await blocks(branch) == ["base v1", "dev v1"]
        await asyncio.sleep(0.2)  # the watch is set up

        volume.publish(version(2))
        after = os.lstat(link)
        # what a watcher of the files' own paths and times sees: nothing changed
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
        assert os.readlink(link) == "..data/dev.yaml"
        await eventually(lambda: watcher.generation == 2, f"the update seen by {mode}")
        assert await blocks(branch) == ["base v2", "dev v2"]

        volume.publish(version(3, broken=True))
        await eventually(lambda: watcher.failures == 1, f"the broken update seen by {mode}")
        error = watcher.error
        assert isinstance(error, ManifestError)
        assert (error.path, error.line, error.column) == (str(link), 2, 1)  # the path it named
        assert watcher.generation == 2
        assert await blocks(branch) == ["base v2", "dev v2"]

        volume.publish(version(4))
        await eventually(lambda: watcher.generation == 3, f"the fix seen by {mode}")
        assert watcher.error is None
        assert await blocks(branch) == ["base v4", "dev v4"]
        assert len([p for p in volume.root.iterdir() if p.name.startswith("..20")]) == 1


async def test_no_turn_sees_two_versions_while_the_configmap_is_swapped(tmp_path: Path) -> None:
    """Turns on several branches go on while ten versions are published back to back: each
    turn's two blocks name one version, and the versions a branch sees never go back."""
    pytest.importorskip("watchfiles", reason="the watch extra is not installed")
    volume = ConfigMapVolume(tmp_path / "manifests")
    volume.publish(version(1))
    async with composer.ManifestWatcher(
        volume.root, env="dev", watch="events", debounce_s=0.01, settle_s=SETTLE_S
    ) as watcher:
        branches = [composer.Branch("sys\n") for _ in range(4)]
        for branch in branches:
            watcher.attach(branch)
        seen: list[list[int]] = [[] for _ in branches]
        done = asyncio.Event()

        async def turns(index: int) -> None:
            while not done.is_set():
                texts = await blocks(branches[index])
                numbers = {int(text.rsplit("v", 1)[1]) for text in texts}
                assert len(numbers) == 1, texts
                seen[index].append(numbers.pop())
                await asyncio.sleep(0)

        running = [asyncio.create_task(turns(i)) for i in range(len(branches))]
        for number in range(2, 12):
            volume.publish(version(number))
            await asyncio.sleep(0.01)
        await eventually(lambda: watcher.manifest.budget == 400, "a manifest")
        await eventually(
            lambda: all(s and s[-1] == 11 for s in seen), "every branch on the last version"
        )
        done.set()
        await asyncio.gather(*running)
    for numbers in seen:
        assert numbers == sorted(numbers)
        assert numbers[0] == 1


@pytest.mark.parametrize("read", ["loaded", "failed"])
async def test_a_load_that_raced_a_swap_is_read_again_never_served(
    tmp_path: Path, read: str
) -> None:
    """The folder is swapped again while the manifest is read: what was read may be one
    file's old version with another's new (a manifest nobody wrote, or an error nobody made:
    one file's new key in the other's old schema), so it is dropped, no failure is kept, and
    the settled folder is read again."""
    volume = ConfigMapVolume(tmp_path / "manifests")
    volume.publish(version(1))
    async with composer.ManifestWatcher(
        volume.root, env="dev", watch="manual", settle_s=SETTLE_S
    ) as watcher:
        load = watcher._load
        loads: list[int] = []

        def load_then_swap() -> composer.Manifest:
            loads.append(1)
            if len(loads) > 1:
                return load()
            manifest = load()
            volume.publish(version(3))  # after the read, before it is checked
            if read == "failed":
                raise ManifestError(volume.root / "dev.yaml", 1, 1, "a mixed read")
            return manifest

        watcher._load = load_then_swap  # type: ignore[method-assign]
        branch = composer.Branch("sys\n")
        watcher.attach(branch)
        volume.publish(version(2))
        assert await watcher.check()
        assert len(loads) == 2
        assert (watcher.generation, watcher.reloads, watcher.failures) == (2, 1, 0)
        assert watcher.error is None
        assert await blocks(branch) == ["base v3", "dev v3"]
        assert not await watcher.check()  # what serves is what is there
