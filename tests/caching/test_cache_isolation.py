"""A cached block is served only where every input it depends on is the same.

The rendered request is not all of it: an ``http`` provider's ``response.template`` that
filters by ``branch.metadata.team``, a corpus template that greets ``branch.metadata.user``,
the principal a server authenticated, and the provider's own configuration (a prod and a
staging replica of one manifest file differ only in a variable) all change the answer.
"""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from localserver import JsonAnswer, serving_json

import composer
from composer.caching import key_scope
from composer.principal import Principal, current_principal


@pytest.fixture
def server() -> Iterator[str]:
    JsonAnswer.ANSWER = {
        "results": [
            {"team": "a", "title": "rotate the payroll password (team a only)"},
            {"team": "b", "title": "b's own incident"},
        ]
    }
    try:
        with serving_json() as url:
            yield url
    finally:
        JsonAnswer.ANSWER = {"results": [{"title": "all green"}]}


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "a.md").write_text("# Deploy\n\nHow to deploy safely.\n")
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def http_manifest(tmp_path: Path, url: str, extra: str = "") -> Path:
    return write(
        tmp_path,
        f"""\
        version: 1
        {extra}
        providers:
          - name: status
            type: http
            request: {{url: "{url}/search", params: {{q: "{{{{ instruction.text }}}}"}}}}
            response:
              template: >-
                {{% for r in json.results if r.team == branch.metadata.team %}}{{{{ r.title }}}}{{% endfor %}}
            cache: {{ttl_s: 60}}
        """,
    )


async def block(manifest: composer.Manifest, metadata: dict[str, Any], text: str = "q") -> Any:
    branch = composer.Branch("sys\n", metadata=metadata)
    registry = composer.attach(branch, manifest)
    try:
        prepared = await composer.prepare_turn(branch, text)
    finally:
        await registry.aclose()
    assert prepared.report is not None
    (outcome,) = prepared.report.outcomes
    return prepared.report.blocks, outcome.outcome


async def test_a_response_template_reading_metadata_keys_the_cache(
    tmp_path: Path, server: str
) -> None:
    manifest = composer.load_manifest(http_manifest(tmp_path, server))
    try:
        assert await block(manifest, {"team": "a"}) == (
            ["rotate the payroll password (team a only)"],
            "fired",
        )
        assert await block(manifest, {"team": "b"}) == (["b's own incident"], "fired")
        assert await block(manifest, {"team": "a"}) == (
            ["rotate the payroll password (team a only)"],
            "cached",
        )
        assert await block(manifest, {"team": "b", "other": 1}) == (["b's own incident"], "cached")
    finally:
        await manifest.aclose()
    assert len(JsonAnswer.paths) == 2


async def test_a_corpus_template_reading_the_user_keys_the_cache(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        version: 1
        providers:
          - name: docs
            type: file_corpus
            root: docs
            query: "{{ instruction.text }}"
            template: "For {{ branch.metadata.user }}: {% for h in hits %}{{ h.text }}{% endfor %}"
            cache: {ttl_s: 60}
        """,
    )
    manifest = composer.load_manifest(path)
    try:
        first = await block(manifest, {"user": "alice"}, "deploy")
        second = await block(manifest, {"user": "mallory"}, "deploy")
    finally:
        await manifest.aclose()
    assert first[0][0].startswith("For alice:")
    assert first[1] == "fired"
    assert second[0][0].startswith("For mallory:")
    assert second[1] == "fired"


async def test_two_principals_never_share_a_cached_block(tmp_path: Path, server: str) -> None:
    """Even with the same metadata: nothing derived from one principal's turn serves another."""
    manifest = composer.load_manifest(http_manifest(tmp_path, server))
    try:
        token = current_principal.set(Principal("team-a"))
        try:
            assert (await block(manifest, {"team": "a"}))[1] == "fired"
            assert (await block(manifest, {"team": "a"}))[1] == "cached"
        finally:
            current_principal.reset(token)
        token = current_principal.set(Principal("team-b"))
        try:
            assert (await block(manifest, {"team": "a"}))[1] == "fired"
        finally:
            current_principal.reset(token)
    finally:
        await manifest.aclose()


def test_the_scope_digest_follows_the_configuration_and_its_variables(
    tmp_path: Path, server: str
) -> None:
    """A variable's value is part of the configuration: prod and staging of one file differ."""
    path = http_manifest(tmp_path, server)
    text = path.read_text().replace(f"{server}/search", "${STATUS_URL}/search")
    path.write_text(text)
    prod = composer.load_manifest(path, environ={"STATUS_URL": server})
    staging = composer.load_manifest(path, environ={"STATUS_URL": server + "/staging"})
    again = composer.load_manifest(path, environ={"STATUS_URL": server})
    digests = [key_scope(m.providers[0], m.path).digest for m in (prod, staging, again)]
    assert digests[0] != digests[1]
    assert digests[0] == digests[2]
    scope = key_scope(prod.providers[0], prod.path)
    assert ("branch", "metadata", "team") in scope.reads
    assert ("instruction", "text") in scope.reads
    for hidden in (server, "staging"):
        assert hidden not in repr(scope)


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    import redis

    name = f"composer-test:{uuid.uuid4().hex}:"
    yield name
    client = redis.Redis.from_url(redis_url)
    try:
        for key in client.scan_iter(match=f"{name}*"):
            client.delete(key)
    finally:
        client.close()


async def test_in_redis_two_environments_never_share_an_entry(
    tmp_path: Path, server: str, redis_url: str, redis_prefix: str
) -> None:
    runtime = f'runtime: {{cache: {{redis: {{url: "{redis_url}", prefix: "{redis_prefix}"}}}}}}'
    path = http_manifest(tmp_path, server, runtime)
    path.write_text(path.read_text().replace(f"{server}/search", "${STATUS_URL}/search"))
    prod = composer.load_manifest(path, environ={"STATUS_URL": server})
    staging = composer.load_manifest(path, environ={"STATUS_URL": server + "/staging"})
    replica = composer.load_manifest(path, environ={"STATUS_URL": server})
    try:
        assert (await block(prod, {"team": "a"}))[1] == "fired"
        assert (await block(staging, {"team": "a"}))[1] == "fired"  # not prod's entry
        assert (await block(replica, {"team": "a"}))[1] == "cached"  # prod's, as it should
        assert (await block(replica, {"team": "b"}))[1] == "fired"  # another team's key
    finally:
        for manifest in (prod, staging, replica):
            await manifest.aclose()
    assert JsonAnswer.paths == ["/search?q=q", "/staging/search?q=q", "/search?q=q"]
