"""What a manifest's ``runtime`` asks to be kept of each turn: history, audit line, spans, metrics.

One ``TurnObserver`` per loaded manifest (shared by its registries through ``BuildContext.
shared``, and closed by ``Manifest.aclose``); ``ManifestRegistry.gather`` hands it each turn.
What it does on the turn's own path is small and bounded: note the start, put a snapshot on
the audit queue, count metrics, end spans. Anything that goes wrong here is logged (masked) and
the turn goes on: observing a turn never fails it.

The tracing and metrics modules are imported only when the manifest turns them on; when their
extra is missing, a warning says so once and the turn runs without them.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from composer.manifest.models import AuditConfig, Manifest
from composer.observe.audit import (
    AuditLog,
    AuditQueue,
    StdoutAuditLog,
    open_audit_log,
    release_audit_log,
)
from composer.observe.audit.base import QueueOptions
from composer.observe.audit.held import hold
from composer.observe.record import AuditManifest, LineContext, ProviderInfo, snapshot
from composer.observe.switch import metrics_wanted, traces_wanted
from composer.registry import BranchLike, InstructionLike, ProviderReport

if TYPE_CHECKING:
    from composer.observe.metrics import Metrics
    from composer.observe.tracing import TurnTracer

__all__ = ["Gather", "TurnObserver", "revision"]

logger = logging.getLogger(__name__)

Gather = Callable[[BranchLike, InstructionLike], Awaitable[ProviderReport]]

_IN_MEMORY = "(in memory)"
"""The audit table's writer of manifests loaded without a file and naming none."""


class TurnObserver:
    """History size, audit log, tracer and metrics of one loaded manifest."""

    def __init__(self, manifest: Manifest) -> None:
        runtime = manifest.runtime
        self.history = runtime.report.history if runtime.report is not None else 0
        self.redact = manifest.redact
        enabled = [config for config in manifest.providers if config.enabled]
        self.providers = [
            ProviderInfo(c.type, c.priority, c.max_tokens, c.when is not None) for c in enabled
        ]
        self.names = [self.redact(c.name) for c in enabled]
        path = None if manifest.path is None else self.redact(str(manifest.path))
        self.manifest = AuditManifest(
            path=path,
            env=None if manifest.path is None else self.redact(manifest.path.stem),
            sha256=revision(manifest),
        )
        self.metrics = _metrics() if metrics_wanted(runtime.metrics) else None
        self.tracer = _tracer(self, path) if traces_wanted(runtime.traces) else None
        self.audit: AuditQueue | None = None
        self.keep_text = False
        if runtime.audit is not None:
            config = runtime.audit
            self.keep_text = config.keep_text
            self.lines = LineContext.of(
                self.manifest,
                self.providers,
                self.names,
                keep_text=config.keep_text,
                redact=self.redact,
            )
            count = self.metrics.audit_counter() if self.metrics is not None else None
            self.audit = _open_sink(config, self.redact, count, self.manifest.path)
            if self.audit.on_count is None:
                self.audit.on_count = count

    async def observe(
        self,
        gather: Gather,
        branch: BranchLike,
        instruction: InstructionLike,
        managed: list[Any],
        sequential: bool,
    ) -> ProviderReport:
        """Run ``gather`` (the ADR's) and keep what the manifest asks of the turn."""
        started = time.time()
        running = self._start_span(started)
        try:
            report = await gather(branch, instruction)
        except BaseException as error:
            if running is not None:
                self._contained(self._abort_span, running, error)
            raise
        if running is not None:
            self._contained(
                self._finish_span, running, report, branch, instruction, managed, sequential
            )
        if self.metrics is not None:
            self._contained(self.metrics.turn, report, self.names)
        if self.audit is not None:
            self._contained(self._audit, started, report, branch, instruction)
        return report

    def _audit(self, started: float, report: ProviderReport, branch: Any, instruction: Any) -> None:
        assert self.audit is not None
        line = snapshot(started, report, branch, instruction, self.lines)
        if not hold(self.audit, line):  # a server holds it until it has answered
            self.audit.put(line)

    def _start_span(self, started: float) -> Any:
        if self.tracer is None:
            return None
        try:
            return self.tracer.start(int(started * 1e9))
        except Exception:
            logger.warning("composer: a turn span could not be started", exc_info=True)
            return None

    def _abort_span(self, running: Any, error: BaseException) -> None:
        assert self.tracer is not None
        self.tracer.detach(running)
        self.tracer.abort(running, error)

    def _finish_span(
        self,
        running: Any,
        report: ProviderReport,
        branch: Any,
        instruction: Any,
        managed: list[Any],
        sequential: bool,
    ) -> None:
        assert self.tracer is not None
        self.tracer.detach(running)
        self.tracer.finish(
            running,
            report=report,
            branch=branch,
            instruction=instruction,
            managed=managed,
            sequential=sequential,
        )

    def _contained(self, step: Callable[..., Any], *args: Any) -> None:
        """Run one observing step; a failure is a masked warning, never the turn's."""
        try:
            step(*args)
        except Exception as e:
            logger.warning(
                "%s", self.redact(f"composer: observing a turn failed in {step.__name__}: {e!r}")
            )

    async def aclose(self) -> None:
        """Release the audit log (its last user writes what is queued and closes it)."""
        audit, self.audit = self.audit, None
        if audit is not None:
            await asyncio.to_thread(release_audit_log, audit)


def _open_sink(
    config: AuditConfig,
    redact: Callable[[str], str],
    count: Callable[[str, int], None] | None,
    manifest: str | None,
) -> AuditQueue:
    """The process's one sink of ``config`` (a file, a table and writer, standard output),
    opened once whatever number of loaded manifests write to it. ``manifest``: the manifest's
    path as its lines name it (masked), a table's writer unless the manifest names one."""
    common: QueueOptions = {"queue_size": config.queue, "redact": redact, "on_count": count}
    if config.postgres is not None:
        from composer.observe.audit.postgres import PostgresAuditLog

        table = config.postgres
        writer = redact(table.writer) if table.writer else manifest or _IN_MEMORY
        return open_audit_log(
            ("postgres", table.dsn, table.db_schema, writer),
            lambda _: PostgresAuditLog(
                table.dsn,
                schema=table.db_schema,
                writer=writer,
                manifest=manifest,
                max_age_s=table.max_age_days * 86_400,
                max_rows=table.max_rows,
                timeout_s=table.connect_timeout_s,
                **common,
            ),
        )
    if config.stdout:
        return open_audit_log("stdout", functools.partial(StdoutAuditLog, **common))
    assert config.path is not None  # the model holds exactly one sink
    return open_audit_log(
        config.path,
        functools.partial(AuditLog, max_bytes=config.max_bytes, backups=config.backups, **common),
    )


def revision(manifest: Manifest) -> str:
    """A short hash of the effective manifest, secrets masked: equal for the same revision."""
    dumped = manifest.model_dump_json()
    return hashlib.sha256(dumped.encode()).hexdigest()[:16]


_MISSING_WARNED: set[str] = set()


def _metrics() -> Metrics | None:
    try:
        from composer.observe.metrics import process_metrics
    except ImportError:
        _warn_missing("metrics", "prometheus-client")
        return None
    return process_metrics()


def _tracer(observer: TurnObserver, path: str | None) -> TurnTracer | None:
    try:
        from composer.observe.tracing import TurnTracer
    except ImportError:
        _warn_missing("otel", "opentelemetry-api")
        return None
    return TurnTracer(
        observer.providers, observer.names, redact=observer.redact, manifest_path=path
    )


def _warn_missing(extra: str, package: str) -> None:
    if extra not in _MISSING_WARNED:
        _MISSING_WARNED.add(extra)
        setting = "traces" if extra == "otel" else "metrics"
        logger.warning(
            "composer: runtime.%s is on but %s is not installed (pip install "
            "'context-composer[%s]'); turns run without it",
            setting,
            package,
            extra,
        )
