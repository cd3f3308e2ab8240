"""Whether this process records Prometheus metrics of every manifest, whatever each says.

A manifest asks for metrics with ``runtime.metrics``; a process that exposes them
(``composer serve --metrics``) needs them whatever the manifest it serves, or reloads to,
says: an empty scrape because of a manifest setting would be a trap. The switch is the
process's (the metrics are: one registry per process), turned on for the rest of its life;
it imports nothing, so asking it costs no import of ``prometheus_client``.
"""

from __future__ import annotations

__all__ = ["metrics_wanted", "record_metrics_always"]

_always = False


def record_metrics_always() -> None:
    """From now on, every manifest's turns and reloads are counted in this process."""
    global _always
    _always = True


def metrics_wanted(runtime_metrics: bool) -> bool:
    """Whether to count a manifest whose ``runtime.metrics`` is ``runtime_metrics``."""
    return runtime_metrics or _always
