"""``composer schema``: the JSON Schema editors use, every installed type on ``type``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal, NoReturn

import pytest

from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.cli import main
from composer.cli.schema import manifest_schema
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
