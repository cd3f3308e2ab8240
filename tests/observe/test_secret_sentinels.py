"""A secret sentinel is hunted in everything observability writes: audit lines, spans, metric
labels and log records, with every switch on (text kept, content captured, metrics, a reload).

The sentinel comes from ``${TOKEN}`` into a provider's name, a static text, an http header
that the test server echoes into its error, and the audit path of a second manifest; the user
also types it. Nothing written may hold it, in any letter case or percent-encoded.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from localserver import serving
from reliability.test_secret_sentinels import (
    HOSTILE,
    HOSTILE_ASCII,
    SENTINEL,
    Echo,
    assert_clean,
)

import composer

from .conftest import turns, write

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK is not installed")
prometheus_client = pytest.importorskip("prometheus_client", reason="no metrics extra")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from composer.observe.tracing import CAPTURE_CONTENT  # noqa: E402


@pytest.fixture
def echo() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    with serving(httpd):
        yield f"http://127.0.0.1:{httpd.server_address[1]}"


MANIFEST = """\
    version: 1
    runtime:
      report: {history: 5}
      audit: {path: turns.jsonl, keep_text: true}
      traces: true
      metrics: true
    providers:
      - {name: "rules-${TOKEN}", type: static, text: "key ${TOKEN}\\n"}
      - name: api
        type: http
        request:
          url: "${API}/search"
          headers: {Authorization: "Bearer ${TOKEN}"}
          params: {q: "{{ instruction.text }}"}
"""


async def test_no_audit_line_span_metric_label_or_log_record_holds_a_secret(
    tmp_path: Path,
    echo: str,
    spans: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOKEN", SENTINEL)
    monkeypatch.setenv("API", echo)
    monkeypatch.setenv(CAPTURE_CONTENT, "true")
    path = write(tmp_path / "m.yaml", MANIFEST)
    unwritable = write(
        tmp_path / "other.yaml",
        MANIFEST.replace("path: turns.jsonl", 'path: "${TOKEN}/turns.jsonl"'),
    )
    with caplog.at_level(logging.DEBUG):
        async with composer.ManifestWatcher(path, watch="poll", poll_s=3600) as watcher:
            branch = composer.Branch(f"You know {SENTINEL}.\n", name="ops")
            watcher.attach(branch)
            turn = await composer.prepare_turn(branch, f"status of {SENTINEL}")
            assert turn.report is not None
            assert turn.report.failed == ["api"]  # the server echoed the token in its error
            path.write_text(path.read_text().replace("version: 1", "version: 1\nbudget: 99"))
            assert await watcher.check()
            await composer.prepare_turn(branch, "again")
            path.write_text(f"version: 1\nbudget: {SENTINEL}\n")  # broken, quoting the value
            assert not await watcher.check()
            assert watcher.error is not None
            assert_clean(str(watcher.error), "the reload error")
        other = composer.load_manifest(unwritable)
        other_branch = composer.Branch("sys\n")
        composer.attach(other_branch, other)
        await composer.prepare_turn(other_branch, "x")
        assert other.shared["observe"].audit.flush()
        await other.aclose()

    audit = (tmp_path / "turns.jsonl").read_text()
    assert audit.count("\n") == 2
    assert "rules-***" in audit  # the lines are there, masked
    assert_clean(audit, "the audit log")

    finished = spans.get_finished_spans()
    assert len(finished) == 3 * 3  # three turns (two of the watched manifest), three spans each
    for span in finished:
        assert_clean(span.name, "a span name")
        assert_clean(repr(dict(span.attributes or {})), f"attributes of {span.name}")
        assert_clean(str(span.status.description), f"status of {span.name}")

    exposition = prometheus_client.generate_latest().decode()
    assert 'provider="rules-***"' in exposition
    assert_clean(exposition, "the metrics")

    ours = [r for r in caplog.records if r.name.startswith(("composer", "builtin_providers"))]
    assert any("audit log" in r.getMessage() for r in ours)  # the unwritable path was said
    assert any("not reloaded" in r.getMessage() for r in ours)
    for record in ours:
        assert_clean(record.getMessage(), f"log record of {record.name}")
        if record.exc_info and record.exc_info[1] is not None:
            assert_clean(str(record.exc_info[1]), f"exception in log {record.name}")


class Mirror(BaseHTTPRequestHandler):
    """Answers 200 in plain text with the query string and the Authorization header it was
    sent, as they arrived and JSON-escaped (ASCII-only and UTF-8): every spelling at once."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        query = urlsplit(self.path).query
        echoed = {"query": query, "key": parse_qs(query).get("key", [""])[0]}
        echoed["auth"] = self.headers.get("Authorization", "")
        lines = [query, json.dumps(echoed), json.dumps(echoed, ensure_ascii=False)]
        body = "\n".join(lines).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def mirror() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Mirror)
    with serving(httpd):
        yield f"http://127.0.0.1:{httpd.server_address[1]}"


HOSTILE_MANIFEST = """\
    version: 1
    runtime: {traces: true}
    providers:
      - {name: rules, type: static, text: "key ${TOKEN}\\n"}
      - name: api
        type: http
        request:
          url: "${API}/search"
          headers: {Authorization: "Bearer ${KEY}"}
          params: {q: "{{ instruction.text }}", key: "${TOKEN}"}
      - {name: docs, type: file_corpus, root: corpus, query: "{{ instruction.text }} ${TOKEN}"}
      - name: notes
        type: memory
        source: {jsonl: notes.jsonl}
        query: {text: "deploy ${TOKEN}"}
"""


async def test_spans_record_the_shown_query_never_the_cache_key_nor_any_secret_spelling(
    tmp_path: Path, mirror: str, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The http query is its method and URL without query values (no header); a secret with
    quotes, a backslash, é, spaces, / and + is masked in the server's echo of it, raw,
    percent-, form- and JSON-encoded."""
    monkeypatch.setenv("TOKEN", HOSTILE)
    monkeypatch.setenv("KEY", HOSTILE_ASCII)
    monkeypatch.setenv("API", mirror)
    monkeypatch.setenv(CAPTURE_CONTENT, "true")
    write(tmp_path / "corpus" / "deploy.md", "# Deploy\n\nhow to deploy\n")
    write(tmp_path / "notes.jsonl", '{"content": "deploy notes", "tags": []}\n')
    manifest = composer.load_manifest(write(tmp_path / "m.yaml", HOSTILE_MANIFEST))
    (report,) = await turns(manifest, 1, text="how to deploy")
    await manifest.aclose()
    assert report.failed == []
    recorded = [dict(span.attributes or {}) for span in spans.get_finished_spans()]
    by_name = {str(a.get("composer.provider.name")): a for a in recorded}
    api, docs, notes = by_name["api"], by_name["docs"], by_name["notes"]
    assert api["gen_ai.retrieval.query.text"] == f"GET {mirror}/search?q=***&key=***"
    assert docs["gen_ai.retrieval.query.text"] == "how to deploy 0 ***"
    assert notes["gen_ai.memory.query.text"] == "deploy ***"
    (document,) = json.loads(str(api["gen_ai.retrieval.documents"]))
    assert document["content"].count('"auth": "Bearer ***"') == 2  # the echo is there, masked
    for span in spans.get_finished_spans():
        shown = f"{span.name} {dict(span.attributes or {})!r} {span.status.description}"
        assert "authorization" not in shown.lower()
        for secret in (HOSTILE, HOSTILE_ASCII):
            assert_clean(shown, f"span {span.name}", secret)
