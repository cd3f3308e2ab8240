"""Errors of a union field with mapping forms: one line naming the form the value means.

Pydantic tries every member of a union and reports each one's complaint; a manifest author
reads one line that names the form the value looks like and what it lacks, or the forms there
are. The forms are read from the models (a test type here has forms of its own), not named in
the code.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.errors import ManifestError
from composer.manifest import ManifestPath, ProviderConfig, StrictModel
from composer.manifest.loader import load_manifest
from composer.plugin import BuildContext, ProviderType

HEAD = "version: 1\nproviders:\n"


class LocalBackend(StrictModel):
    kind: Literal["local"]
    size: int = 10


class RemoteBackend(StrictModel):
    kind: Literal["remote"]
    url: str
    retries: int = 0


class FileTarget(StrictModel):
    path: ManifestPath
    mode: str = "a"


class UrlTarget(StrictModel):
    url: str
    timeout_s: float = 1.0


class SwitchConfig(ProviderConfig):
    """A type with a discriminated union and a union told apart by required keys."""

    type: Literal["switch"] = "switch"
    backend: Annotated[LocalBackend | RemoteBackend, Field(discriminator="kind")] = LocalBackend(
        kind="local"
    )
    target: FileTarget | UrlTarget | None = None


def _switch(config: SwitchConfig, context: BuildContext) -> Any:
    raise AssertionError("never built: these tests only load manifests")


switch_type = ProviderType("switch", SwitchConfig, _switch, "test type with union fields")


@pytest.fixture
def types() -> ProviderTypes:
    """static, the test type, and memory from wherever the installed catalog finds it."""
    return ProviderTypes([static_type, switch_type, ProviderTypes.installed().get("memory")])


def errors_of(write: Callable[..., Path], types: ProviderTypes, entry: str) -> list[str]:
    write("m.yaml", HEAD + entry)
    with pytest.raises(ManifestError) as caught:
        load_manifest("m.yaml", environ={}, types=types)
    return [str(e) for e in caught.value.errors]


def memory(source: str) -> str:
    return f"  - name: notes\n    type: memory\n    source: {source}\n"


FORMS = "{jsonl: path}, {sqlite: path, seed?, shared?}, {postgres: {dsn: ...}, seed?, shared?}"


def test_a_string_source_names_the_mapping_forms(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    assert errors_of(write, types, memory("notes.sqlite")) == [
        f"m.yaml:5:13: provider \"notes\": source: a string must be 'branch'; the mapping forms "
        f"are {FORMS}"
    ]


def test_a_source_mixing_two_forms_is_one_line_naming_both(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    """What an overlay used to make of sqlite in base and postgres in prod: five errors."""
    entry = memory("{sqlite: a.db, seed: s.jsonl, postgres: {dsn: x}}")
    assert errors_of(write, types, entry) == [
        'm.yaml:5:13: provider "notes": source: mixes the sqlite form {sqlite: path, seed?, '
        "shared?} and the postgres form {postgres: {dsn: ...}, seed?, shared?}; keep the keys "
        "of one"
    ]


def test_an_unknown_key_names_the_form_the_source_looks_like(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    assert errors_of(write, types, memory("{sqlite: a.db, sed: s.jsonl}")) == [
        'm.yaml:5:28: provider "notes": source: looks like the sqlite form {sqlite: path, seed?, '
        'shared?}, which has no key "sed" (did you mean "seed"?)'
    ]


def test_an_error_inside_the_form_is_that_forms_error_alone(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    assert errors_of(write, types, memory("{postgres: {schema: s}}")) == [
        'm.yaml:5:24: provider "notes": missing key "dsn" in source.postgres'
    ]
    entry = memory("{postgres: {dsn: x, sslmode: require}}")
    assert errors_of(write, types, entry) == [
        'm.yaml:5:33: provider "notes": unknown key "sslmode" in source.postgres; allowed keys: '
        "dsn, schema, pool_size, connect_timeout_s"
    ]


def test_a_mapping_of_no_form_lists_the_forms(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    assert errors_of(write, types, memory("{seed: s.jsonl}")) == [
        f'm.yaml:5:13: provider "notes": source: matches none of the forms {FORMS}'
    ]


def test_a_value_from_a_variable_is_not_shown(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("m.yaml", HEAD + memory("${SOURCE}"))
    with pytest.raises(ManifestError) as caught:
        load_manifest("m.yaml", environ={"SOURCE": "hunter2-notes.sqlite"}, types=types)
    assert "hunter2" not in str(caught.value)
    assert "source: a string must be 'branch'; the mapping forms are" in str(caught.value)


def test_forms_are_read_from_the_models(write: Callable[..., Path], types: ProviderTypes) -> None:
    entry = "  - name: s\n    type: switch\n    target: out.txt\n"
    assert errors_of(write, types, entry) == [
        'm.yaml:5:13: provider "s": target: must be a mapping; the mapping forms are '
        "{path: path, mode?}, {url: ..., timeout_s?}"
    ]
    entry = "  - name: s\n    type: switch\n    target: {url: u, mode: w}\n"
    assert errors_of(write, types, entry) == [
        'm.yaml:5:22: provider "s": target: looks like the url form {url: ..., timeout_s?}, '
        'which has no key "mode"'
    ]


def test_a_discriminated_form_is_named_by_its_literal(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    entry = "  - name: s\n    type: switch\n    backend: {kind: remote, size: 3}\n"
    assert errors_of(write, types, entry) == [
        'm.yaml:5:29: provider "s": backend: looks like the remote form {kind: remote, url: ..., '
        'retries?}, which has no key "size" and needs "url"'
    ]
    entry = "  - name: s\n    type: switch\n    backend: {kind: elsewhere}\n"
    assert errors_of(write, types, entry) == [
        'm.yaml:5:14: provider "s": backend: matches none of the forms {kind: local, size?}, '
        "{kind: remote, url: ..., retries?}"
    ]


def test_a_union_with_one_mapping_form_keeps_its_key_hints(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    """``writeback: bool | {...}``: a mapping is that form; no "must be true or false"."""
    entry = memory("{jsonl: m.jsonl}") + "    writeback: {tgs: [a]}\n"
    (message,) = errors_of(write, types, entry)
    assert (
        message
        == 'm.yaml:6:17: provider "notes": unknown key "tgs" in writeback (did you mean "tags"?)'
    )
