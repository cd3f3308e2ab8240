"""``composer serve --metrics`` built in process: ``/metrics`` behind the API's token, turns
counted whatever the manifest says, requests counted by route template with bounded labels
whatever paths arrive, the unauthenticated ``--metrics-port`` listener serving that alone,
the options' rules, the install hint, and the workers' shared directory.

The default registry is the process's, shared with every other test: each test reads the
change its own requests made (a scrape before, a scrape after)."""

from __future__ import annotations

import os
import random
import socket
import stat
import string
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from composer.cli.main import main
from composer.errors import ServeError
from composer.serve import ServerConfig
from serve.apps import LOOPBACK, configured_app, served
from serve.conftest import (  # no runtime.metrics: --metrics counts all the same
    rules_manifest,
    turn_body,
)

prometheus_client = pytest.importorskip(
    "prometheus_client", reason="the metrics extra is not installed"
)
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from composer.serve.metrics import (  # noqa: E402
    CONTENT_TYPE,
    MULTIPROCESS_VARIABLE,
    MetricsPort,
    shared_by_workers,
)

TOKEN = "metrics-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def read(client: TestClient | httpx.Client) -> Samples:
    answer = client.get("/metrics", headers=AUTH)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == CONTENT_TYPE
    return samples(answer.text)


def change(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def series(found: Samples, name: str) -> set[tuple[tuple[str, str], ...]]:
    return {labels for sample, labels in found if sample == name}


METRICS = ServerConfig(metrics=True, rate_limit=0)


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[TestClient]:
    """``composer serve m.yaml --metrics --rate-limit 0`` with a token."""
    with served(rules_manifest(tmp_path), METRICS, env={"COMPOSER_SERVE_TOKEN": TOKEN}) as client:
        yield client


def test_metrics_need_the_token_and_count_turns_the_manifest_does_not_ask_for(
    guarded: TestClient,
) -> None:
    refused = guarded.get("/metrics")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Bearer realm="composer"'
    assert guarded.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    before = read(guarded)
    for _ in range(3):
        assert guarded.post("/v1/turns", json=turn_body("inc-1"), headers=AUTH).status_code == 200
    writeback = {"action_responses": [{"function": "f", "output": "o"}]}
    path = "/v1/branches/inc-1/writeback"
    assert guarded.post(path, json=writeback, headers=AUTH).status_code == 200
    after = read(guarded)
    assert change(before, after, "composer_turns_total") == 3
    outcomes = "composer_provider_outcomes_total"
    assert change(before, after, outcomes, provider="rules", outcome="fired") == 3
    requests = "composer_http_requests_total"
    assert change(before, after, requests, route="/v1/turns", method="POST", status="200") == 3
    template = "/v1/branches/{branch_id}/writeback"
    assert change(before, after, requests, route=template, method="POST", status="200") == 1
    assert change(before, after, requests, route="/metrics", method="GET", status="401") == 0
    duration = "composer_http_request_duration_seconds_count"
    assert change(before, after, duration, route="/v1/turns", method="POST", status="200") == 3
    assert not any(labels for labels in series(after, requests) if ("route", path) in labels)


def test_refused_requests_are_counted_with_their_status(guarded: TestClient) -> None:
    before = read(guarded)
    assert guarded.post("/v1/turns", json=turn_body("x")).status_code == 401
    assert guarded.get("/v1/turns", headers=AUTH).status_code == 405
    after = read(guarded)
    requests = "composer_http_requests_total"
    assert change(before, after, requests, route="/v1/turns", method="POST", status="401") == 1
    assert change(before, after, requests, route="/v1/turns", method="GET", status="405") == 1


def test_without_metrics_there_is_no_metrics_route(tmp_path: Path) -> None:
    with served(rules_manifest(tmp_path)) as client:
        assert client.get("/metrics").status_code == 404


def test_a_loopback_server_without_a_token_answers_metrics_as_it_answers_the_api(
    tmp_path: Path,
) -> None:
    with served(rules_manifest(tmp_path), METRICS) as client:
        assert client.get("/metrics").status_code == 200
        foreign = client.get("/metrics", headers={"Host": "rebound.example"})
        assert foreign.status_code == 421  # the same DNS-rebinding guard as /v1/manifest


def hostile_path(rng: random.Random) -> str:
    word = "".join(rng.choices(string.ascii_letters + string.digits + "%._-~", k=12))
    return rng.choice(
        [
            f"/{word}",
            f"/v1/{word}/{word}",
            f"/v1/branches/{word}",  # near a template, not one
            f"/console/{word}",
            f"/metrics/{word}",
            f"/v1/turns/{word}",
        ]
    )


def test_a_thousand_distinct_paths_and_methods_make_a_bounded_number_of_series(
    guarded: TestClient,
) -> None:
    """A scan of random paths and made-up methods adds at most one series per method and
    status to ``unmatched``, never one per path."""
    rng = random.Random(35)
    read(guarded)  # the scrape's own series exists before what is compared (run alone too)
    before = read(guarded)
    methods = ["GET", "POST", "DELETE", "PROPFIND", "BREW", "get", "X" * 40]
    sent = 1000
    for _ in range(sent):
        answer = guarded.request(rng.choice(methods), hostile_path(rng), headers=AUTH)
        assert answer.status_code < 500
    after = read(guarded)
    requests = "composer_http_requests_total"
    added = series(after, requests) - series(before, requests)
    assert {dict(labels)["route"] for labels in added} <= {"unmatched"}
    assert {dict(labels)["method"] for labels in added} <= {"GET", "POST", "DELETE", "other"}
    assert len(added) <= 4 * 4  # methods x statuses (404, 405, 415 ...), not paths
    unmatched = [labels for labels in series(after, requests) if ("route", "unmatched") in labels]
    counted = sum(change(before, after, requests, **dict(labels)) for labels in unmatched)
    assert counted == sent


@pytest.fixture
def metrics_port(tmp_path: Path) -> Iterator[tuple[TestClient, int]]:
    """The app as ``run`` serves it with ``--metrics-port``: a client of its API port and the
    number of its metrics port (a socket bound, never listened to here: httpx's ASGI
    transport says which port a request came to)."""
    config = ServerConfig(metrics=True, metrics_port=0, rate_limit=0)
    app = configured_app(rules_manifest(tmp_path), config, env={"COMPOSER_SERVE_TOKEN": TOKEN})
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = MetricsPort(sock, loopback=True)
    try:
        with TestClient(port.serving(app), base_url=LOOPBACK) as client:
            yield client, port.port
    finally:
        sock.close()


def test_the_metrics_port_serves_metrics_alone_without_a_token(
    metrics_port: tuple[TestClient, int],
) -> None:
    api, number = metrics_port
    assert api.get("/metrics").status_code == 401  # the API's port keeps its guard
    assert api.post("/v1/turns", json=turn_body("p"), headers=AUTH).status_code == 200
    # the same app, not entered: its lifespan runs once, in the API client
    open_port = TestClient(api.app, base_url=f"http://127.0.0.1:{number}")
    answer = open_port.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == CONTENT_TYPE
    assert ("composer_turns_total", ()) in samples(answer.text)
    for path in ("/v1/manifest", "/healthz", "/metrics/x", "/"):
        assert open_port.get(path, headers=AUTH).status_code == 404
    refused = open_port.post("/v1/turns", json=turn_body("p"), headers=AUTH)
    assert refused.status_code == 404  # nothing of the API, token or not
    assert open_port.post("/metrics", content=b"x" * 10_000).status_code == 405
    assert open_port.get("/metrics", headers={"Host": "rebound.example"}).status_code == 421


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        ({"metrics_port": 9100}, "--metrics-port goes with --metrics"),
        ({"metrics": True, "metrics_port": 70000}, "--metrics-port must be between 0 and 65535"),
        ({"metrics": True, "metrics_port": 8080}, "--metrics-port must differ from --port"),
        ({"metrics": True, "mcp_stdio": True}, "--metrics goes with HTTP, not --mcp-stdio"),
        ({"metrics": 1}, "--metrics is a flag: True or False"),
        ({"metrics": True, "metrics_port": "9100"}, "--metrics-port must be a number"),
    ],
)
def test_the_metrics_options_rules(options: dict[str, object], refusal: str) -> None:
    with pytest.raises(ServeError, match=f"^{refusal}$"):
        ServerConfig(**options)  # type: ignore[arg-type]


def test_without_prometheus_client_metrics_fail_at_start_naming_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    path = rules_manifest(tmp_path)
    assert main(["serve", str(path), "--port", "0", "--metrics"]) == 1
    error = capsys.readouterr().err
    assert "prometheus_client not installed: pip install 'context-composer[metrics]'" in error
    with pytest.raises(ServeError, match=r"context-composer\[metrics\]"):
        configured_app(path, METRICS)


def test_the_workers_directory_is_private_shared_and_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the supervisor does around forking (the workers themselves are
    ``test_metrics_workers.py``'s): a 0700 directory in the variable meanwhile, dead
    workers' live gauges dropped, the directory gone and the variable restored after."""
    monkeypatch.setenv(MULTIPROCESS_VARIABLE, "/somewhere/else")
    config = ServerConfig(metrics=True, workers=2, state="redis://127.0.0.1:6379")
    values = sys.modules["prometheus_client.values"]
    monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue())
    with shared_by_workers(config) as ended:
        folder = Path(os.environ[MULTIPROCESS_VARIABLE])
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert ended is not None
        live, kept = folder / "gauge_livesum_4242.db", folder / "counter_4242.db"
        live.touch()
        kept.touch()
        ended(4242)
        assert not live.exists()
        assert kept.exists()  # a dead worker's counts still count
    assert not folder.exists()
    assert os.environ[MULTIPROCESS_VARIABLE] == "/somewhere/else"
    with shared_by_workers(ServerConfig(metrics=True)) as nothing:
        assert nothing is None  # one process: its own registry


def test_prometheus_client_imported_single_process_is_refused_before_forking() -> None:
    """This process imported prometheus_client without the variable: workers forked from it
    would each count alone, so the server refuses rather than scrape a part."""
    config = ServerConfig(metrics=True, workers=2, state="redis://127.0.0.1:6379")
    with (
        pytest.raises(ServeError, match="imported in single-process mode"),
        shared_by_workers(config),
    ):
        pass
