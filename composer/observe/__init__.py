"""Seeing every turn in production: report history, an audit log, traces, metrics, hot reload.

Each is switched on in the manifest's ``runtime`` section (``report``, ``audit``, ``traces``,
``metrics``) and applied by the engine (``ManifestRegistry.gather`` hands the turn to the
manifest's ``TurnObserver``); ``ManifestWatcher`` reloads a manifest when its files change.
OpenTelemetry and prometheus_client are imported only when a manifest turns them on.

```
history.py    report_history(branch): the last N reports of a branch
record.py     the audit line: made from a turn off its path, read back by `composer audit`
audit.py      the writer: a bounded queue and one thread per file, rotation, counted failures
tracing.py    OpenTelemetry spans (the otel extra), GenAI semantic conventions
metrics.py    Prometheus collectors (the metrics extra)
observer.py   TurnObserver: what one loaded manifest keeps of each turn
changes.py    what a manifest was read from, and digests to tell when it changed
watcher.py    ManifestWatcher, WatchedRegistry: reloads that keep the last good manifest
```
"""

from composer.observe.history import report_history
from composer.observe.watcher import ManifestWatcher, WatchedRegistry

__all__ = ["ManifestWatcher", "WatchedRegistry", "report_history"]
