"""``composer schema``: the JSON Schema editors use, every installed type on ``type``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, NoReturn

import pytest
import yaml
from repofiles import CONFIGS

from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.cli import main
from composer.inspect.schema import manifest_schema, questions_schema
from composer.inspect.schema import tests_schema as schema_of_test_files
from composer.manifest import ProviderConfig
from composer.plugin import BuildContext, ProviderType


class OtherConfig(ProviderConfig):
    type: Literal["other"] = "other"
    depth: int = 1


def never_built(config: ProviderConfig, context: BuildContext) -> NoReturn:
    raise AssertionError("the schema tests only describe the type, never build it")


other_type = ProviderType("other", OtherConfig, never_built)


def walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def test_schema_prints_a_json_schema_of_the_installed_types(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == "composer manifest"
    assert schema["required"] == ["version"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"version", "budget", "extends", "providers", "runtime"}
    installed = ProviderTypes.installed()
    for ptype in installed:
        assert ptype.config.__name__ in schema["$defs"]
    assert "StaticConfig" in schema["$defs"]


def test_types_are_a_union_discriminated_on_type() -> None:
    schema = manifest_schema(ProviderTypes([static_type, other_type]))
    items = schema["properties"]["providers"]["items"]
    assert items["discriminator"]["propertyName"] == "type"
    assert set(items["discriminator"]["mapping"]) == {"static", "other"}
    assert {ref["$ref"] for ref in items["oneOf"]} == {
        "#/$defs/StaticConfig",
        "#/$defs/OtherConfig",
    }
    static = schema["$defs"]["StaticConfig"]
    assert static["additionalProperties"] is False
    assert "text" in static["required"]


def test_priority_says_higher_is_admitted_first() -> None:
    schema = manifest_schema(ProviderTypes([static_type]))
    priority = schema["$defs"]["StaticConfig"]["properties"]["priority"]
    assert "HIGHER numbers are admitted first" in priority["description"]
    max_tokens = schema["$defs"]["StaticConfig"]["properties"]["max_tokens"]
    assert "0 or null means no cap" in max_tokens["description"]


def test_the_overlay_schema_requires_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--overlay"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "composer manifest (overlay)"
    assert not any(isinstance(node, dict) and "required" in node for node in walk(schema))
    assert not any(isinstance(node, dict) and "oneOf" in node for node in walk(schema))


def test_a_single_type_is_not_wrapped_in_a_union() -> None:
    schema = manifest_schema(ProviderTypes([static_type]))
    assert schema["properties"]["providers"]["items"] == {"$ref": "#/$defs/StaticConfig"}


def test_each_schema_has_a_stable_id(capsys: pytest.CaptureFixture[str]) -> None:
    """Editors and other schemas refer to them by $id; it does not change with the types."""
    ids = []
    for args in (
        ["schema"],
        ["schema", "--overlay"],
        ["schema", "--tests"],
        ["schema", "--questions"],
    ):
        assert main(args) == 0
        ids.append(json.loads(capsys.readouterr().out)["$id"])
    assert ids == [
        "urn:context-composer:schema:manifest:1",
        "urn:context-composer:schema:manifest-overlay:1",
        "urn:context-composer:schema:tests:1",
        "urn:context-composer:schema:questions:1",
    ]
    assert manifest_schema(ProviderTypes([static_type]))["$id"] == ids[0]


def test_write_puts_every_schema_in_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "editor" / "schemas"
    assert main(["schema", "--write", str(target)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"wrote {target / 'manifest.schema.json'}: a complete manifest",
        f"wrote {target / 'manifest.overlay.schema.json'}: "
        "a manifest that extends another (nothing required)",
        f"wrote {target / 'tests.schema.json'}: a composer test file",
        f"wrote {target / 'questions.schema.json'}: a composer eval file of labelled questions",
    ]
    assert json.loads((target / "manifest.schema.json").read_text()) == manifest_schema()
    overlay = json.loads((target / "manifest.overlay.schema.json").read_text())
    assert overlay == manifest_schema(overlay=True)
    assert json.loads((target / "tests.schema.json").read_text())["title"] == "composer tests"
    questions = json.loads((target / "questions.schema.json").read_text())
    assert questions["title"] == "composer questions"


def test_the_test_file_schema_accepts_the_bundled_tests_and_catches_mistakes() -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema checks the schema itself")
    validator = jsonschema.Draft202012Validator(schema_of_test_files())
    bundled = yaml.safe_load((CONFIGS / "tests.yaml").read_text())
    assert list(validator.iter_errors(bundled)) == []
    wrong = {"tests": [{"name": "x", "instruction": "y", "expect": {"budget": {"used": "~5"}}}]}
    assert list(validator.iter_errors(wrong)) != []


def test_the_question_file_schema_accepts_the_bundled_questions_and_catches_mistakes() -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema checks the schema itself")
    validator = jsonschema.Draft202012Validator(questions_schema())
    bundled = yaml.safe_load((CONFIGS / "questions.yaml").read_text(encoding="utf-8"))
    assert list(validator.iter_errors(bundled)) == []
    wrong = {"questions": [{"instruction": "x", "relevant": {"runbooks": 3}}]}
    assert list(validator.iter_errors(wrong)) != []
