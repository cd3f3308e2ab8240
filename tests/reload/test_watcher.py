"""ManifestWatcher: reloads on a change of any file a manifest was read from, keeps the last good
manifest when an edit is broken, switches a branch between turns, closes what nobody uses."""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path
from typing import Any, Literal

import pytest
from observe.conftest import write

import composer
from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.errors import ManifestError
from composer.observe import report_history
from composer.plugin import BuildContext, ProviderConfig, ProviderType
from reload.waiting import blocks, eventually


class GateConfig(ProviderConfig):
    type: Literal["gate"] = "gate"
    text: str
    fail_build: bool = False


class Gate:
    """Answers its text once the test opens ``OPEN`` (the turn waits there)."""

    open: asyncio.Event | None = None
    waiting = 0

    def __init__(self, config: GateConfig) -> None:
        self.text = config.text

    async def provide(self, branch: Any, instruction: Any) -> str:
        assert Gate.open is not None
        Gate.waiting += 1
        await Gate.open.wait()
        return self.text


def build_gate(config: GateConfig, context: BuildContext) -> Gate:
    if config.fail_build:
        raise RuntimeError("this provider cannot be built")
    return Gate(config)


class EditConfig(ProviderConfig):
    type: Literal["edit"] = "edit"


class EditOnWarmUp:
    """Rewrites the manifest while the watcher warms up its first load: an edit that lands
    inside ``start()``, after the digests were read and before file events are armed."""

    edit: tuple[Path, str] | None = None

    def __init__(self, config: EditConfig) -> None:
        pass

    async def provide(self, branch: Any, instruction: Any) -> str:
        return "stale"

    async def warm_up(self, progress: Any = None) -> None:
        if EditOnWarmUp.edit is not None:
            path, text = EditOnWarmUp.edit
            EditOnWarmUp.edit = None
            path.write_text(text)


def build_edit(config: EditConfig, context: BuildContext) -> EditOnWarmUp:
    return EditOnWarmUp(config)


TYPES = ProviderTypes(
    [
        ProviderType("gate", GateConfig, build_gate),
        ProviderType("edit", EditConfig, build_edit),
        static_type,
    ]
)


def static(text: str, budget: int = 100) -> str:
    return (
        f"version: 1\nbudget: {budget}\nruntime: {{report: {{history: 10}}}}\n"
        f"providers:\n  - {{name: a, type: static, text: {text!r}}}\n"
    )


async def test_a_valid_edit_is_served_and_a_broken_one_keeps_the_last_good(tmp_path: Path) -> None:
    path = write(tmp_path / "m.yaml", static("one"))
    async with composer.ManifestWatcher(path, watch="poll", poll_s=3600) as watcher:
        branch = composer.Branch("sys\n")
        watcher.attach(branch)
        assert await blocks(branch) == ["one"]
        assert not await watcher.check()  # nothing changed
        first_load = watcher.last_good_load

        path.write_text(static("two"))
        assert await watcher.check()
        assert (watcher.generation, watcher.reloads, watcher.failures) == (2, 1, 0)
        assert await blocks(branch) == ["two"]
        assert watcher.last_good_load is not None
        assert first_load is not None
        assert watcher.last_good_load >= first_load

        good_load = watcher.last_good_load
        path.write_text(static("three").replace("budget: 100", "budgett: 100"))
        assert not await watcher.check()
        assert isinstance(watcher.error, ManifestError)
        assert str(watcher.error).startswith(f"{path}:2:1: ")
        assert (watcher.generation, watcher.failures, watcher.last_good_load) == (2, 1, good_load)
        assert await blocks(branch) == ["two"]
        assert not await watcher.check()  # the same broken text is not tried again

        path.write_text(static("four"))
        assert await watcher.check()
        assert watcher.error is None
        assert await blocks(branch) == ["four"]
        assert [r.blocks for r in report_history(branch)] == [["one"], ["two"], ["two"], ["four"]]


async def test_history_is_kept_only_while_the_manifest_asks_for_it(tmp_path: Path) -> None:
    """No history structure while the manifest keeps none; one from the reload that asks,
    and none again (the reports dropped) from the reload that stops asking."""
    path = write(tmp_path / "m.yaml", static("one").replace("history: 10", "history: 0"))
    async with composer.ManifestWatcher(path, watch="poll", poll_s=3600) as watcher:
        branch = composer.Branch("sys\n")
        registry = watcher.attach(branch)
        assert await blocks(branch) == ["one"]
        assert registry._history is None
        assert report_history(branch) == []

        path.write_text(static("two"))
        assert await watcher.check()
        assert await blocks(branch) == ["two"]
        assert [r.blocks for r in report_history(branch)] == [["two"]]

        path.write_text(static("three").replace("history: 10", "history: 0"))
        assert await watcher.check()
        assert await blocks(branch) == ["three"]
        assert registry._history is None
        assert report_history(branch) == []


async def test_edits_of_an_extended_file_the_env_file_and_a_secret_are_seen(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "TOKEN").write_text("s1")
    (tmp_path / "vars.env").write_text("GREETING=hello\n")
    base = write(
        tmp_path / "base.yaml",
        """\
        version: 1
        providers:
          - {name: a, type: static, text: "${GREETING} ${TOKEN}"}
        """,
    )
    write(tmp_path / "prod.yaml", "extends: base.yaml\nbudget: 50\n")
    environ = {
        "COMPOSER_ENV_FILE": str(tmp_path / "vars.env"),
        "COMPOSER_SECRETS_DIR": str(tmp_path / "secrets"),
    }
    watcher = composer.ManifestWatcher(tmp_path, env="prod", environ=environ, watch="poll")
    await watcher.start()
    branch = composer.Branch("sys\n")
    watcher.attach(branch)
    assert await blocks(branch) == ["hello s1"]

    base.write_text(base.read_text().replace('"${GREETING}', '"base: ${GREETING}'))
    assert await watcher.check()
    assert await blocks(branch) == ["base: hello s1"]

    (tmp_path / "vars.env").write_text("GREETING=bonjour\n")
    assert await watcher.check()
    assert await blocks(branch) == ["base: bonjour s1"]

    (tmp_path / "secrets" / "TOKEN").write_text("s2")
    assert await watcher.check()
    assert await blocks(branch) == ["base: bonjour s2"]

    (tmp_path / "staging.yaml").write_text("extends: base.yaml\n")  # another environment
    assert not await watcher.check()
    assert watcher.generation == 4
    await watcher.aclose()


async def test_the_env_file_beside_the_manifest_is_watched(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("GREETING=hello\n")
    path = write(
        tmp_path / "m.yaml",
        'version: 1\nproviders:\n  - {name: a, type: static, text: "${GREETING}"}\n',
    )
    async with composer.ManifestWatcher(path, environ={}, watch="poll", poll_s=3600) as watcher:
        branch = composer.Branch("sys\n")
        watcher.attach(branch)
        assert await blocks(branch) == ["hello"]
        (tmp_path / ".env").write_text("GREETING=bonjour\n")
        assert await watcher.check()
        assert await blocks(branch) == ["bonjour"]


async def test_a_branch_switches_between_turns_never_during_one(tmp_path: Path) -> None:
    Gate.open, Gate.waiting = asyncio.Event(), 0
    path = write(
        tmp_path / "m.yaml",
        "version: 1\nruntime: {report: {history: 5}}\n"
        "providers:\n  - {name: g, type: gate, text: one}\n",
    )
    watcher = composer.ManifestWatcher(path, types=TYPES, watch="poll", poll_s=3600)
    first = await watcher.start()
    busy, idle = composer.Branch("sys\n"), composer.Branch("sys\n")
    watcher.attach(busy)
    watcher.attach(idle)
    assert len(idle._context_providers or []) == 1  # idle has built its registry
    running = asyncio.ensure_future(composer.prepare_turn(busy, "x"))
    await eventually(lambda: Gate.waiting == 1, "the turn reaches the provider")

    path.write_text(path.read_text().replace("text: one", "text: two"))
    assert await watcher.check()
    assert watcher.manifest is not first
    await asyncio.sleep(0.05)
    assert first.shared  # the running turn still uses the first manifest: not closed

    Gate.open.set()
    turn = await running
    assert turn.report is not None
    assert turn.report.blocks == ["one"]  # the turn ran on the manifest it began with
    await eventually(lambda: not first.shared, "the first manifest is closed")
    assert await blocks(busy) == ["two"]
    assert await blocks(idle) == ["two"]
    await watcher.aclose()


async def test_a_held_manifest_stays_open_through_a_reload_until_let_go(tmp_path: Path) -> None:
    """One-off work on the manifest serving now (the console's preview) is not cut short by a
    reload: ``held`` keeps it open as a turn keeps its own, and closes it once let go."""
    from composer.inspect.preview import run_preview

    Gate.open, Gate.waiting = asyncio.Event(), 0
    path = write(
        tmp_path / "m.yaml", "version: 1\nproviders:\n  - {name: g, type: gate, text: one}\n"
    )
    watcher = composer.ManifestWatcher(path, types=TYPES, watch="poll", poll_s=3600)
    await watcher.start()

    async def preview() -> list[str]:
        async with watcher.held() as manifest:
            done = await run_preview(manifest, "x", close_manifest=False)
            assert done.report.blocks == ["one"]
            return [row.outcome for row in done.rows]

    running = asyncio.ensure_future(preview())
    await eventually(lambda: Gate.waiting == 1, "the preview reaches the provider")
    first = watcher.manifest
    path.write_text(path.read_text().replace("text: one", "text: two"))
    assert await watcher.check()
    await asyncio.sleep(0.05)
    assert first.shared  # the preview still uses the first manifest: not closed
    Gate.open.set()
    assert await running == ["fired"]
    await eventually(lambda: not first.shared, "the first manifest is closed once let go")
    async with watcher.held() as manifest:
        assert manifest is watcher.manifest is not first
    branch = composer.Branch("sys\n")  # letting go of the one serving does not close it
    watcher.attach(branch)
    assert await blocks(branch) == ["two"]
    await watcher.aclose()


async def test_an_idle_branch_lets_the_old_manifest_go_at_once(tmp_path: Path) -> None:
    path = write(tmp_path / "m.yaml", static("one"))
    watcher = composer.ManifestWatcher(path, watch="poll", poll_s=3600)
    first = await watcher.start()
    branches = [composer.Branch("sys\n") for _ in range(5)]
    for branch in branches:
        watcher.attach(branch)
        assert await blocks(branch) == ["one"]
    assert "observe" in first.shared
    path.write_text(static("two"))
    assert await watcher.check()
    await eventually(lambda: not first.shared, "the first manifest is closed")
    await watcher.aclose()


async def test_a_branch_that_is_gone_lets_its_manifest_go(tmp_path: Path) -> None:
    """A conversation that ended without closing its registry holds no manifest open."""
    path = write(tmp_path / "m.yaml", static("one"))
    async with composer.ManifestWatcher(path, watch="poll", poll_s=3600) as watcher:
        first = watcher.manifest
        branch = composer.Branch("sys\n")
        watcher.attach(branch)
        assert await blocks(branch) == ["one"]  # its registry now holds the first manifest
        del branch
        gc.collect()
        path.write_text(static("two"))
        assert await watcher.check()
        await eventually(lambda: not first.shared, "the first manifest is closed")


async def test_a_provider_that_cannot_be_built_fails_the_reload_not_a_turn(tmp_path: Path) -> None:
    path = write(
        tmp_path / "m.yaml", "version: 1\nproviders:\n  - {name: g, type: static, text: ok}\n"
    )
    async with composer.ManifestWatcher(path, types=TYPES, watch="poll", poll_s=3600) as watcher:
        branch = composer.Branch("sys\n")
        watcher.attach(branch)
        path.write_text(
            "version: 1\nproviders:\n  - {name: g, type: gate, text: x, fail_build: true}\n"
        )
        assert not await watcher.check()
        assert isinstance(watcher.error, RuntimeError)
        assert watcher.failures == 1
        assert await blocks(branch) == ["ok"]


async def test_a_broken_manifest_at_start_raises_its_located_error(tmp_path: Path) -> None:
    path = write(tmp_path / "m.yaml", "version: 1\nbudgett: 2\n")
    watcher = composer.ManifestWatcher(path)
    with pytest.raises(ManifestError, match=r":2:1: "):
        await watcher.start()
    with pytest.raises(RuntimeError, match="start"):
        watcher.attach(composer.Branch("sys\n")).names  # noqa: B018


@pytest.mark.parametrize("mode", ["events", "poll"])
async def test_the_watch_notices_an_edit_by_itself(
    tmp_path: Path, mode: Literal["events", "poll"]
) -> None:
    if mode == "events":
        pytest.importorskip("watchfiles", reason="the watch extra is not installed")
    path = write(tmp_path / "m.yaml", static("one"))
    async with composer.ManifestWatcher(path, watch=mode, poll_s=0.05, debounce_s=0.05) as watcher:
        assert watcher.watching == mode
        branch = composer.Branch("sys\n")
        watcher.attach(branch)
        await asyncio.sleep(0.2)  # the watch is set up
        path.write_text(static("two"))
        await eventually(lambda: watcher.generation == 2, f"the edit seen by {mode}")
        assert await blocks(branch) == ["two"]
        path.write_text("version: [\n")
        await eventually(lambda: watcher.failures == 1, f"the broken edit seen by {mode}")
        assert await blocks(branch) == ["two"]
        assert watcher.watching == mode  # events did not fall back to polling


@pytest.mark.parametrize("mode", ["events", "poll"])
async def test_an_edit_made_while_start_runs_is_loaded(
    tmp_path: Path, mode: Literal["events", "poll"]
) -> None:
    """A fix deployed while the process restarts: written after ``start()`` read the digests,
    before file events were armed, so no event ever reports it."""
    if mode == "events":
        pytest.importorskip("watchfiles", reason="the watch extra is not installed")
    path = write(tmp_path / "m.yaml", "version: 1\nproviders:\n  - {name: e, type: edit}\n")
    EditOnWarmUp.edit = (path, static("fixed"))
    async with composer.ManifestWatcher(
        path, types=TYPES, watch=mode, poll_s=0.05, debounce_s=0.05, settle_s=0.05
    ) as watcher:
        assert EditOnWarmUp.edit is None  # the edit was made inside start()
        assert watcher.generation == 1
        await eventually(lambda: watcher.generation == 2, f"the edit loaded by {mode}", 10)
        branch = composer.Branch("sys\n")
        watcher.attach(branch)
        assert await blocks(branch) == ["fixed"]
        assert watcher.watching == mode


HALF = "version: 1\nproviders:\n  - name: risky\n    type: static\n    text: half\n"
REST = "    enabled: false\n  - {name: safe, type: static, text: whole}\n"


@pytest.mark.parametrize("mode", ["events", "poll"])
async def test_a_file_caught_half_written_is_never_served(
    tmp_path: Path, mode: Literal["events", "poll"]
) -> None:
    """The first part alone is a valid manifest that enables ``risky``; the whole file
    disables it. The writer pauses mid-file for less than the settle delay."""
    if mode == "events":
        pytest.importorskip("watchfiles", reason="the watch extra is not installed")
    settle, pause = 0.5, 0.1
    path = write(tmp_path / "m.yaml", static("one"))
    served: list[list[str]] = []
    done = asyncio.Event()

    def write_in_two_parts() -> float:
        with path.open("w") as file:
            file.write(HALF)
            file.flush()
            started = time.monotonic()
            time.sleep(pause)
            file.write(REST)
            return time.monotonic() - started

    async with composer.ManifestWatcher(
        path, watch=mode, poll_s=0.02, debounce_s=0.02, settle_s=settle
    ) as watcher:

        async def sample() -> None:
            while not done.is_set():
                served.append(
                    [getattr(p, "text", "") for p in watcher.manifest.providers if p.enabled]
                )
                await asyncio.sleep(0.002)

        sampler = asyncio.ensure_future(sample())
        await asyncio.sleep(0.2)  # the watch is set up
        paused = await asyncio.to_thread(write_in_two_parts)
        await eventually(lambda: watcher.generation == 2, f"the whole file loaded by {mode}")
        await asyncio.sleep(0.05)
        done.set()
        await sampler
        assert paused < settle, "the writer paused longer than the settle delay"
        assert (watcher.reloads, watcher.failures) == (1, 0)  # neither half nor empty loaded
        assert ["half"] not in served
        assert served[0] == ["one"]
        assert served[-1] == ["whole"]
        assert watcher.watching == mode


async def test_aclose_stops_watching_and_closes_every_manifest(tmp_path: Path) -> None:
    path = write(tmp_path / "m.yaml", static("one"))
    watcher = composer.ManifestWatcher(path, watch="poll", poll_s=0.05)
    manifest = await watcher.start()
    branch = composer.Branch("sys\n")
    watcher.attach(branch)
    await blocks(branch)
    assert manifest.shared
    await watcher.aclose()
    assert not manifest.shared
    assert watcher.watching is None


def test_watched_registries_need_no_event_loop_to_be_made(tmp_path: Path) -> None:
    watcher = composer.ManifestWatcher(tmp_path / "m.yaml")
    registry = watcher.registry()
    assert repr(registry) == "<WatchedRegistry generation=None>"


def test_the_watcher_lives_above_the_engine_and_its_old_address_warns() -> None:
    import composer.observe
    import composer.reload

    assert composer.ManifestWatcher is composer.reload.ManifestWatcher
    assert composer.ManifestWatcher.__module__ == "composer.reload.watcher"
    for name in ("ManifestWatcher", "WatchedRegistry"):
        with pytest.warns(DeprecationWarning, match=f"moved to composer.reload.{name}"):
            assert getattr(composer.observe, name) is getattr(composer.reload, name)
    with pytest.raises(AttributeError):
        _ = composer.observe.Nothing  # type: ignore[attr-defined]
