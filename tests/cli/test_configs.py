"""The bundled ``configs/``: every environment validates, the schemas cannot drift, editors find
them, and the base manifest shows one provider of each built-in type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml
from repofiles import CONFIGS

from composer import load_manifest
from composer.cli import main
from composer.inspect.preview import PreviewDocument
from composer.inspect.schema import manifest_schema, questions_schema
from composer.inspect.schema import tests_schema as schema_of_test_files
from composer.manifest.loader import environments

if TYPE_CHECKING:
    from cli.conftest import StatusServer

ENVIRONMENTS = ["dev", "staging", "prod"]
BUILT_IN_TYPES = {"static", "file_corpus", "memory", "http"}
SCHEMA_LINE = "# yaml-language-server: $schema="


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_environment_validates(
    env: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if env != "dev":
        monkeypatch.setenv("STATUS_TOKEN", "a-token")
    assert main(["validate", str(CONFIGS), "--env", env]) == 0
    out, err = capsys.readouterr()
    assert err == ""  # no warning either
    assert out.startswith(f"{CONFIGS / (env + '.yaml')}: valid; 4 providers")


@pytest.mark.parametrize("env", ["staging", "prod"])
def test_staging_and_prod_require_the_status_token(
    env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(CONFIGS), "--env", env]) == 1
    assert 'environment variable "STATUS_TOKEN" is not set' in capsys.readouterr().err


def test_dev_needs_no_variable(capsys: pytest.CaptureFixture[str]) -> None:
    manifest = load_manifest(CONFIGS, env="dev", environ={})
    assert [c.name for c in manifest.providers if not c.enabled] == ["status"]


@pytest.mark.parametrize(
    ("schema_file", "overlay", "command"),
    [
        ("manifest.schema.json", False, "composer schema > configs/manifest.schema.json"),
        (
            "manifest.overlay.schema.json",
            True,
            "composer schema --overlay > configs/manifest.overlay.schema.json",
        ),
    ],
)
def test_the_schema_files_are_current(schema_file: str, overlay: bool, command: str) -> None:
    stored = json.loads((CONFIGS / schema_file).read_text(encoding="utf-8"))
    assert stored == manifest_schema(overlay=overlay), (
        f"configs/{schema_file} is out of date with the manifest models; regenerate it with "
        f"`{command}`"
    )


def test_the_question_file_schema_is_current() -> None:
    stored = json.loads((CONFIGS / "questions.schema.json").read_text(encoding="utf-8"))
    assert stored == questions_schema(), (
        "configs/questions.schema.json is out of date; regenerate it with "
        "`composer schema --questions > configs/questions.schema.json`"
    )


def test_the_test_file_schema_is_current() -> None:
    stored = json.loads((CONFIGS / "tests.schema.json").read_text(encoding="utf-8"))
    assert stored == schema_of_test_files(), (
        "configs/tests.schema.json is out of date; regenerate it with "
        "`composer schema --tests > configs/tests.schema.json`"
    )


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_manifest_names_its_schema_on_the_first_line(path: Path) -> None:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith(SCHEMA_LINE), f"{path.name}: first line is {first!r}"
    target = first.removeprefix(SCHEMA_LINE)
    assert (path.parent / target).is_file()
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if "tests" in data:
        assert target == "tests.schema.json"
        return
    if "questions" in data:
        assert target == "questions.schema.json"
        return
    overlay = "extends" in data
    assert target == ("manifest.overlay.schema.json" if overlay else "manifest.schema.json")


def test_the_configs_are_what_the_tests_expect() -> None:
    """The environments, and a test file and a question file beside them that are not."""
    assert environments(CONFIGS) == ["base", *sorted(ENVIRONMENTS)]
    assert sorted(p.stem for p in CONFIGS.glob("*.yaml")) == [
        "base",
        "dev",
        "prod",
        "questions",
        "staging",
        "tests",
    ]


def test_the_bundled_tests_pass(capsys: pytest.CaptureFixture[str]) -> None:
    """configs/tests.yaml holds for the bundled manifests (make test also runs it)."""
    assert main(["test", str(CONFIGS / "tests.yaml")]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines()[-1] == "6 passed"


def test_base_has_one_provider_of_each_built_in_type() -> None:
    manifest = load_manifest(CONFIGS / "base.yaml", environ={})
    types = [config.type for config in manifest.providers]
    assert sorted(types) == sorted(BUILT_IN_TYPES)


def test_the_sample_corpus_and_memory_are_there() -> None:
    assert len(list((CONFIGS / "corpus").rglob("*.md"))) >= 3
    lines = (CONFIGS / "memory.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines
    for line in lines:
        item = json.loads(line)
        assert item["content"]


@pytest.mark.parametrize(
    "instruction",
    [
        "The API returns 502 errors",
        "How do I fail over the database?",
        "Is there an outage on the status page?",
        "hello",
    ],
)
def test_dev_has_no_failing_provider(instruction: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["preview", str(CONFIGS), "--env", "dev", "--instruction", instruction]
    assert main([*args, "--strict", "--json"]) == 0
    out, err = capsys.readouterr()
    document = PreviewDocument.model_validate_json(out)
    assert document.report.failed == []
    assert err == ""
    assert {row.outcome for row in document.providers} <= {
        "fired",
        "over_max_tokens",
        "over_budget",
        "empty",
        "guarded",
        "disabled",
    }


def test_the_status_defaults_point_at_a_local_server(
    status_server: StatusServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # base.yaml alone (status enabled) with only STATUS_URL set: the token default is used.
    monkeypatch.setenv("STATUS_URL", status_server.url)
    args = ["preview", str(CONFIGS), "--env", "base", "--instruction", "status of the API?"]
    assert main([*args, "--json"]) == 0
    document = PreviewDocument.model_validate_json(capsys.readouterr().out)
    assert document.providers[3].outcome == "fired"
    [request] = status_server.requests
    assert request.headers["Authorization"] == "Bearer dev-token"
    assert request.query == {"q": ["status of the API?"]}
