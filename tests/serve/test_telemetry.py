"""Traces out of ``composer serve`` (``composer.serve.telemetry``, ``composer.serve.spans``):
the standard ``OTEL_*`` variables configure the SDK; one served turn arrives at a real OTLP
receiver on 127.0.0.1 (``serve/otlp.py``, over HTTP/protobuf and over gRPC) as one trace:
the request's span, its turn's span, the providers' spans. Each worker exports from its own
provider, made after the fork; an application's own provider is kept. Hostile: an endpoint
that never answers holds neither a turn nor the stop, and the exporter's secrets (its headers,
an endpoint's password) never reach the log, even when a receiver echoes them back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
pytest.importorskip("opentelemetry.proto", reason="the otel extra is not installed")

from memory.services import redis_prefix_of
from memory.stores_fixtures import redis_url

from serve.conftest import STARTUP_S, children, start_serve
from serve.otlp import Span, blackhole, grpc_receiver, http_receiver

__all__ = ["redis_url"]  # the workers' store

MANIFEST = """\
version: 1
budget: 200
runtime: {traces: true}
providers:
  - {name: rules, type: static, priority: 9, text: "Answer in English.\\n"}
  - {name: runbook, type: static, priority: 5, text: "Roll back with deploy undo.\\n"}
"""

SECRET = "otlp-key-5d41402abc4b2a76"
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
SERVER = 2  # SpanKind.SPAN_KIND_SERVER in OTLP


def manifest(folder: Path) -> str:
    path = folder / "m.yaml"
    path.write_text(MANIFEST)
    return str(path)


def body(branch: str = "inc-1") -> dict[str, Any]:
    return {"branch": {"id": branch}, "system": "You help.\n", "instruction": {"text": "deploy"}}


def otel(endpoint: str, protocol: str = "http/protobuf", **more: str) -> dict[str, str]:
    """The variables an operator sets: where, how, who this service is, an API key."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_HEADERS": f"x-api-key={SECRET}",
        "OTEL_SERVICE_NAME": "composer-test",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        **more,
    }


def one_turn(spans: list[Span]) -> bool:
    names = [span.name for span in spans]
    return "POST /v1/turns" in names and names.count("composer.provide") >= 2


@pytest.fixture(autouse=True)
def no_otel(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``OTEL_*`` variable of the machine's own in the servers of this file."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_one_served_turn_arrives_as_one_trace_request_turn_and_providers(
    tmp_path: Path, protocol: str
) -> None:
    receiver = http_receiver() if protocol == "http/protobuf" else grpc_receiver()
    log = tmp_path / "stderr.log"
    with receiver as (endpoint, received), log.open("w") as stderr:
        server = start_serve([manifest(tmp_path)], env=otel(endpoint, protocol), stderr=stderr)
        try:
            answer = httpx.post(
                f"{server.url}/v1/turns",
                json=body(),
                headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
                timeout=60,
            )
            assert answer.status_code == 200
            spans = received.wait_for(one_turn)
        finally:
            assert server.stop() == 0
    (request,) = [s for s in spans if s.name == "POST /v1/turns"]
    (turn,) = [s for s in spans if s.name == "gather_context"]
    providers = [s for s in spans if s.parent_span_id == turn.span_id]
    # the caller's trace, then the request, then its turn, then each provider
    assert request.trace_id == turn.trace_id == CALLER_TRACE
    assert request.parent_span_id == CALLER_SPAN
    assert request.kind == SERVER
    assert turn.parent_span_id == request.span_id
    assert {s.attributes["composer.provider.name"] for s in providers} == {"rules", "runbook"}
    assert all(s.trace_id == CALLER_TRACE for s in providers)
    assert turn.attributes["composer.turn.id"] == answer.json()["report"]["turn_id"]
    assert request.attributes["http.route"] == "/v1/turns"
    assert request.attributes["http.request.method"] == "POST"
    assert request.attributes["http.response.status_code"] == 200
    assert (request.scope, turn.scope) == ("composer.serve", "composer")
    # the resource the variables describe, and which process exported
    assert request.resource["service.name"] == "composer-test"
    assert request.resource["deployment.environment"] == "test"
    assert request.resource["process.pid"] == server.process.pid
    # the API key went to the receiver, and nowhere else
    assert all(headers.get("x-api-key") == SECRET for headers in received.headers)
    assert SECRET not in log.read_text()


def test_otel_variables_trace_the_turns_of_a_manifest_that_does_not_ask(tmp_path: Path) -> None:
    """``OTEL_*`` is the operator's switch: no ``runtime.traces`` in the manifest, and each
    request span still has its turn and providers below it."""
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST.replace("runtime: {traces: true}\n", ""))
    assert "runtime" not in path.read_text()
    with http_receiver() as (endpoint, received):
        server = start_serve([str(path)], env=otel(endpoint))
        try:
            assert httpx.post(f"{server.url}/v1/turns", json=body(), timeout=60).is_success
            spans = received.wait_for(one_turn)
        finally:
            assert server.stop() == 0
    (request,) = [s for s in spans if s.name == "POST /v1/turns"]
    (turn,) = [s for s in spans if s.name == "gather_context"]
    assert turn.parent_span_id == request.span_id
    providers = [s for s in spans if s.parent_span_id == turn.span_id]
    assert {s.attributes["composer.provider.name"] for s in providers} == {"rules", "runbook"}


def test_probes_and_refusals_are_spans_named_by_their_route(
    tmp_path: Path,
) -> None:
    with http_receiver() as (endpoint, received), log_to(tmp_path) as stderr:
        server = start_serve([manifest(tmp_path)], env=otel(endpoint), stderr=stderr)
        try:
            hostile = "/v1/branches/" + "x" * 3000 + "%0Aforged/writeback"
            assert httpx.post(f"{server.url}{hostile}", json={}, timeout=60).status_code == 422
            assert httpx.get(f"{server.url}/no/such/%0Apath", timeout=60).status_code == 404
            assert httpx.request("PURGE", f"{server.url}/healthz", timeout=60).status_code == 405
            names = {
                "POST /v1/branches/{branch_id}/writeback",
                "GET",
                "_OTHER /healthz",
                "GET /readyz",
            }
            spans = received.wait_for(lambda found: names <= {s.name for s in found})
        finally:
            assert server.stop() == 0
    writeback = next(s for s in spans if s.name.startswith("POST /v1/branches"))
    assert len(writeback.attributes["url.path"]) <= 1024 + 3  # cut, not the client's 3,000
    other = next(s for s in spans if s.name == "_OTHER /healthz")
    assert other.attributes["http.request.method_original"] == "PURGE"


def test_each_worker_exports_from_its_own_provider_made_after_the_fork(
    tmp_path: Path, redis_url: str
) -> None:
    with (
        redis_prefix_of(redis_url) as word,
        http_receiver() as (endpoint, received),
        log_to(tmp_path) as stderr,
    ):
        args = [manifest(tmp_path), "--workers", "2", "--state", redis_url]
        args += ["--state-schema", word, "--rate-limit", "0"]
        server = start_serve(args, env=otel(endpoint), stderr=stderr)
        try:
            workers = set(children(server.process.pid))
            for n in range(10):  # a new connection each: either worker may take it
                answer = httpx.post(f"{server.url}/v1/turns", json=body(f"b{n}"), timeout=60)
                assert answer.status_code == 200
            spans = received.wait_for(
                lambda found: sum(s.name == "gather_context" for s in found) == 10
            )
        finally:
            assert server.stop() == 0
    pids = {s.resource["process.pid"] for s in spans}
    assert pids <= workers  # a worker's own provider: never the supervisor's, copied
    assert server.process.pid not in pids
    requests = {s.span_id: s for s in spans if s.name == "POST /v1/turns"}
    for turn in (s for s in spans if s.name == "gather_context"):
        parent = requests[turn.parent_span_id]  # its request's span, from the same worker
        assert parent.resource["process.pid"] == turn.resource["process.pid"]


def test_an_endpoint_that_never_answers_holds_neither_the_turns_nor_the_stop(
    tmp_path: Path,
) -> None:
    # an export may wait ten minutes for this endpoint: a turn that waited on it would time
    # out below, and a stop that waited would be killed by the fixture's bound
    log = tmp_path / "stderr.log"
    with blackhole() as endpoint, log.open("w") as stderr:
        env = otel(endpoint, OTEL_EXPORTER_OTLP_TIMEOUT="600")
        server = start_serve([manifest(tmp_path)], env=env, stderr=stderr)
        try:
            for n in range(20):
                answer = httpx.post(f"{server.url}/v1/turns", json=body(f"b{n}"), timeout=30)
                assert answer.status_code == 200
        finally:
            assert server.stop() == 0
    text = log.read_text()
    assert "traces: not all spans were exported within 5 s of the stop" in text
    assert SECRET not in text


def test_a_receiver_that_echoes_the_api_key_is_logged_masked(tmp_path: Path) -> None:
    def refuse(handler: BaseHTTPRequestHandler) -> bool:
        key = handler.headers.get("x-api-key", "")
        reply = f"bad key {key}".encode()
        handler.send_response(400, f"key {key} refused")
        handler.send_header("Content-Length", str(len(reply)))
        handler.end_headers()
        handler.wfile.write(reply)
        return True

    log = tmp_path / "stderr.log"
    password = "pw-9f8e7d6c5b4a"
    with http_receiver(refuse) as (endpoint, _), log.open("w") as stderr:
        at = endpoint.replace("http://", f"http://collector:{password}@")
        env = otel(at, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{at}/v1/traces")
        server = start_serve([manifest(tmp_path), "--log-format", "json"], env=env, stderr=stderr)
        try:
            assert httpx.post(f"{server.url}/v1/turns", json=body(), timeout=60).is_success
        finally:
            assert server.stop() == 0
    text = log.read_text()
    assert "Failed to export" in text  # the exporter said why, masked
    assert SECRET not in text
    assert password not in text
    assert "***" in text


PROGRAM = """\
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.testclient import TestClient
from composer import load_manifest
from composer.serve import create_app

provider = TracerProvider()  # the application's own, set before composer is used
spans = InMemorySpanExporter()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)
app = create_app(load_manifest(sys.argv[1]))
with TestClient(app, base_url="http://127.0.0.1:8080") as client:
    body = {"branch": {"id": "b"}, "system": "S\\n", "instruction": {"text": "deploy"}}
    assert client.post("/v1/turns", json=body).status_code == 200
finished = [
    {"name": s.name, "id": s.context.span_id, "parent": s.parent.span_id if s.parent else None}
    for s in spans.get_finished_spans()
]
print(json.dumps({"kept": trace.get_tracer_provider() is provider, "spans": finished}))
"""


def test_an_application_s_own_tracer_provider_is_kept_and_gets_the_spans(tmp_path: Path) -> None:
    # a process of its own: a provider, once set, is the process's for good
    with http_receiver() as (endpoint, received):
        ran = subprocess.run(
            [sys.executable, "-c", PROGRAM, manifest(tmp_path)],
            env={**os.environ, **otel(endpoint)},
            capture_output=True,
            text=True,
            timeout=STARTUP_S,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
        assert received.spans == []  # composer made and exported nothing of its own
    seen = json.loads(ran.stdout.splitlines()[-1])
    assert seen["kept"] is True
    (request,) = [s for s in seen["spans"] if s["name"] == "POST /v1/turns"]
    (turn,) = [s for s in seen["spans"] if s["name"] == "gather_context"]
    assert turn["parent"] == request["id"]


def log_to(folder: Path) -> IO[str]:
    return (folder / "stderr.log").open("w")
