"""OTLP trace receivers on 127.0.0.1 that decode what they are sent: what a collector sees.

``http_receiver`` is an OTLP/HTTP endpoint (``POST /v1/traces``, protobuf, gzip or not) on a
real ``http.server``; ``grpc_receiver`` the OTLP/gRPC ``TraceService`` on a real grpcio server.
Each decodes every ``ExportTraceServiceRequest`` with opentelemetry-proto into ``Span`` rows
(ids in hex, attributes as plain values, the resource's attributes beside) and keeps the
request headers it saw, so a test can look for a span, its parent and a header's value.
``blackhole`` is an endpoint that takes connections and never answers.
"""

from __future__ import annotations

import contextlib
import gzip
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from localserver import serving
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["Received", "Span", "blackhole", "grpc_receiver", "http_receiver"]

MAX_BODY = 16 * 1024 * 1024
WAIT_S = 30.0  # a bound that only catches spans that never come


@dataclass(frozen=True)
class Span:
    """One received span, as a test compares it."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str


@dataclass
class Received:
    """Everything a receiver was sent: spans, and each request's headers (lower-cased)."""

    spans: list[Span] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, request: ExportTraceServiceRequest, headers: dict[str, str]) -> None:
        spans = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        Span(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            attributes=_attributes(span.attributes),
                            resource=resource,
                            scope=scope_spans.scope.name,
                        )
                    )
        with self.lock:
            self.spans.extend(spans)
            self.headers.append(headers)

    def wait_for(self, found: Callable[[list[Span]], bool]) -> list[Span]:
        """The spans once ``found`` holds of them (an AssertionError when it never does)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            with self.lock:
                spans = list(self.spans)
            if found(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"the spans did not arrive: {[s.name for s in spans]}")
            time.sleep(0.05)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return None if kind is None else getattr(value, kind)


@contextlib.contextmanager
def http_receiver(
    answer: Callable[[BaseHTTPRequestHandler], bool] | None = None,
) -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP receiver for the block: its base URL (``OTEL_EXPORTER_OTLP_ENDPOINT``)
    and what it receives. ``answer``, given, may answer a request itself (True: answered)."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, MAX_BODY))
            if answer is not None and answer(self):
                return
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            encoding = (self.headers.get("Content-Encoding") or "").lower()
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            received.add(request, {k.lower(): v for k, v in self.headers.items()})
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    with serving(httpd):
        yield f"http://127.0.0.1:{httpd.server_address[1]}", received


@contextlib.contextmanager
def grpc_receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/gRPC receiver (plaintext) for the block: its endpoint and what it receives."""
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    received = Received()

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: ExportTraceServiceRequest, context: Any) -> Any:
            headers = {k.lower(): v for k, v in context.invocation_metadata()}
            received.add(request, headers)
            return ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    add = trace_service_pb2_grpc.add_TraceServiceServicer_to_server
    add(Service(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.stop(grace=None)


@contextlib.contextmanager
def blackhole() -> Iterator[str]:
    """An address that takes TCP connections (the kernel's backlog) and never answers: an
    OTLP endpoint that hangs. Its base URL."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    stop = threading.Event()
    held: list[socket.socket] = []

    def hold() -> None:  # accept, read nothing, answer nothing
        listener.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for sock in held:
            sock.close()
        listener.close()
