"""One provider of each type, from one Manifest, gathered through prepare_turn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import composer
from builtin_providers.file_corpus import FileCorpusConfig
from builtin_providers.http import HttpConfig
from builtin_providers.memory import MemoryConfig
from builtin_providers.static import StaticConfig
from composer.build import ManifestRegistry, attach
from composer.manifest import Manifest

if TYPE_CHECKING:
    from providers.conftest import LocalServer

NAMES = ["rules", "runbooks", "memory", "status"]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "deploy.md").write_text("# Canary\n\nDeploys go to the canary first.\n")
    memory = tmp_path / "memory.jsonl"
    memory.write_text(json.dumps({"content": "Last deploy was rolled back", "tags": ["deploy"]}))
    return corpus, memory


def manifest(
    server: LocalServer, corpus: Path, memory: Path, path: str = "/search", **common: Any
) -> Manifest:
    return Manifest(
        version=1,
        budget=5000,
        providers=[
            StaticConfig(name="rules", text="Team {{ branch.name }}: be brief.\n", **common),
            FileCorpusConfig(name="runbooks", root=corpus, **common),
            MemoryConfig(
                name="memory", source={"jsonl": memory}, query={"tags": ["deploy"]}, **common
            ),
            HttpConfig(
                name="status",
                request={
                    "url": f"{server.url}{path}",
                    "params": {"q": "{{ instruction.text }}"},
                    "timeout_s": 0.3,
                },
                response={"template": "{% for r in json.results %}- {{ r.title }}\n{% endfor %}"},
                **common,
            ),
        ],
    )


@pytest.fixture
async def turn() -> AsyncIterator[Callable[..., Any]]:
    """prepare_turn on a new branch; registries and manifests are closed afterwards."""
    registries: list[ManifestRegistry] = []
    manifests: list[Manifest] = []

    async def run(m: Manifest, text: str) -> tuple[composer.Branch, composer.PreparedTurn]:
        branch = composer.Branch("You are helpful.\n", name="ops")
        registries.append(attach(branch, m))
        manifests.append(m)
        return branch, await composer.prepare_turn(branch, composer.Instruction(text))

    yield run
    for registry in registries:
        await registry.aclose()
    for m in manifests:
        await m.aclose()  # the shared connection pools


async def test_all_four_types_fire(
    server: LocalServer, files: tuple[Path, Path], turn: Any
) -> None:
    branch, prepared = await turn(manifest(server, *files), "canary deploy")
    report = prepared.report
    assert report.failed == []
    assert report.skipped == []
    assert [row["provider_name"] for row in report.fired] == NAMES
    assert [row["tokens"] for row in report.fired] == [
        composer.count_tokens(b) for b in report.blocks
    ]
    assert all(row["tokens"] > 0 for row in report.fired)
    assert report.blocks == [
        "Team ops: be brief.\n",
        "[deploy.md > Canary]\nDeploys go to the canary first.\n",
        "- Last deploy was rolled back",
        "- Result for canary deploy\n- Second\n",
    ]
    assert prepared.guidance == "You are helpful.\n" + "\n".join(report.blocks)
    assert server.requests[-1].query == {"q": ["canary deploy"]}
    assert branch._context_injection_slot is None


@pytest.mark.parametrize(
    "path",
    [
        "/status/500",
        "/reset",
        "/badjson",
        "/big",
        "/gzipbomb",
        "/slow",
        "/hang",
        "/redirect-other",
        "/status/429",
    ],
)
async def test_a_faulty_server_fails_only_its_provider(
    server: LocalServer, files: tuple[Path, Path], turn: Any, path: str
) -> None:
    _, prepared = await turn(manifest(server, *files, path=path), "canary deploy")
    report = prepared.report
    assert report.failed == ["status"]
    assert [row["provider_name"] for row in report.fired] == NAMES[:3]


async def test_when_false_leaves_no_row_for_any_type(
    server: LocalServer, files: tuple[Path, Path], turn: Any
) -> None:
    m = manifest(server, *files, when="'deploy' in instruction.text")
    _, quiet = await turn(m, "lunch plans")
    assert (quiet.report.fired, quiet.report.skipped, quiet.report.failed) == ([], [], [])
    assert server.requests == []
    _, loud = await turn(m, "deploy now")
    assert [row["provider_name"] for row in loud.report.fired] == NAMES


async def test_a_template_escape_fails_only_its_provider(
    server: LocalServer, files: tuple[Path, Path], turn: Any
) -> None:
    m = manifest(server, *files)
    escaping = StaticConfig(name="evil", text="{{ ''.__class__.__mro__[1].__subclasses__() }}")
    looping = StaticConfig(
        name="loop",
        text="{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    )
    m = Manifest(version=1, budget=5000, providers=[escaping, *m.providers, looping])
    _, prepared = await turn(m, "canary deploy")
    assert prepared.report.failed == ["evil", "loop"]
    assert [row["provider_name"] for row in prepared.report.fired] == NAMES
