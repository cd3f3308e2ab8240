"""The process's switch (``composer.observe.switch``, which ``composer serve --metrics`` turns
on): a manifest without ``runtime.metrics`` is counted, its turns and a watcher's reloads, and
nothing is counted without the switch. Read from the default registry, as a change."""

from __future__ import annotations

from pathlib import Path

import pytest

import composer
from composer.observe.switch import metrics_wanted, record_metrics_always

from .conftest import turns, write

prometheus_client = pytest.importorskip(
    "prometheus_client", reason="the metrics extra is not installed"
)

MANIFEST = """\
    version: 1
    providers:
      - {name: sw-rules, type: static, text: "Answer in English.\\n"}
"""


def value(name: str, **labels: str) -> float:
    return prometheus_client.REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def switched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The switch on for this test alone (it is the process's for good otherwise)."""
    monkeypatch.setattr("composer.observe.switch._metrics", False)
    record_metrics_always()


async def test_without_the_switch_a_manifest_without_metrics_counts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("composer.observe.switch._metrics", False)
    assert not metrics_wanted(False)
    manifest = composer.load_manifest(write(tmp_path / "m.yaml", MANIFEST))
    before = value("composer_provider_outcomes_total", provider="sw-rules", outcome="fired")
    await turns(manifest, 2)
    after = value("composer_provider_outcomes_total", provider="sw-rules", outcome="fired")
    assert after == before
    await manifest.aclose()


async def test_with_the_switch_turns_and_reloads_are_counted_whatever_the_manifest_says(
    tmp_path: Path, switched: None
) -> None:
    assert metrics_wanted(False)
    path = write(tmp_path / "m.yaml", MANIFEST)
    manifest = composer.load_manifest(path)
    before = value("composer_provider_outcomes_total", provider="sw-rules", outcome="fired")
    await turns(manifest, 3)
    after = value("composer_provider_outcomes_total", provider="sw-rules", outcome="fired")
    assert after - before == 3
    await manifest.aclose()
    reloads = value("composer_manifest_reloads_total", result="ok")
    async with composer.ManifestWatcher(path, watch="poll", poll_s=3600) as watcher:
        path.write_text(path.read_text().replace("English", "French"))
        assert await watcher.check()
    assert value("composer_manifest_reloads_total", result="ok") - reloads == 1
