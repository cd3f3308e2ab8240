"""Manifests reloaded without a restart, keeping the last good one when an edit is broken.

``ManifestWatcher`` loads a manifest, then watches what it was read from (``changes.Inputs``:
its file, the files it extends, the ``.env`` file and the secrets folder). On a change it loads
the manifest again in a worker thread and, only when that succeeds, warms it up and makes it
the one registries are built from. A broken edit changes nothing that serves: the error is kept
in ``error`` (a located ``ManifestError``), ``failures`` counts it, and the last good manifest
goes on. Prometheus and Envoy treat a configuration reload the same way.

A change is loaded only once it has settled: the inputs' digests are read again ``settle_s``
later and must agree, so a file caught half-written (whose first part may well be a valid
manifest, one that still enables a provider the rest disables) is never served. Once file
events are armed, the digests are checked again: an edit that landed while ``start`` loaded
the manifest raised no event, and would otherwise wait for the next edit.

A branch follows the watcher through a ``WatchedRegistry`` (``watcher.attach(branch)``): each
turn gathers with the registry of the manifest that was current when the turn began, so a
branch switches between turns, never during one, and never sees a manifest that is not wholly
loaded (a new one is published by one assignment, after it validated and warmed up). A loaded
manifest counts the registries built from it; when it is no longer current and the last of
them has moved on, its shared resources (HTTP pools, indexes, the audit log) are closed with
``Manifest.aclose``. Registries that are not in a turn move on as soon as a new manifest is
published, so an idle branch does not hold an old one open.

Everything runs on the event loop that called ``start``; loading and digesting files run in
worker threads, so turns go on while a reload is read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Literal

from composer.build import ManifestRegistry, WritebackResult, build_registry
from composer.catalog import ProviderTypes, catalog_of
from composer.errors import ManifestError
from composer.manifest.loader import load_manifest
from composer.manifest.models import Manifest
from composer.observe.switch import metrics_wanted
from composer.registry import BranchLike, InstructionLike, ProviderReport
from composer.reload.changes import Digests, Inputs, has_watchfiles, snapshot

if TYPE_CHECKING:
    from composer.observe.metrics import Metrics

__all__ = ["ManifestWatcher", "WatchMode", "WatchedRegistry"]

logger = logging.getLogger(__name__)

WatchMode = Literal["auto", "events", "poll", "manual"]

_SETTLE_ROUNDS = 50  # reads while a file keeps changing; then the next event or poll looks again
_EVENTS_TIMEOUT_MS = 500  # the watch thread returns this often; its first return arms the check


class _Loaded:
    """One good load: the manifest, its generation, and how many registries use it."""

    __slots__ = ("closed", "generation", "manifest", "users")

    def __init__(self, manifest: Manifest, generation: int) -> None:
        self.manifest = manifest
        self.generation = generation
        self.users = 0
        self.closed = False


class ManifestWatcher:
    """Serve the last good version of a manifest while its files change.

    ``path``, ``env`` and ``environ`` are ``load_manifest``'s. ``watch`` picks how changes are
    noticed: ``events`` (watchfiles, the ``watch`` extra), ``poll`` (a digest of every input
    each ``poll_s`` seconds), ``auto`` (events where watchfiles is installed), or ``manual``
    (nothing is watched: its owner calls ``check``, on a signal say). With ``warm_up`` a new
    manifest builds its indexes before it serves. ``accept`` is called with each new manifest
    before it serves: raising refuses it as a broken edit is refused (a server checks that the
    new manifest keeps its principals apart).

    ``settle_s`` (default 0.2 s) is how long a change must stay the same before it is loaded:
    the digests are read twice that far apart, until two reads agree. A writer that pauses
    longer than that mid-file is still seen half-way: deploy by writing a new file and
    renaming it over the old one. 0 loads a change on its first read.

    ``await start()`` loads the manifest (its error is raised: there is nothing to serve yet)
    and begins watching; ``await aclose()`` stops and closes every manifest it loaded. Also an
    async context manager.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        env: str | None = None,
        environ: Mapping[str, str] | None = None,
        types: ProviderTypes | None = None,
        watch: WatchMode = "auto",
        poll_s: float = 1.0,
        debounce_s: float = 0.05,
        settle_s: float = 0.2,
        warm_up: bool = True,
        accept: Callable[[Manifest], None] | None = None,
    ) -> None:
        self.path = path
        self.env = env
        self._environ = environ
        self._types = types
        self._mode: WatchMode = watch
        self._poll_s = poll_s
        self._debounce_s = debounce_s
        self._settle_s = settle_s
        self._warm_up = warm_up
        self._accept_hook = accept
        self._current: _Loaded | None = None
        self._inputs = Inputs(frozenset())
        self._seen: Digests = {}
        self._registries: weakref.WeakSet[WatchedRegistry] = weakref.WeakSet()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._retired: list[_Loaded] = []  # replaced, not yet closed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._stop: asyncio.Event | None = None
        self._watching: asyncio.Task[None] | None = None
        self._how: str | None = None
        self.reloads = 0
        """New manifests published after the first."""
        self.failures = 0
        """Changes whose manifest did not load (or build); the last good one kept serving."""
        self.error: Exception | None = None
        """Why the last attempt failed (a located ``ManifestError`` for a broken edit), until
        a good load."""
        self.last_good_load: float | None = None
        """``time.time()`` of the last good load."""
        self.last_failure: float | None = None
        """``time.time()`` of the last change that did not load."""

    # -- what serves

    @property
    def manifest(self) -> Manifest:
        """The manifest now serving (the last good one)."""
        return self._loaded().manifest

    @property
    def generation(self) -> int:
        """1 for the first manifest, one more for each published reload."""
        return self._loaded().generation

    @property
    def watching(self) -> str | None:
        """How changes are noticed now: ``events``, ``poll`` (also when events failed),
        ``manual`` (only when ``check`` is called), or None (not started, or closed)."""
        if self._mode == "manual":
            return "manual" if self._current is not None else None
        return self._how if self._watching is not None else None

    def _loaded(self) -> _Loaded:
        if self._current is None:
            raise RuntimeError("ManifestWatcher: call `await watcher.start()` first")
        return self._current

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[Manifest]:
        """The manifest now serving, kept open until the block ends even when a reload replaces
        it meanwhile, as a branch's registry keeps its manifest through a turn: for one-off
        work on it (the console's preview, the warm-up)."""
        loaded = self._retain()
        try:
            yield loaded.manifest
        finally:
            loaded.users -= 1
            if loaded.users == 0 and loaded is not self._current:
                await self._close_manifest(loaded)

    def registry(self) -> WatchedRegistry:
        """A registry for one branch that follows the watcher between turns."""
        registry = WatchedRegistry(self)
        self._registries.add(registry)
        return registry

    def attach(self, branch: Any) -> WatchedRegistry:
        """Give ``branch`` (composer's or lionagi's) a registry that follows the watcher."""
        registry = self.registry()
        branch._context_providers = registry
        return registry

    # -- lifecycle

    async def start(self) -> Manifest:
        """Load the manifest and start watching; raises its ``ManifestError`` when it is bad."""
        if self._current is not None:
            return self._current.manifest
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        inputs = Inputs.of(None, path=self.path, env=self.env, environ=self._environ)
        before = await asyncio.to_thread(snapshot, inputs)
        manifest = await asyncio.to_thread(self._load)
        if self._types is None:
            self._types = catalog_of(manifest)  # later loads do not rescan the entry points
        if self._accept_hook is not None:
            self._accept_hook(manifest)
        await self._warm(manifest)
        self._accept(manifest, inputs, before)
        self._publish(manifest)
        if self._mode != "manual":
            self._how = "events" if self._uses_events() else "poll"
            self._watching = asyncio.create_task(self._watch(), name="composer-manifest-watcher")
        return manifest

    async def aclose(self) -> None:
        """Stop watching; close every registry it handed out and every manifest it loaded."""
        if self._stop is not None:
            self._stop.set()
        if self._watching is not None:
            self._watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watching
            self._watching = None
        for registry in list(self._registries):
            registry._drop()
        current, self._current = self._current, None
        # Shutting down: whatever a forgotten registry still holds is closed too.
        for loaded in [*self._retired, *([current] if current else [])]:
            self._spawn(self._close_manifest(loaded))
        self._retired = []
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def __aenter__(self) -> ManifestWatcher:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- reloading

    async def check(self) -> bool:
        """Reload now if any input changed; whether a new manifest now serves.

        What the watch loop calls on each event or poll; call it yourself too (after a deploy
        step, or from a SIGHUP handler).
        """
        if self._lock is None:
            raise RuntimeError("ManifestWatcher: call `await watcher.start()` first")
        async with self._lock:
            inputs = self._inputs
            before = await asyncio.to_thread(snapshot, inputs)
            if before == self._seen:
                return False
            settled = await self._settled(inputs, before)
            if settled is None or settled == self._seen:
                return False  # still being written (seen again later), or back as it was
            before = settled
            manifest: Manifest | None = None
            try:
                manifest = await self._load_whole(inputs, before)
                if manifest is None:
                    return False  # changed while it was read: the next event or poll loads it
                if self._accept_hook is not None:
                    self._accept_hook(manifest)
                await self._warm(manifest)
            except Exception as e:  # a broken edit, or a provider that cannot be built
                if manifest is not None:
                    await self._close_manifest(_Loaded(manifest, 0))
                self._refuse(e, inputs, before)
                return False
            self._accept(manifest, inputs, before)
            self._count("ok", manifest)
            self._publish(manifest)
            self.reloads += 1
            logger.info("composer: manifest reloaded (generation %d)", self.generation)
            return True

    async def _settled(self, inputs: Inputs, digests: Digests) -> Digests | None:
        """``digests`` once a read ``settle_s`` later agrees with the one before it; None when
        the inputs were still changing after ``_SETTLE_ROUNDS`` reads."""
        if self._settle_s <= 0:
            return digests
        for _ in range(_SETTLE_ROUNDS):
            await asyncio.sleep(self._settle_s)
            again = await asyncio.to_thread(snapshot, inputs)
            if again == digests:
                return digests
            digests = again
        return None

    async def _load_whole(self, inputs: Inputs, digests: Digests) -> Manifest | None:
        """The manifest loaded from inputs that stayed as ``digests`` said while it was read,
        or None: a folder swapped mid-load (a ConfigMap update) could give one file's old
        version with another's new, a manifest nobody wrote (or an error nobody made: it is
        raised only when the inputs held still while it was read)."""
        for _ in range(_SETTLE_ROUNDS):
            manifest: Manifest | None = None
            error: Exception | None = None
            try:
                manifest = await asyncio.to_thread(self._load)
            except Exception as e:
                error = e
            after = await asyncio.to_thread(snapshot, inputs)
            if after == digests:
                if error is not None:
                    raise error
                return manifest
            if manifest is not None:
                await self._close_manifest(_Loaded(manifest, 0))
            settled = await self._settled(inputs, after)
            if settled is None:
                return None
            digests.clear()
            digests.update(settled)
        return None

    def _load(self) -> Manifest:
        return load_manifest(self.path, env=self.env, environ=self._environ, types=self._types)

    async def _warm(self, manifest: Manifest) -> None:
        """Build a registry of the new manifest (a provider that cannot be built fails the
        reload, not a turn) and, with ``warm_up``, its shared state (indexes, pools)."""
        async with build_registry(manifest) as registry:
            failures = await registry.warm_up() if self._warm_up else {}
        for name, error in failures.items():
            logger.warning(
                "%s",
                manifest.redact(f"composer: provider {name!r} did not warm up: {error!r}"),
            )

    def _accept(self, manifest: Manifest, inputs: Inputs, before: Digests) -> None:
        """Remember what ``manifest`` was read from, as it was read."""
        new = Inputs.of(manifest, path=self.path, env=self.env, environ=self._environ)
        self._remember(inputs, new, before)
        self.error = None
        self.last_good_load = time.time()

    def _refuse(self, error: Exception, inputs: Inputs, before: Digests) -> None:
        """A change that did not load: keep serving, keep the error, watch what it named."""
        located = error if isinstance(error, ManifestError) else None
        new = inputs | Inputs.of(
            None, path=self.path, env=self.env, environ=self._environ, error=located
        )
        self._remember(inputs, new, before)
        self.failures += 1
        self.error = error
        self.last_failure = time.time()
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        current = self._current
        redact = current.manifest.redact if current is not None else str
        logger.warning(
            "%s",
            redact(f"composer: manifest not reloaded, the last good one still serves: {first}"),
        )
        if current is not None:
            self._count("error", current.manifest)

    def _remember(self, old: Inputs, new: Inputs, before: Digests) -> None:
        """The digests of ``new`` as of this load: those read before it for inputs already
        watched (a change during the load is seen next time), read now for new ones."""
        keys = new.keys()
        seen = {key: digest for key, digest in before.items() if key in keys}
        seen.update(snapshot(new, keys - old.keys()))
        self._inputs = new
        self._seen = seen

    def _publish(self, manifest: Manifest) -> None:
        old = self._current
        self._current = _Loaded(manifest, 1 if old is None else old.generation + 1)
        if old is None:
            return
        self._retired.append(old)
        for registry in list(self._registries):
            registry._move_on_if_idle()
        if old.users == 0:
            self._spawn(self._close_manifest(old))

    def _count(self, result: str, manifest: Manifest) -> None:
        if not metrics_wanted(manifest.runtime.metrics):
            return
        metrics = _metrics()
        if metrics is not None:
            metrics.reloads.labels(result).inc()
            if result == "ok" and self.last_good_load is not None:
                metrics.last_good_load.set(self.last_good_load)

    # -- registries moving on

    def _retain(self) -> _Loaded:
        loaded = self._loaded()
        loaded.users += 1
        return loaded

    def _let_go(self, hold: _Hold) -> None:
        """A registry lets go of what it holds (also when it is garbage collected unclosed)."""
        loaded, registry = hold.loaded, hold.registry
        hold.loaded = hold.registry = None
        if loaded is not None and registry is not None:
            loaded.users -= 1
            self._spawn(self._close_registry(loaded, registry))

    async def _close_registry(self, loaded: _Loaded, registry: ManifestRegistry) -> None:
        try:
            await registry.aclose()
        except Exception as e:
            logger.warning("%s", loaded.manifest.redact(f"composer: closing a registry: {e!r}"))
        if loaded.users == 0 and loaded is not self._current:
            await self._close_manifest(loaded)

    async def _close_manifest(self, loaded: _Loaded) -> None:
        if loaded.closed:
            return
        loaded.closed = True
        if loaded in self._retired:
            self._retired.remove(loaded)
        try:
            await loaded.manifest.aclose()
        except Exception as e:
            logger.warning("%s", loaded.manifest.redact(f"composer: closing a manifest: {e!r}"))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` as a task of the watcher's loop (from a finalizer too, in any thread)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            work.close()  # the process is ending: nothing left to close it on
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._track(loop.create_task(work))
        else:
            loop.call_soon_threadsafe(lambda: self._track(loop.create_task(work)))

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- watching

    def _uses_events(self) -> bool:
        return self._mode == "events" or (self._mode == "auto" and has_watchfiles())

    async def _watch(self) -> None:
        if self._uses_events():
            try:
                await self._watch_events()
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:  # inotify limits, a folder gone: polling still works
                logger.warning("composer: file events unavailable (%r); polling instead", e)
        await self._watch_polling()

    async def _watch_polling(self) -> None:
        assert self._stop is not None
        self._how = "poll"
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self._poll_s)
            if not self._stop.is_set():
                await self._checked()

    async def _watch_events(self) -> None:
        import watchfiles

        assert self._stop is not None
        while not self._stop.is_set():
            folders = self._inputs.directories
            armed = False
            async for changes in watchfiles.awatch(
                *folders,
                watch_filter=None,
                debounce=max(1, int(self._debounce_s * 1000)),
                step=max(1, min(50, int(self._debounce_s * 500))),
                stop_event=self._stop,
                rust_timeout=_EVENTS_TIMEOUT_MS,
                yield_on_timeout=True,
                recursive=False,
            ):
                if changes or not armed:
                    # The first yield comes once the events are armed: what changed before
                    # (during start, or in a folder not watched until now) raised none.
                    armed = True
                    await self._checked()
                if self._inputs.directories != folders:
                    break  # the manifest now extends a file elsewhere: watch there too

    async def _checked(self) -> None:
        """``check``, with anything unexpected logged: the watch goes on."""
        try:
            await self.check()
        except Exception:
            logger.warning("composer: checking the manifest for changes failed", exc_info=True)


class _Hold:
    """What a ``WatchedRegistry`` holds: a loaded manifest and the registry built from it.

    Apart from the registry object, so that a finalizer can let go of it when the registry is
    garbage collected without ``aclose`` (a conversation that simply ended).
    """

    __slots__ = ("loaded", "registry")

    def __init__(self) -> None:
        self.loaded: _Loaded | None = None
        self.registry: ManifestRegistry | None = None


class WatchedRegistry:
    """A branch's registry that follows a ``ManifestWatcher``: the ADR registry's surface
    (``gather``, ``gather_writeback``, ``names``, ``budget``, ``len``, ``bool``), each turn on
    the manifest that was current when it began.

    ``history`` keeps the last ``runtime.report.history`` reports across reloads. ``budget``
    may be set, as on any registry; a reload replaces it with the new manifest's.
    """

    def __init__(self, watcher: ManifestWatcher) -> None:
        self._watcher = watcher
        self._hold = _Hold()
        self._running = 0
        self._history: deque[ProviderReport] | None = None  # None while it keeps none
        weakref.finalize(self, watcher._let_go, self._hold)

    def _registry(self) -> ManifestRegistry:
        """The registry to use now: the current manifest's, unless a turn is still running on
        an older one (then that one, so that concurrent turns of one branch agree)."""
        current = self._watcher._current
        hold = self._hold
        if hold.registry is not None and (
            hold.loaded is current or current is None or self._running
        ):
            return hold.registry
        loaded = self._watcher._retain()
        fresh = build_registry(loaded.manifest)
        self._drop()
        hold.loaded, hold.registry = loaded, fresh
        observer = fresh.observer
        size = observer.history if observer is not None else 0
        held = self._history
        if size != (held.maxlen if held is not None else 0):
            self._history = deque(held or (), maxlen=size) if size else None
        return fresh

    def _drop(self) -> None:
        """Let go of the registry held (it is closed, and its manifest when it was the last)."""
        self._watcher._let_go(self._hold)

    def _move_on_if_idle(self) -> None:
        if not self._running and self._hold.registry is not None:
            self._drop()

    @property
    def generation(self) -> int:
        """The generation of the manifest this registry's next turn uses."""
        self._registry()
        assert self._hold.loaded is not None
        return self._hold.loaded.generation

    @property
    def manifest(self) -> Manifest:
        """The manifest this registry's next turn uses."""
        self._registry()
        assert self._hold.loaded is not None
        return self._hold.loaded.manifest

    @property
    def history(self) -> list[ProviderReport]:
        """This branch's last reports, oldest first, across reloads (``runtime.report``)."""
        return list(self._history) if self._history is not None else []

    async def gather(self, branch: BranchLike, instruction: InstructionLike) -> ProviderReport:
        inner = self._registry()
        self._running += 1
        try:
            report = await inner.gather(branch, instruction)
        finally:
            self._running -= 1
            if not self._running and self._hold.loaded is not self._watcher._current:
                self._drop()  # a reload came during the turn: let the old manifest go now
        if self._history is not None:
            self._history.append(report)
        return report

    async def gather_writeback(self, branch: BranchLike, action_responses: list[Any]) -> None:
        await self._registry().gather_writeback(branch, action_responses)

    async def writeback_results(
        self, branch: BranchLike, action_responses: list[Any]
    ) -> list[WritebackResult]:
        """``ManifestRegistry.writeback_results`` of the current manifest's registry."""
        return await self._registry().writeback_results(branch, action_responses)

    async def warm_up(self) -> dict[str, Exception]:
        return await self._registry().warm_up()

    async def aclose(self) -> None:
        """Let go of the manifest's registry (later turns build a new one)."""
        self._drop()

    @property
    def budget(self) -> int:
        return self._registry().budget

    @budget.setter
    def budget(self, value: int) -> None:
        self._registry().budget = value

    @property
    def names(self) -> list[str]:
        return self._registry().names

    @property
    def providers(self) -> list[Any]:
        return self._registry().providers

    def __len__(self) -> int:
        return len(self._registry())

    def __bool__(self) -> bool:
        return bool(self._registry())

    def __repr__(self) -> str:
        loaded = self._hold.loaded
        return f"<WatchedRegistry generation={loaded.generation if loaded else None}>"


def _metrics() -> Metrics | None:
    try:
        from composer.observe.metrics import process_metrics
    except ImportError:
        return None
    return process_metrics()
