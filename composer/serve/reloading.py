"""A served manifest that follows its files: ``composer serve --watch``, and SIGHUP.

The service's manifest is then a ``ManifestWatcher``'s (``composer.reload``): an edit is
loaded once it has settled, checked as the first one was (its principals kept apart), warmed
up, and served from each branch's next turn; a turn in flight ends on the manifest it began
with, so no turn sees two. A broken edit keeps the last good manifest serving: the watcher
logs it, counts it in ``composer_manifest_reloads_total{result="error"}``, and ``/readyz``
shows it located (file, line, column) in its ``reload`` block, still ready. Each audit line
names its manifest's revision (``manifest.sha256``), which changes with a reload.

Each process has its own watcher, started in its app's lifespan: under ``--workers`` every
worker follows the files by itself (after the fork, on its own event loop). Without
``--watch`` nothing is watched, and SIGHUP (forwarded to every worker by the supervisor)
makes each look once. A watched folder is read through its links, by content: a ConfigMap
volume, whose kubelet swaps a ``..data`` link to a new folder, is seen like an edit, and a
load that raced a swap is read again (``ManifestWatcher``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any, Literal

from composer.errors import ManifestError
from composer.manifest import Manifest, redact
from composer.observe.observer import revision
from composer.reload import ManifestWatcher, WatchedRegistry
from composer.reload.watcher import WatchMode
from composer.serve.models import ReloadError, ReloadStatus
from composer.serve.telemetry import masking

__all__ = ["Reloader", "log_masking", "mask_served"]

logger = logging.getLogger("composer.serve")

_MESSAGE_CHARS = 2000
"""What ``/readyz`` shows of an error at most: a probe's answer stays small."""

_SERVED_SECRETS: set[str] = set()
"""The secrets of every manifest a ``Reloader`` of this process has accepted."""


def mask_served(text: str) -> str:
    """``text`` with the secrets of every manifest this process's reloads have served (or
    tried to) masked as ``***``: the server's log lines are masked by the manifest it started
    with and by this, so that a secret a reloaded manifest brings is masked there too."""
    return redact(text, _SERVED_SECRETS) if _SERVED_SECRETS else text


def log_masking(manifest: Manifest) -> Callable[[str], str]:
    """How a server of ``manifest`` masks its log lines (the CLI's, the JSON log): by that
    manifest, by those its reloads served (``mask_served``) and the OTLP exporter's secrets."""
    return masking(lambda text: mask_served(manifest.redact(text)))


_WATCHING: dict[str, Literal["events", "poll", "manual"]] = {
    "events": "events",
    "poll": "poll",
    "manual": "manual",
}


class Reloader:
    """The watcher of the manifest at ``path`` (``watch``: its files; else only on
    ``reload``), whose manifests pass ``accept`` before they serve."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        watch: bool,
        accept: Callable[[Manifest], None] | None = None,
    ) -> None:
        # ${VAR}s are read again from the environment as it was when the server was built
        # (a process's own cannot change; a program that set some meanwhile keeps them)
        environ = dict(os.environ)
        mode: WatchMode = "auto" if watch else "manual"

        def accepting(manifest: Manifest) -> None:
            _SERVED_SECRETS.update(manifest.secrets)  # first: masking more is never wrong
            if accept is not None:
                accept(manifest)

        self.watcher = ManifestWatcher(path, watch=mode, accept=accepting, environ=environ)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signalled = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._revision: tuple[int, str] | None = None  # a probe does not dump the manifest
        self._again = False  # a SIGHUP came while one was being handled

    @property
    def started(self) -> bool:
        return self.watcher.watching is not None

    @property
    def manifest(self) -> Manifest:
        """The manifest serving now (the last good one)."""
        return self.watcher.manifest

    def attach(self, branch: Any) -> WatchedRegistry:
        """A registry for ``branch`` that moves to a new manifest at its next turn."""
        return self.watcher.attach(branch)

    async def start(self, *, signals: bool = False) -> Manifest:
        """Load the manifest and follow it; with ``signals`` (the main thread of a process
        of its own, as ``composer serve`` runs), SIGHUP reloads."""
        manifest = await self.watcher.start()
        self._loop = asyncio.get_running_loop()
        if signals and threading.current_thread() is threading.main_thread():
            self._loop.add_signal_handler(signal.SIGHUP, self._hangup)
            self._signalled = True
        return manifest

    def _hangup(self) -> None:
        """SIGHUP: a look at the files, at most one running and one more asked for, however
        many signals come (a storm of them is one or two reads, not a queue)."""
        assert self._loop is not None
        if self._tasks:
            self._again = True
            return
        task = self._loop.create_task(self._hangups())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _hangups(self) -> None:
        self._again = True
        while self._again:
            self._again = False
            await self.reload("SIGHUP")

    async def reload(self, why: str) -> bool:
        """Look at the files now; whether a new manifest serves (logged either way)."""
        try:
            changed = await self.watcher.check()
        except Exception:
            logger.warning("composer: %s: checking the manifest failed", why, exc_info=True)
            return False
        if not changed and self.watcher.error is None:
            logger.info("composer: %s: the manifest is unchanged", why)
        return changed

    def status(self, redact: Callable[[str], str]) -> ReloadStatus:
        """What ``/readyz`` says of the served manifest: revision, counts, the last error."""
        watcher = self.watcher
        error = watcher.error
        refused = None
        if error is not None:
            located = error if isinstance(error, ManifestError) else None
            lines = [line.strip() for line in str(error).splitlines()]
            # a manifest's first mistake, located; another error's whole text; masked before
            # it is cut, so that no secret is shown cut short of what its mask matches
            first = redact(lines[0] if located else " ".join(lines))[:_MESSAGE_CHARS]
            first = first or type(error).__name__
            refused = ReloadError(
                message=first,
                path=redact(located.path) if located is not None else None,
                line=located.line if located is not None else None,
                column=located.column if located is not None else None,
                time=watcher.last_failure or 0.0,
            )
        return ReloadStatus(
            watching=_WATCHING.get(watcher.watching or ""),
            generation=watcher.generation if self.started else 0,
            sha256=self._sha256() if self.started else None,
            reloads=watcher.reloads,
            failures=watcher.failures,
            last_good_load=watcher.last_good_load,
            error=refused,
        )

    def _sha256(self) -> str:
        generation = self.watcher.generation
        if self._revision is None or self._revision[0] != generation:
            self._revision = (generation, revision(self.watcher.manifest))
        return self._revision[1]

    async def aclose(self) -> None:
        """Stop following: no more SIGHUP reloads; every manifest it loaded is closed."""
        if self._signalled and self._loop is not None and not self._loop.is_closed():
            self._loop.remove_signal_handler(signal.SIGHUP)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # stopping: a late one must not kill
            self._signalled = False
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.watcher.aclose()
