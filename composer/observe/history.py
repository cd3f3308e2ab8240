"""A branch's last reports, read from the library (``runtime.report: {history: N}``)."""

from __future__ import annotations

from typing import Any

from composer.registry import ProviderReport

__all__ = ["report_history"]


def report_history(branch: Any) -> list[ProviderReport]:
    """The last reports of ``branch``'s registry, oldest first; empty when it keeps none.

    Works on a ``composer.Branch`` and a lionagi Branch alike (both keep the registry in
    ``_context_providers``), with a registry built from a manifest or one that follows a
    ``ManifestWatcher``; ADR-0008's ``last_context_report`` is still the last one.
    """
    history = getattr(getattr(branch, "_context_providers", None), "history", None)
    return list(history) if history is not None else []
