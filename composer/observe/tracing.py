"""OpenTelemetry spans of a turn: one ``gather_context`` span, one child per registered provider.

Only ``opentelemetry-api`` is used (the ``otel`` extra); the application configures the SDK
and its exporters, as OpenTelemetry asks of libraries. This module is imported only when a
manifest sets ``runtime.traces``, so without it nothing of OpenTelemetry is imported.

The turn span is current while the providers run, so spans that a provider's own libraries
make (an instrumented HTTP client) are its children. The provider spans are made when the
gather has ended, from the registry's own outcome records: each starts at the turn's start
(``concurrent``) or after the providers before it (``sequential``) and lasts its measured
``duration_ms``. They follow the GenAI semantic conventions where the provider's type declares
an operation (``ProviderType.operation``, which the engine puts on each ``ManagedProvider``):
a ``retrieval`` span carries ``gen_ai.data_source.id`` (the built-in ``file_corpus`` and
``http``), a ``search_memory`` span ``gen_ai.memory.store.id`` (``memory``), a span of another
operation is named by it and carries ``gen_ai.operation.name``; every span also carries
``composer.provider.*`` (name, type, priority, outcome, tokens, cache hit) and, on failure,
``error.type`` and an error status. Query and block text are recorded only when the standard
switch ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true``, ``span_only`` or
``span_and_event``; every string recorded is masked by the manifest's ``redact``. The query is
what the provider shows of it (the ``DisplayQuery`` hook: a URL without query values, never a
header), or nothing: never its cache key, which may hold every header it sends.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from composer._version import __version__
from composer.hooks import DisplayQuery
from composer.observe.record import ProviderInfo
from composer.principal import principal_name
from composer.registry import ProviderReport

__all__ = ["CAPTURE_CONTENT", "TurnTracer", "capture_content"]

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI instrumentations' switch for recording prompt and response text."""

_CAPTURE_ON = frozenset({"true", "1", "span_only", "span_and_event"})

_SOURCE_IDS = {"retrieval": "gen_ai.data_source.id", "search_memory": "gen_ai.memory.store.id"}
"""The attribute naming what an operation searched (the provider's name)."""
_QUERIES = {
    "retrieval": "gen_ai.retrieval.query.text",
    "search_memory": "gen_ai.memory.query.text",
}

_TURN_SPAN = "gather_context"
_OTHER_SPAN = "composer.provide"


def capture_content(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the GenAI content-capture switch asks for text on spans."""
    value = (environ if environ is not None else os.environ).get(CAPTURE_CONTENT, "")
    return value.strip().lower() in _CAPTURE_ON


class _Running:
    """A turn span being recorded, and the context token that made it current."""

    __slots__ = ("span", "start_ns", "token")

    def __init__(self, span: Span, token: object, start_ns: int) -> None:
        self.span = span
        self.token = token
        self.start_ns = start_ns


class TurnTracer:
    """Spans of the turns of one loaded manifest."""

    def __init__(
        self,
        providers: Sequence[ProviderInfo],
        names: Sequence[str],
        *,
        redact: Callable[[str], str],
        manifest_path: str | None,
        capture: bool | None = None,
    ) -> None:
        self._tracer = trace.get_tracer("composer", __version__)
        self._providers = providers
        self._names = names
        self._redact = redact
        self._manifest_path = manifest_path
        self.capture = capture_content() if capture is None else capture

    def start(self, start_ns: int) -> _Running:
        """Open the turn span and make it current for the providers' calls."""
        span = self._tracer.start_span(_TURN_SPAN, kind=SpanKind.INTERNAL, start_time=start_ns)
        token = otel_context.attach(trace.set_span_in_context(span))
        return _Running(span, token, start_ns)

    def detach(self, running: _Running) -> None:
        """The turn span is no longer current (the gather returned or raised)."""
        otel_context.detach(cast(Any, running.token))

    def abort(self, running: _Running, error: BaseException) -> None:
        """End the turn span of a gather that raised (a ``BaseException``, ADR D2)."""
        running.span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        running.span.set_attribute("error.type", type(error).__name__)
        running.span.end()

    def finish(
        self,
        running: _Running,
        *,
        report: ProviderReport,
        branch: Any,
        instruction: Any,
        managed: Sequence[Any],
        sequential: bool,
    ) -> None:
        """Add a child span per provider from the outcome records, then end the turn span."""
        mask = self._redact
        turn = running.span
        parent = trace.set_span_in_context(turn)
        at = running.start_ns
        for index, record in enumerate(report.outcomes):
            info = self._providers[index] if index < len(self._providers) else None
            provider = managed[index] if index < len(managed) else None
            operation: str | None = getattr(provider, "operation", None)
            name = self._names[index] if index < len(self._names) else mask(record.name)
            attributes: dict[str, Any] = {
                "composer.provider.name": name,
                "composer.provider.outcome": record.outcome,
                "composer.provider.cache_hit": record.outcome == "cached",
            }
            if info is not None:
                attributes["composer.provider.type"] = info.type
                attributes["composer.provider.priority"] = info.priority
            if record.tokens is not None:
                attributes["composer.provider.tokens"] = record.tokens
            if operation is not None:
                attributes["gen_ai.operation.name"] = operation
                source = _SOURCE_IDS.get(operation)
                if source is not None:
                    attributes[source] = name
            if record.error_type is not None:
                attributes["error.type"] = record.error_type
            if self.capture:
                attributes.update(
                    self._content(operation, index, managed, branch, instruction, report, record)
                )
            duration_ns = int((record.duration_ms or 0.0) * 1e6)
            span = self._tracer.start_span(
                operation or _OTHER_SPAN,
                context=parent,
                kind=SpanKind.INTERNAL,
                start_time=at,
                attributes=attributes,
            )
            if record.error_type is not None:
                span.set_status(Status(StatusCode.ERROR, mask(record.error or record.error_type)))
            span.end(end_time=at + duration_ns)
            if sequential:
                at += duration_ns
        turn.set_attributes(
            {
                "gen_ai.conversation.id": mask(str(getattr(branch, "id", ""))),
                "composer.turn.id": report.turn_id or "",
                "composer.branch.name": mask(str(getattr(branch, "name", None) or "")),
                "composer.principal": principal_name() or "",
                "composer.manifest.path": self._manifest_path or "",
                "composer.budget": report.budget if report.budget is not None else -1,
                "composer.tokens_used": report.tokens_used,
                "composer.providers.failed": len(report.failed),
            }
        )
        if report.failed:
            turn.set_status(
                Status(
                    StatusCode.ERROR,
                    f"{len(report.failed)} {'provider' if len(report.failed) == 1 else 'providers'} failed",
                )
            )
        turn.end()

    def _content(
        self,
        operation: str | None,
        index: int,
        managed: Sequence[Any],
        branch: Any,
        instruction: Any,
        report: ProviderReport,
        record: Any,
    ) -> dict[str, str]:
        """The query and the block of one provider, masked (content capture is on)."""
        mask = self._redact
        out: dict[str, str] = {}
        provider = managed[index] if index < len(managed) else None
        query = _query(provider, branch, instruction)
        if query:
            out[_QUERIES.get(operation or "", "composer.provider.query")] = mask(query)
        block = _block_of(report, index)
        if block is not None:
            text = mask(block)
            if operation == "retrieval":
                out["gen_ai.retrieval.documents"] = json.dumps(
                    [{"id": record.name, "content": text}]
                )
            elif operation == "search_memory":
                out["gen_ai.memory.records"] = json.dumps([{"content": text}])
            else:
                out["composer.provider.block"] = text
        return out


def _query(provider: Any, branch: Any, instruction: Any) -> str | None:
    """The provider's query as it may be shown, if it has one."""
    if provider is None or DisplayQuery not in getattr(provider, "hooks", ()):
        return None
    try:
        return cast(DisplayQuery, provider.provider).display_query(branch, instruction)
    except Exception:  # the provider met the same error in its turn, where it was recorded
        return None


def _block_of(report: ProviderReport, index: int) -> str | None:
    """The admitted block of the provider at ``index`` (blocks are in registration order)."""
    if report.outcomes[index].outcome not in ("fired", "cached"):
        return None
    position = sum(1 for o in report.outcomes[:index] if o.outcome in ("fired", "cached"))
    return report.blocks[position] if position < len(report.blocks) else None
