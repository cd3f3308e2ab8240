"""Seeing every turn in production: report history, an audit log, traces, metrics.

Each is switched on in the manifest's ``runtime`` section (``report``, ``audit``, ``traces``,
``metrics``) and applied by the engine (``ManifestRegistry.gather`` hands the turn to the
manifest's ``TurnObserver``), so nothing here imports the engine (``composer.build``): hot
reload, which does, is ``composer.reload``. OpenTelemetry and prometheus_client are imported
only when a manifest turns them on.

```
history.py    report_history(branch): the last N reports of a branch
record.py     the audit line: made from a turn off its path, read back by `composer audit`
audit/        its sinks (a bounded queue and one thread each: a file, standard output, a
              PostgreSQL table), a server's held lines, and the one reader
tracing.py    OpenTelemetry spans (the otel extra), GenAI semantic conventions
metrics.py    Prometheus collectors (the metrics extra)
observer.py   TurnObserver: what one loaded manifest keeps of each turn
```
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from composer.observe.history import report_history

__all__ = ["report_history"]

_MOVED = {"ManifestWatcher": "composer.reload", "WatchedRegistry": "composer.reload"}


if not TYPE_CHECKING:
    # Hidden from type checkers: they flag the old address, Python still resolves it.

    def __getattr__(name: str) -> Any:
        """The watcher's old address, for one release: it moved to ``composer.reload``. Imported
        by name, not by an import statement: this package is below the engine, the watcher above."""
        home = _MOVED.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        warnings.warn(
            f"composer.observe.{name} moved to {home}.{name} (or composer.{name})",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)
