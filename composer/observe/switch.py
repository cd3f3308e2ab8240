"""Whether this process records Prometheus metrics, or OpenTelemetry spans, of every manifest,
whatever each says.

A manifest asks for metrics with ``runtime.metrics`` and for spans with ``runtime.traces``; a
process that exposes them needs them whatever the manifest it serves, or reloads to, says:
``composer serve --metrics`` (an empty scrape because of a manifest setting would be a trap),
and ``composer serve`` with ``OTEL_*`` asking for traces (a request span with no turn below it
would be one too). Each switch is the process's (one registry, one tracer provider per
process), turned on for the rest of its life; it imports nothing, so asking it costs no import
of ``prometheus_client`` or OpenTelemetry.
"""

from __future__ import annotations

__all__ = ["metrics_wanted", "record_metrics_always", "record_traces_always", "traces_wanted"]

_metrics = False
_traces = False


def record_metrics_always() -> None:
    """From now on, every manifest's turns and reloads are counted in this process."""
    global _metrics
    _metrics = True


def metrics_wanted(runtime_metrics: bool) -> bool:
    """Whether to count a manifest whose ``runtime.metrics`` is ``runtime_metrics``."""
    return runtime_metrics or _metrics


def record_traces_always() -> None:
    """From now on, every manifest's turns are traced (a span per turn, one per provider)."""
    global _traces
    _traces = True


def traces_wanted(runtime_traces: bool) -> bool:
    """Whether to trace the turns of a manifest whose ``runtime.traces`` is ``runtime_traces``."""
    return runtime_traces or _traces
