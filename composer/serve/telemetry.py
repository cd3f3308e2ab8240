"""Traces out of ``composer serve``: the OpenTelemetry SDK, configured from the ``OTEL_*``
variables when the operator asks for it (the ``otel`` extra).

A library only uses the OpenTelemetry API (``composer.observe.tracing``); an application
configures the SDK. ``composer serve`` is an application, so it configures one, exactly as
the OpenTelemetry specification's variables say, and only when they ask for it: an
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``), or an ``OTEL_TRACES_EXPORTER``
other than ``none``. With none of them set nothing is imported and nothing is sent anywhere.

What is configured: a ``TracerProvider`` (its sampler from ``OTEL_TRACES_SAMPLER``), whose
resource is ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (``service.name``
``composer`` when neither names one, ``service.version`` composer's) and the process's
``process.pid`` (which worker: never its command line, which may hold a ``--state`` URL), with a ``BatchSpanProcessor`` (``OTEL_BSP_*``) and an
OTLP exporter over ``http/protobuf`` or ``grpc`` (``OTEL_EXPORTER_OTLP_PROTOCOL`` or
``..._TRACES_PROTOCOL``; its endpoint, headers, timeout, compression and certificates read
by the exporter from its own variables). Spans are exported on the processor's thread: a
turn only queues them (a bounded queue: past it spans are dropped, never waited for), and an
export waits at most ``OTEL_EXPORTER_OTLP_TIMEOUT`` (10 s by default). The server's shutdown
flushes what is queued, for at most ``FLUSH_S``.

One provider per process: under ``--workers`` each worker makes its own after the fork (the
parent exports nothing). A provider the application set already (composer used as a library)
is left as it is and used. The exporter's header values (an API key) and an endpoint's
password are secrets: ``masking`` adds them to what the server's log masks.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from composer.errors import ServeError
from composer.manifest.models import redact

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = [
    "EXTRA_HINT",
    "FLUSH_S",
    "PROTOCOLS",
    "Exporting",
    "exporting",
    "flush_traces",
    "masking",
    "start_traces",
    "traced",
]

logger = logging.getLogger(__name__)

EXTRA_HINT = "pip install 'context-composer[otel]'"
"""What installs the SDK and the OTLP exporters."""

FLUSH_S = 5.0
"""The longest the server's shutdown waits for its queued spans to be exported."""

PROTOCOLS = ("http/protobuf", "grpc")
"""The OTLP protocols ``OTEL_EXPORTER_OTLP_PROTOCOL`` may name."""

_EXPORTERS = {"otlp": None, "otlp_proto_http": "http/protobuf", "otlp_proto_grpc": "grpc"}
"""``OTEL_TRACES_EXPORTER``'s values taken (the last two are the Python SDK's own names),
each with the protocol it forces (None: the protocol variable's)."""

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_HEADERS = ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")

_OURS: TracerProvider | None = None
"""The provider this process made (one per process: the API sets a global provider once)."""
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Exporting:
    """What the variables ask for: where spans go and over which protocol."""

    protocol: str
    endpoint: str
    """Masked: no user, password, query or fragment (for the log)."""


def exporting(environ: Mapping[str, str] | None = None) -> Exporting | None:
    """What ``environ`` (the process's) asks to be exported, or None when it asks for
    nothing; ``ServeError`` for a value composer cannot honour (an exporter or protocol it
    does not have), so that the start fails instead of dropping every span silently."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    named = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",")]
    named = [n for n in named if n]
    endpoint = next((env[name].strip() for name in _ENDPOINTS if env.get(name, "").strip()), "")
    if named == ["none"] or (not named and not endpoint):
        return None
    wrong = [n for n in named if n not in _EXPORTERS]
    if wrong or len(named) > 1:
        raise ServeError(
            f"OTEL_TRACES_EXPORTER={','.join(named)}: composer serve exports to one of "
            f"{', '.join(_EXPORTERS)} (or none)"
        )
    protocol = _EXPORTERS[named[0]] if named else None
    if protocol is None:
        protocol = (
            env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "").strip()
            or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip()
            or "http/protobuf"
        )
    if protocol not in PROTOCOLS:
        raise ServeError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: composer serve exports over "
            f"{' or '.join(PROTOCOLS)}"
        )
    default = "http://localhost:4317" if protocol == "grpc" else "http://localhost:4318"
    return Exporting(protocol, _shown(endpoint or default))


def start_traces(environ: Mapping[str, str] | None = None) -> bool:
    """Configure this process's provider as the variables ask (once: later calls, and a
    provider the application set, keep the one there); whether spans are recorded now (the
    server then makes a span of each request). ``ServeError`` for what cannot be honoured,
    the otel extra missing included."""
    global _OURS
    asked = exporting(environ)
    with _LOCK:
        if asked is None or _OURS is not None:
            return _OURS is not None or _foreign()
        try:
            from opentelemetry import trace
        except ImportError:
            raise ServeError(f"OTEL_* asks for traces: {EXTRA_HINT}") from None
        if _foreign():
            logger.info("traces: the application's tracer provider is used")
            return True
        provider = _provider(asked)
        trace.set_tracer_provider(provider)
        _OURS = provider
    logger.info("traces: exported to %s over %s", asked.endpoint, asked.protocol)
    return True


def traced(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the server records a span of each request: the variables ask for traces (and
    what they ask for is installed: else ``ServeError``, before any worker starts), or the
    application set a tracer provider of its own. Imports nothing of OpenTelemetry."""
    asked = exporting(environ)
    if asked is None:
        return _foreign()
    exporter = f"opentelemetry.exporter.otlp.proto.{'grpc' if asked.protocol == 'grpc' else 'http'}"
    for module in ("opentelemetry.sdk", exporter):
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # its parent package is missing
            found = False
        if not found:
            raise ServeError(f"OTEL_* asks for traces over {asked.protocol}: {EXTRA_HINT}")
    return True


async def flush_traces(timeout_s: float = FLUSH_S) -> None:
    """Export the spans this process queued, waiting at most ``timeout_s`` (an endpoint that
    does not answer must not hold a stop); the provider stays, for a server started again in
    this process. Nothing when this process made none."""
    provider = _OURS
    if provider is None:
        return
    done = threading.Event()
    flushed: list[bool] = []

    def flush() -> None:
        # some SDK releases wait out the timeout, others wait for the export whatever it says
        try:
            flushed.append(provider.force_flush(int(timeout_s * 1000)))
        except Exception:  # an exporter's failure is its own log line; the stop goes on
            logger.debug("flushing the traces failed", exc_info=True)
        finally:
            done.set()

    threading.Thread(target=flush, name="composer-traces-flush", daemon=True).start()
    if not await asyncio.to_thread(done.wait, timeout_s) or flushed != [True]:
        logger.warning("traces: not all spans were exported within %g s of the stop", timeout_s)


def masking(
    mask: Callable[[str], str], environ: Mapping[str, str] | None = None
) -> Callable[[str], str]:
    """``mask``, then the OTLP exporter's secrets masked too: its header values (an API key,
    a bearer token) and any password in an endpoint, as they would appear in a log line."""
    env = os.environ if environ is None else environ
    secrets: set[str] = set()
    for name in _HEADERS:
        for pair in env.get(name, "").split(","):
            _, sep, value = pair.partition("=")
            if sep and value.strip():
                secrets |= {value.strip(), unquote(value).strip()}
    for name in _ENDPOINTS:
        try:
            password = urlsplit(env.get(name, "").strip()).password
        except ValueError:
            continue
        if password:
            secrets |= {password, unquote(password)}
    if not secrets:
        return mask
    frozen = frozenset(secrets)
    return lambda text: redact(mask(text), frozen)


def _foreign() -> bool:
    """Whether the application set a tracer provider (the API's own until one is set is a
    proxy); nothing is imported when OpenTelemetry is not."""
    if "opentelemetry.trace" not in sys.modules:
        return False
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    return provider is not _OURS and not isinstance(provider, trace.ProxyTracerProvider)


def _provider(asked: Exporting) -> TracerProvider:
    """A provider exporting as ``asked``, its resource from the variables."""
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

        exporter: SpanExporter
        if asked.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter as HttpSpanExporter,
            )

            exporter = HttpSpanExporter()
    except ImportError as e:
        raise ServeError(f"OTEL_* asks for traces over {asked.protocol}: {EXTRA_HINT}") from e
    from composer._version import __version__

    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, the SDK's own
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "composer"}))
    if SERVICE_VERSION not in resource.attributes:
        resource = resource.merge(Resource({SERVICE_VERSION: __version__}))
    resource = resource.merge(Resource({"process.pid": os.getpid()}))  # which worker
    # shut down by no exit hook: one would wait up to 30 s on an endpoint that does not
    # answer; the server's own stop flushes, bounded (flush_traces)
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _shown(endpoint: str) -> str:
    """An endpoint as the log may show it: scheme, host, port and path only."""
    try:
        parts = urlsplit(endpoint if "//" in endpoint else f"//{endpoint}")  # grpc's host:port
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an endpoint that is not a URL)"
    host = f"[{host}]" if ":" in host else host
    scheme = f"{parts.scheme}://" if parts.scheme else ""
    return f"{scheme}{host}{port}{parts.path}"
