"""``on_failure: {notice: ...}``: a provider that fails or times out is not passed off as
healthy silence. Its notice is the block (counted and admitted like any), the outcome stays
``failed`` or ``timeout``, and the report lists it as degraded, as lionagi 0.36 does."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from localserver import serving

import composer

NOTICE = "The status service did not answer; do not assume there are no incidents."


class Slow(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(2)
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def slow_url() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    httpd.daemon_threads = True
    with serving(httpd):
        yield f"http://127.0.0.1:{httpd.server_address[1]}"


def manifest(tmp_path: Path, text: str) -> composer.Manifest:
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(text))
    return composer.load_manifest(path)


async def turn(loaded: composer.Manifest, text: str = "is prod up?") -> composer.PreparedTurn:
    branch = composer.Branch("S\n")
    registry = composer.attach(branch, loaded)
    try:
        return await composer.prepare_turn(branch, text)
    finally:
        await registry.aclose()


FAILING = """\
version: 1
providers:
  - name: status
    type: static
    text: "{{{{ instruction.context.ticket.title }}}}"
    {notice}
    {cache}
"""


async def test_a_failed_provider_answers_with_its_notice(tmp_path: Path) -> None:
    loaded = manifest(
        tmp_path, FAILING.format(notice=f"on_failure: {{notice: '{NOTICE}'}}", cache="")
    )
    prepared = await turn(loaded)
    report = prepared.report
    assert report is not None
    assert report.blocks == [NOTICE]
    assert report.fired == [{"provider_name": "status", "tokens": composer.count_tokens(NOTICE)}]
    assert report.failed == []  # it answered: the registry contained nothing
    (outcome,) = report.outcomes
    assert (outcome.outcome, outcome.error_type) == ("failed", "TemplateError")
    assert outcome.tokens == composer.count_tokens(NOTICE)
    assert report.degraded == [{"provider_name": "status", "reason": outcome.error}]
    assert prepared.guidance == "S\n" + NOTICE


async def test_without_a_notice_a_failure_leaves_no_block(tmp_path: Path) -> None:
    report = (await turn(manifest(tmp_path, FAILING.format(notice="", cache="")))).report
    assert report is not None
    assert (report.blocks, report.failed, report.degraded) == ([], ["status"], [])


async def test_a_timeout_answers_with_the_notice_and_says_timeout(
    tmp_path: Path, slow_url: str
) -> None:
    loaded = manifest(
        tmp_path,
        f"""\
        version: 1
        providers:
          - name: status
            type: http
            timeout_s: 0.2
            request: {{url: "{slow_url}/search"}}
            on_failure: {{notice: "{NOTICE}"}}
        """,
    )
    started = time.perf_counter()
    report = (await turn(loaded)).report
    assert time.perf_counter() - started < 1.5
    assert report is not None
    assert report.blocks == [NOTICE]
    assert report.outcomes[0].outcome == "timeout"
    await loaded.aclose()


async def test_a_notice_is_never_cached(tmp_path: Path) -> None:
    loaded = manifest(
        tmp_path,
        FAILING.format(notice=f"on_failure: {{notice: '{NOTICE}'}}", cache="cache: {ttl_s: 60}"),
    )
    first = (await turn(loaded)).report
    second = (await turn(loaded)).report
    assert first is not None
    assert second is not None
    assert [o.outcome for o in (*first.outcomes, *second.outcomes)] == ["failed", "failed"]
