"""OpenTelemetry spans of a turn, received by the SDK's in-memory exporter.

The manifest has one provider of each kind the GenAI conventions name (a corpus and an http
service are retrievals, memory is a memory search) and a static one that has none; the http
server is a real one on 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest
from localserver import serving_json

import composer
from composer.catalog import ProviderTypes
from composer.observe.tracing import CAPTURE_CONTENT
from composer.plugin import ProviderConfig, ProviderType
from composer.principal import Principal, current_principal

from .conftest import turns, write

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

pytest.importorskip("opentelemetry", reason="the otel extra is not installed")


@pytest.fixture
def status_url() -> Iterator[str]:
    with serving_json() as url:
        yield url


def manifest_in(folder: Path, url: str, *, traces: bool = True) -> composer.Manifest:
    (folder / "corpus").mkdir()
    (folder / "corpus" / "deploy.md").write_text("# Deploy\n\nRoll back with `deploy undo`.\n")
    (folder / "notes.jsonl").write_text('{"content": "the deploy of May failed", "tags": []}\n')
    return composer.load_manifest(
        write(
            folder / "m.yaml",
            f"""\
            version: 1
            budget: 200
            runtime: {{traces: {"true" if traces else "false"}}}
            providers:
              - {{name: rules, type: static, priority: 9, text: "Answer in English.\\n"}}
              - {{name: runbooks, type: file_corpus, priority: 5, root: corpus}}
              - name: team-memory
                type: memory
                source: {{jsonl: notes.jsonl}}
                query: {{text: deploy}}
              - name: status
                type: http
                cache: {{ttl_s: 60}}
                request: {{url: "{url}/search", params: {{q: "{{{{ instruction.text }}}}"}}}}
                response: {{template: "{{{{ json.results[0].title }}}}"}}
              - {{name: broken, type: static, text: "{{{{ instruction.context.ticket.id }}}}"}}
            """,
        )
    )


def by_name(spans: InMemorySpanExporter) -> tuple[ReadableSpan, list[ReadableSpan]]:
    finished = spans.get_finished_spans()
    (turn,) = [s for s in finished if s.name == "gather_context"]
    children = [
        s for s in finished if s.parent is not None and s.parent.span_id == turn.context.span_id
    ]
    return turn, children


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_served_turn_span_names_its_principal(
    tmp_path: Path, status_url: str, spans: InMemorySpanExporter
) -> None:
    manifest = manifest_in(tmp_path, status_url)
    token = current_principal.set(Principal("team-a"))
    try:
        await turns(manifest, 1)
    finally:
        current_principal.reset(token)
        await manifest.aclose()
    turn, _ = by_name(spans)
    assert attrs(turn)["composer.principal"] == "team-a"


async def test_one_turn_span_with_one_child_per_provider_carrying_the_outcome(
    tmp_path: Path, status_url: str, spans: InMemorySpanExporter
) -> None:
    manifest = manifest_in(tmp_path, status_url)
    (report,) = await turns(manifest, 1)
    turn, children = by_name(spans)
    assert [attrs(c)["composer.provider.name"] for c in children] == [
        "rules",
        "runbooks",
        "team-memory",
        "status",
        "broken",
    ]
    assert [attrs(c)["composer.provider.outcome"] for c in children] == [
        o.outcome for o in report.outcomes
    ]
    assert [c.name for c in children] == [
        "composer.provide",
        "retrieval",
        "search_memory",
        "retrieval",
        "composer.provide",
    ]
    rules, runbooks, memory, status, broken = (attrs(c) for c in children)
    assert runbooks["gen_ai.operation.name"] == "retrieval"
    assert runbooks["gen_ai.data_source.id"] == "runbooks"
    assert status["gen_ai.data_source.id"] == "status"
    assert memory["gen_ai.operation.name"] == "search_memory"
    assert memory["gen_ai.memory.store.id"] == "team-memory"
    assert "gen_ai.operation.name" not in rules
    assert (rules["composer.provider.priority"], rules["composer.provider.tokens"]) == (9, 4)
    assert rules["composer.provider.type"] == "static"
    assert broken["error.type"] == "TemplateError"
    assert children[4].status.status_code.name == "ERROR"
    assert all(not a["composer.provider.cache_hit"] for a in (rules, runbooks, memory, status))

    turn_attrs = attrs(turn)
    assert turn_attrs["composer.turn.id"] == report.turn_id
    assert turn_attrs["composer.tokens_used"] == report.tokens_used
    assert turn_attrs["composer.budget"] == 200
    assert turn_attrs["gen_ai.conversation.id"]  # the branch id
    assert turn_attrs["composer.branch.name"] == "payments"
    assert turn_attrs["composer.principal"] == ""  # in process: no principal
    for child in children:  # within the turn, in the turn's trace
        assert child.context.trace_id == turn.context.trace_id
        assert turn.start_time is not None
        assert turn.end_time is not None
        assert child.start_time is not None
        assert child.end_time is not None
        assert turn.start_time <= child.start_time <= child.end_time <= turn.end_time
    await manifest.aclose()


class Wiki:
    """A third-party retrieval: a fixed page, and its query for traces."""

    async def provide(self, branch: Any, instruction: Any) -> str | None:
        return "The wiki says: roll back."

    def display_query(self, branch: Any, instruction: Any) -> str:
        return "wiki?q=deploy"


class WikiConfig(ProviderConfig):
    type: Literal["wiki"] = "wiki"


class TicketsConfig(ProviderConfig):
    type: Literal["tickets"] = "tickets"


async def test_a_third_party_type_declares_its_genai_operation(
    tmp_path: Path, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operation is the type's (``ProviderType.operation``), whatever it is called: the
    engine knows no type names."""
    monkeypatch.setenv(CAPTURE_CONTENT, "true")
    types = ProviderTypes(
        [
            ProviderType("wiki", WikiConfig, lambda c, x: Wiki(), operation="retrieval"),
            ProviderType("tickets", TicketsConfig, lambda c, x: Wiki(), operation="execute_tool"),
        ]
    )
    manifest = composer.load_manifest(
        write(
            tmp_path / "m.yaml",
            """\
            version: 1
            runtime: {traces: true}
            providers:
              - {name: wiki, type: wiki}
              - {name: tickets, type: tickets}
            """,
        ),
        types=types,
    )
    try:
        await turns(manifest, 1)
    finally:
        await manifest.aclose()
    _, children = by_name(spans)
    assert [c.name for c in children] == ["retrieval", "execute_tool"]
    wiki, tickets = (attrs(c) for c in children)
    assert wiki["gen_ai.operation.name"] == "retrieval"
    assert wiki["gen_ai.data_source.id"] == "wiki"
    assert wiki["gen_ai.retrieval.query.text"] == "wiki?q=deploy"
    assert json.loads(wiki["gen_ai.retrieval.documents"])[0]["content"].startswith("The wiki")
    assert tickets["gen_ai.operation.name"] == "execute_tool"
    assert not {"gen_ai.data_source.id", "gen_ai.memory.store.id"} & set(tickets)
    assert tickets["composer.provider.query"] == "wiki?q=deploy"
    assert tickets["composer.provider.block"].startswith("The wiki")


async def test_no_text_on_spans_unless_content_capture_is_on(
    tmp_path: Path,
    status_url: str,
    spans: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    content_keys = {
        "gen_ai.retrieval.query.text",
        "gen_ai.retrieval.documents",
        "gen_ai.memory.query.text",
        "gen_ai.memory.records",
        "composer.provider.block",
        "composer.provider.query",
    }
    manifest = manifest_in(tmp_path, status_url)
    await turns(manifest, 1)
    _, children = by_name(spans)
    assert not any(content_keys & set(attrs(c)) for c in children)
    await manifest.aclose()

    spans.clear()
    monkeypatch.setenv(CAPTURE_CONTENT, "SPAN_ONLY")
    manifest = composer.load_manifest(tmp_path / "m.yaml")  # the switch is read at load
    await turns(manifest, 1, text="how to deploy")
    _, children = by_name(spans)
    rules, runbooks, memory, status, _ = (attrs(c) for c in children)
    assert runbooks["gen_ai.retrieval.query.text"] == "how to deploy 0"
    (document,) = json.loads(runbooks["gen_ai.retrieval.documents"])
    assert document["id"] == "runbooks"
    assert "deploy undo" in document["content"]
    assert json.loads(memory["gen_ai.memory.records"]) == [
        {"content": "- the deploy of May failed"}
    ]
    assert "deploy" in memory["gen_ai.memory.query.text"]
    assert rules["composer.provider.block"] == "Answer in English.\n"
    assert "/search" in status["gen_ai.retrieval.query.text"]
    await manifest.aclose()


async def test_a_cached_answer_is_marked_a_cache_hit(
    tmp_path: Path, status_url: str, spans: InMemorySpanExporter
) -> None:
    manifest = manifest_in(tmp_path, status_url)
    branch = composer.Branch("sys\n")
    composer.attach(branch, manifest)
    await composer.prepare_turn(branch, "same question")
    spans.clear()
    await composer.prepare_turn(branch, "same question")
    _, children = by_name(spans)
    status = attrs(children[3])
    assert status["composer.provider.outcome"] == "cached"
    assert status["composer.provider.cache_hit"] is True
    await manifest.aclose()


async def test_spans_of_a_providers_own_calls_are_children_of_the_turn(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    """The turn span is current while providers run: what they trace nests under it."""
    from opentelemetry import trace

    seen: list[int] = []

    class Traced:
        async def provide(self, branch: object, instruction: object) -> str:
            seen.append(trace.get_current_span().get_span_context().span_id)
            return "text"

    manifest = composer.load_manifest(
        write(tmp_path / "m.yaml", "version: 1\nruntime: {traces: true}\nproviders: []\n")
    )
    registry = composer.build_registry(manifest)
    registry.register(Traced(), name="plugin")
    branch = composer.Branch("sys\n")
    branch._context_providers = registry
    await composer.prepare_turn(branch, "x")
    turn, _ = by_name(spans)
    assert seen == [turn.context.span_id]


async def test_without_traces_no_span_is_made(
    tmp_path: Path, status_url: str, spans: InMemorySpanExporter
) -> None:
    manifest = manifest_in(tmp_path, status_url, traces=False)
    await turns(manifest, 2)
    assert spans.get_finished_spans() == ()
    await manifest.aclose()


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_composer_and_a_turn_import_nothing_of_opentelemetry_or_prometheus(
    tmp_path: Path,
) -> None:
    """Telemetry that is off costs no import, whatever is installed."""
    manifest = write(
        tmp_path / "m.yaml",
        """\
        version: 1
        runtime: {report: {history: 2}, audit: {path: turns.jsonl}}
        providers: [{name: a, type: static, text: hi}]
        """,
    )
    out = run_python(
        f"""
        import asyncio, sys
        import composer
        before = sorted(m for m in sys.modules if m.split(".")[0] in ("opentelemetry", "prometheus_client", "watchfiles"))
        async def main():
            m = composer.load_manifest({str(manifest)!r})
            b = composer.Branch("sys\\n")
            composer.attach(b, m)
            await composer.prepare_turn(b, "x")
            await m.aclose()
        asyncio.run(main())
        after = sorted(m for m in sys.modules if m.split(".")[0] in ("opentelemetry", "prometheus_client", "watchfiles"))
        print(before, after)
        """
    )
    assert out.strip() == "[] []"


def test_without_the_extra_traces_on_is_a_warning_and_the_turn_runs(tmp_path: Path) -> None:
    manifest = write(
        tmp_path / "m.yaml",
        """\
        version: 1
        runtime: {traces: true, metrics: true}
        providers: [{name: a, type: static, text: hi}]
        """,
    )
    out = run_python(
        f"""
        import asyncio, logging, sys
        class NotInstalled:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("opentelemetry", "prometheus_client"):
                    raise ImportError(f"No module named {{name!r}}")
                return None
        sys.meta_path.insert(0, NotInstalled())
        logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(message)s")
        import composer
        async def main():
            m = composer.load_manifest({str(manifest)!r})
            b = composer.Branch("sys\\n")
            composer.attach(b, m)
            for _ in range(2):
                t = await composer.prepare_turn(b, "x")
            print("fired", t.report.fired)
            await m.aclose()
        asyncio.run(main())
        """
    )
    lines = out.splitlines()
    assert "fired [{'provider_name': 'a', 'tokens': 1}]" in lines
    assert (
        sum("runtime.traces is on but opentelemetry-api is not installed" in x for x in lines) == 1
    )
    assert (
        sum("runtime.metrics is on but prometheus-client is not installed" in x for x in lines) == 1
    )
