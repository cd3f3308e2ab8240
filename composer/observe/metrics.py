"""Prometheus metrics of turns, providers, the audit log and manifest reloads.

Registered once per process in ``prometheus_client``'s default registry (the one its
``start_http_server``, ``make_asgi_app`` and ``generate_latest`` expose), when the first
manifest with ``runtime.metrics`` builds a registry (any manifest, in a process that records
metrics always: ``composer serve --metrics``, ``composer.observe.switch``). This module is
imported only then: without the ``metrics`` extra nothing of it is. Under prometheus_client's
multiprocess mode (``composer serve --workers N --metrics``) each process writes its own file
and a scrape sums them; the last good load's gauge is then the latest of any process. Label values are provider names and fixed words (an
outcome, a result), each masked by the manifest's ``redact``, so no label holds a secret and
their number stays that of the providers.

| metric | type | labels |
| --- | --- | --- |
| ``composer_provider_duration_seconds`` | histogram | provider, outcome |
| ``composer_provider_outcomes_total`` | counter | provider, outcome |
| ``composer_turns_total`` | counter | |
| ``composer_turn_tokens`` | histogram (tokens admitted per turn) | |
| ``composer_turn_budget_used_ratio`` | histogram (tokens admitted / budget) | |
| ``composer_audit_lines_total`` | counter | result: written, dropped, failed |
| ``composer_manifest_reloads_total`` | counter | result: ok, error |
| ``composer_manifest_last_good_load_timestamp_seconds`` | gauge | |
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from composer.outcomes import ProviderOutcome
from composer.registry import ProviderReport

__all__ = ["Metrics", "process_metrics"]

_TOKEN_BUCKETS = (0, 50, 100, 250, 500, 1000, 2000, 4000, 8000, 16000, float("inf"))
_RATIO_BUCKETS = (0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0, float("inf"))
_SECOND_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class Metrics:
    """The process's collectors; ``turn`` records one turn's report."""

    def __init__(self) -> None:
        self.provider_duration = Histogram(
            "composer_provider_duration_seconds",
            "Time a provider's call took in a turn.",
            ["provider", "outcome"],
            buckets=_SECOND_BUCKETS,
        )
        self.provider_outcomes = Counter(
            "composer_provider_outcomes",
            "Provider outcomes per turn (fired, cached, empty, guarded, over_max_tokens, "
            "over_budget, failed, timeout, not_called).",
            ["provider", "outcome"],
        )
        self.turns = Counter("composer_turns", "Turns gathered.")
        self.turn_tokens = Histogram(
            "composer_turn_tokens", "Tokens admitted in a turn.", buckets=_TOKEN_BUCKETS
        )
        self.turn_budget_ratio = Histogram(
            "composer_turn_budget_used_ratio",
            "Tokens admitted in a turn divided by its budget.",
            buckets=_RATIO_BUCKETS,
        )
        self.audit_lines = Counter("composer_audit_lines", "Audit log lines by result.", ["result"])
        self.reloads = Counter(
            "composer_manifest_reloads", "Manifest reloads by result (ok, error).", ["result"]
        )
        self.last_good_load = Gauge(
            "composer_manifest_last_good_load_timestamp_seconds",
            "When a watched manifest last loaded without error (Unix time).",
            multiprocess_mode="max",
        )
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}

    def turn(self, report: ProviderReport, names: Sequence[str]) -> None:
        """Count one turn: each provider's outcome and duration, the tokens against the budget."""
        self.turns.inc()
        self.turn_tokens.observe(report.tokens_used)
        if report.budget:
            self.turn_budget_ratio.observe(report.tokens_used / report.budget)
        outcomes: list[ProviderOutcome] = report.outcomes
        for index, record in enumerate(outcomes):
            name = names[index] if index < len(names) else record.name
            duration, count = self._child(name, record.outcome)
            count.inc()
            if record.duration_ms is not None:
                duration.observe(record.duration_ms / 1000)

    def _child(self, name: str, outcome: str) -> tuple[Any, Any]:
        """The labelled histogram and counter of one provider and outcome, looked up once."""
        key = (name, outcome)
        child = self._children.get(key)
        if child is None:
            child = (
                self.provider_duration.labels(name, outcome),
                self.provider_outcomes.labels(name, outcome),
            )
            self._children[key] = child
        return child

    def audit_counter(self) -> Callable[[str, int], None]:
        """What the audit log calls with ``(result, lines)``."""

        def count(result: str, lines: int) -> None:
            self.audit_lines.labels(result).inc(lines)

        return count


_METRICS: Metrics | None = None
_LOCK = threading.Lock()


def process_metrics() -> Metrics:
    """The process's one ``Metrics`` (a collector can be registered once per registry)."""
    global _METRICS
    with _LOCK:
        if _METRICS is None:
            _METRICS = Metrics()
        return _METRICS
