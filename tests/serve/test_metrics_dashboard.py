"""The Grafana dashboard, ``deploy/grafana/composer-dashboard.json``, asks only for metrics
composer registers, and shows every one of them: the names are read from the real registry
after a server built with ``--metrics`` served a turn, and from every query of the dashboard
(its panels' and its variables')."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from composer.serve import ServerConfig
from serve.apps import served
from serve.conftest import ROOT

prometheus_client = pytest.importorskip(
    "prometheus_client", reason="the metrics extra is not installed"
)

DASHBOARD = ROOT / "deploy" / "grafana" / "composer-dashboard.json"
MANIFEST = """\
version: 1
budget: 50
providers:
  - {name: rules, type: static, text: "House rules for {{ branch.name }}"}
"""
_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "gauge": ("",),
}
_NOT_NAMES = re.compile(
    r'"(?:[^"\\]|\\.)*"'  # a string: a label value, a legend
    r"|\{[^}]*\}"  # label matchers
    r"|\[[^\]]*\]"  # a range
    r"|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"  # label lists
    r"|\$\w+"  # a variable
)
_NAME = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)(\s*\()?")  # an identifier; a call's ( too
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "inf", "nan"})


def registered(tmp_path: Path) -> tuple[set[str], set[str]]:
    """The sample names the default registry can expose, and its composer metric families,
    once a server with ``--metrics`` has served a turn."""
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST)
    with served(path, ServerConfig(metrics=True, rate_limit=0)) as client:
        body = {"branch": {"id": "d", "name": "ops"}, "system": "S\n", "instruction": {"text": "x"}}
        assert client.post("/v1/turns", json=body).status_code == 200
    names: set[str] = set()
    families: set[str] = set()
    for family in prometheus_client.REGISTRY.collect():
        names.update(sample.name for sample in family.samples)
        names.update(family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",)))
        if family.name.startswith("composer_"):
            families.add(family.name)
    return names, families


def queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression of the dashboard: its panels' targets and its variables'."""
    found = [
        target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if target.get("expr")
    ]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            found.append(query["query"] if isinstance(query, dict) else query)
    return found


def metric_names(query: str) -> set[str]:
    """The metric names a PromQL expression (or ``label_values(METRIC, label)``) reads."""
    called = re.fullmatch(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,.*\)", query)
    if called is not None:
        return {called[1]}
    stripped = _NOT_NAMES.sub(" ", query)
    return {
        name for name, call in _NAME.findall(stripped) if not call and name.lower() not in _KEYWORDS
    }


def test_the_names_of_a_query_are_found() -> None:
    query = (
        'histogram_quantile(0.95, sum by (le, route) (rate(composer_x_bucket{job=~"$job", '
        'status="5.."}[$__rate_interval]))) / on (route) group_left (job) composer_y_total '
        "- time() > bool 0"
    )
    assert metric_names(query) == {"composer_x_bucket", "composer_y_total"}
    assert metric_names("label_values(composer_z_total, job)") == {"composer_z_total"}


def test_the_dashboard_reads_only_registered_metrics_and_shows_every_one(
    tmp_path: Path,
) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    names, families = registered(tmp_path)
    used: set[str] = set()
    for query in queries(dashboard):
        found = metric_names(query)
        assert found, query
        assert found <= names, f"{sorted(found - names)} in {query!r} are not registered"
        used |= found
    shown = {family for family in families if any(name.startswith(family) for name in used)}
    assert shown == families, f"not on the dashboard: {sorted(families - shown)}"
    assert {
        "composer_turns",
        "composer_provider_outcomes",
        "composer_provider_duration_seconds",
        "composer_turn_budget_used_ratio",
        "composer_audit_lines",
        "composer_manifest_reloads",
        "composer_http_requests",
        "composer_http_request_duration_seconds",
    } <= families


def test_the_dashboard_is_one_grafana_can_import() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert dashboard["uid"] == "composer-serve"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    source = {"type": "prometheus", "uid": "${datasource}"}
    for panel in dashboard["panels"]:
        assert {"x", "y", "w", "h"} <= panel["gridPos"].keys()
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == source
        refs = [target["refId"] for target in panel["targets"]]
        assert refs
        assert len(refs) == len(set(refs))
        assert all(target["datasource"] == source for target in panel["targets"])
    variables = {variable["name"] for variable in dashboard["templating"]["list"]}
    assert variables == {"datasource", "job"}
