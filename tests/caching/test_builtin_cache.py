"""Built-in types key their cache on what they would send: the rendered query or request.

Two turns whose instructions differ but render the same query are one search; a preview of a
manifest with the runtime options shows the registry's own outcome for each provider.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from localserver import JsonAnswer, serving_json

import composer
from composer.cli import main


@pytest.fixture
def server() -> Iterator[str]:
    with serving_json() as url:
        yield url


def manifest(tmp_path: Path, url: str) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Deploy\n\nHow to deploy safely.\n")
    (tmp_path / "memory.jsonl").write_text('{"content": "deploy on tuesdays"}\n')
    path = tmp_path / "m.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            providers:
              - name: docs
                type: file_corpus
                root: docs
                query: "{{{{ instruction.text | lower }}}}"
                cache: {{ttl_s: 60}}
              - name: notes
                type: memory
                source: {{jsonl: memory.jsonl}}
                query: {{text: "{{{{ instruction.text | lower }}}}"}}
                cache: {{ttl_s: 60}}
              - name: status
                type: http
                request:
                  url: "{url}/search"
                  params: {{q: "{{{{ instruction.text | lower }}}}"}}
                cache: {{ttl_s: 60}}
            """
        )
    )
    return path


async def turn(manifest: composer.Manifest, text: str) -> dict[str, str]:
    branch = composer.Branch("sys\n")
    registry = composer.attach(branch, manifest)
    prepared = await composer.prepare_turn(branch, text)
    await registry.aclose()
    assert prepared.report is not None
    return {o.name: o.outcome for o in prepared.report.outcomes}


async def test_the_same_request_is_served_from_the_cache(tmp_path: Path, server: str) -> None:
    loaded = composer.load_manifest(manifest(tmp_path, server))
    assert await turn(loaded, "deploy") == {"docs": "fired", "notes": "fired", "status": "fired"}
    assert await turn(loaded, "deploy") == {
        "docs": "cached",
        "notes": "cached",
        "status": "cached",
    }
    assert JsonAnswer.paths == ["/search?q=deploy"]
    await turn(loaded, "rollback")
    assert JsonAnswer.paths == ["/search?q=deploy", "/search?q=rollback"]
    await loaded.aclose()


async def test_what_the_templates_read_is_in_the_key_unless_cache_key_narrows_it(
    tmp_path: Path, server: str
) -> None:
    """The templates read ``instruction.text`` itself, so "DEPLOY" is not "deploy" although
    both render the same query; a ``cache.key`` that says only the lower-cased text matters
    makes them one entry."""
    path = manifest(tmp_path, server)
    loaded = composer.load_manifest(path)
    assert await turn(loaded, "DEPLOY") == {"docs": "fired", "notes": "fired", "status": "fired"}
    assert await turn(loaded, "deploy") == {"docs": "fired", "notes": "fired", "status": "fired"}
    await loaded.aclose()
    narrowed = path.read_text().replace(
        "cache: {ttl_s: 60}", "cache: {ttl_s: 60, key: '{{ instruction.text | lower }}'}"
    )
    path.write_text(narrowed)
    loaded = composer.load_manifest(path)
    assert await turn(loaded, "DEPLOY") == {"docs": "fired", "notes": "fired", "status": "fired"}
    assert await turn(loaded, "deploy") == {
        "docs": "cached",
        "notes": "cached",
        "status": "cached",
    }
    await loaded.aclose()


def test_preview_shows_the_registrys_outcomes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            version: 1
            runtime: {gather: concurrent}
            providers:
              - {name: quick, type: static, text: "ok"}
              - {name: quiet, type: static, text: "no", when: "'x' in instruction.text"}
            """
        )
    )
    assert main(["preview", str(path), "--instruction", "hello", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = {row["name"]: row["outcome"] for row in document["providers"]}
    assert rows == {"quick": "fired", "quiet": "guarded"}
