"""extends and overlays: deep merge of mappings, providers merged by name, origins per file;
a union field that switches forms, ``!override`` and ``!reset`` replace instead."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest
import yaml
from manifest.conftest import probe_type
from manifest.test_manifest_union_errors import LocalBackend, RemoteBackend, switch_type

from builtin_providers.static import StaticConfig
from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.errors import ManifestError
from composer.manifest import Manifest, Origin
from composer.manifest.loader import load_manifest
from composer.manifest.yamlnodes import read_yaml

if TYPE_CHECKING:
    from manifest.conftest import ProbeConfig

BASE = """
version: 1
budget: 2000
providers:
  - name: house-rules
    type: static
    priority: 100
    text: "Team {{ branch.name }}: answer in English."
  - name: runbooks
    type: probe
    priority: 50
    max_tokens: 600
    items: [a, b]
  - name: status
    type: probe
    priority: 30
    request:
      url: "${STATUS_URL:-http://status.local}/search"
      headers: {Authorization: "Bearer ${STATUS_TOKEN:-none}", Accept: text/plain}
      timeout_s: 2
"""

PROD = """
extends: base.yaml
budget: 3000
providers:
  - name: status
    request: {url: "https://status.example.com/search"}
  - name: runbooks
    enabled: false
  - name: audit
    type: static
    text: audited
"""


@pytest.fixture
def prod(write: Callable[..., Path], types: ProviderTypes) -> Manifest:
    write("base.yaml", BASE)
    write("prod.yaml", PROD)
    return load_manifest("prod.yaml", environ={}, types=types)


def test_scalars_of_the_overlay_win(prod: Manifest) -> None:
    assert prod.budget == 3000
    assert prod.version == 1


def test_providers_keep_base_order_and_new_names_come_after(prod: Manifest) -> None:
    assert [p.name for p in prod.providers] == ["house-rules", "runbooks", "status", "audit"]


def test_an_overlay_entry_updates_its_base_entry_deeply(prod: Manifest) -> None:
    status = cast("ProbeConfig", prod.providers[2])  # ``type: probe``: the conftest's
    assert status.request is not None
    assert status.type == "probe"
    assert status.priority == 30
    assert status.request.url == "https://status.example.com/search"
    assert status.request.timeout_s == 2
    assert status.request.headers == {"Authorization": "Bearer none", "Accept": "text/plain"}


def test_enabled_false_switches_one_off_and_keeps_the_rest(prod: Manifest) -> None:
    runbooks = cast("ProbeConfig", prod.providers[1])
    assert runbooks.enabled is False
    assert (runbooks.max_tokens, runbooks.items) == (600, ["a", "b"])


def test_origins_name_the_file_that_set_each_final_value(prod: Manifest) -> None:
    assert prod.origin("budget") == Origin("prod.yaml", 2, 9, "3000")
    assert prod.origin("version") == Origin("base.yaml", 1, 10, "1")
    url = prod.origin("providers", "status", "request", "url")
    assert url == Origin("prod.yaml", 5, 20, "https://status.example.com/search")
    timeout = prod.origin("providers", "status", "request", "timeout_s")
    assert timeout is not None
    assert (timeout.path, timeout.line, timeout.column) == ("base.yaml", 19, 18)
    assert prod.origin("providers", "runbooks", "items", 1) == Origin("base.yaml", 12, 16, "b")
    audit = prod.origin("providers", "audit")
    assert audit is not None
    assert audit.path == "prod.yaml"
    assert prod.origin("providers", "nope") is None
    assert ("providers", "status", "request", "headers", "Accept") in prod.origins


def test_lists_other_than_providers_are_replaced_whole(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("base.yaml", BASE)
    write("m.yaml", "extends: base.yaml\nproviders:\n  - name: runbooks\n    items: [c]\n")
    manifest = load_manifest("m.yaml", environ={}, types=types)
    assert cast("ProbeConfig", manifest.providers[1]).items == ["c"]


def test_a_chain_of_three_files_applies_in_order(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("a.yaml", "version: 1\nbudget: 1\nproviders:\n  - {name: x, type: static, text: a}\n")
    write("b.yaml", "extends: a.yaml\nbudget: 2\nproviders:\n  - {name: x, text: b}\n")
    write("c.yaml", "extends: b.yaml\nproviders:\n  - {name: y, type: static, text: c}\n")
    manifest = load_manifest("c.yaml", environ={}, types=types)
    assert manifest.budget == 2
    x, y = manifest.providers
    assert isinstance(x, StaticConfig)
    assert isinstance(y, StaticConfig)
    assert [(x.name, x.text), (y.name, y.text)] == [("x", "b"), ("y", "c")]
    assert manifest.extends == "b.yaml"
    assert manifest.path == Path("c.yaml")


def test_extends_is_relative_to_the_file_not_the_working_directory(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("configs/shared/base.yaml", "version: 1\nbudget: 7\n")
    write("configs/dev.yaml", "extends: shared/base.yaml\n")
    assert load_manifest("configs/dev.yaml", environ={}, types=types).budget == 7


def test_a_retyped_entry_replaces_its_base_entry_in_place(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("base.yaml", BASE)
    write("m.yaml", "extends: base.yaml\nproviders:\n  - {name: runbooks, type: static, text: t}\n")
    manifest = load_manifest("m.yaml", environ={}, types=types)
    assert [p.type for p in manifest.providers] == ["static", "static", "probe"]
    assert manifest.providers[1].max_tokens is None


def test_an_overlay_may_switch_a_provider_back_on(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write(
        "base.yaml",
        "version: 1\nproviders:\n  - {name: a, type: static, text: x, enabled: false}\n",
    )
    write("m.yaml", "extends: base.yaml\nproviders:\n  - {name: a, enabled: true}\n")
    assert load_manifest("m.yaml", environ={}, types=types).providers[0].enabled is True


def test_the_same_name_twice_in_one_overlay_is_an_error(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("base.yaml", BASE)
    write(
        "m.yaml",
        "extends: base.yaml\nproviders:\n  - {name: status, priority: 1}\n"
        "  - {name: status, priority: 2}\n",
    )
    with pytest.raises(
        ManifestError, match=r'^m\.yaml:4:12: duplicate provider name "status" \(first at line 3\)'
    ):
        load_manifest("m.yaml", environ={}, types=types)


def test_a_base_may_itself_be_invalid_alone_when_the_overlay_completes_it(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("base.yaml", "providers:\n  - {name: a, type: static, text: x}\n")
    write("m.yaml", "extends: base.yaml\nversion: 1\n")
    assert load_manifest("m.yaml", environ={}, types=types).version == 1
    with pytest.raises(ManifestError, match=r'^base\.yaml:1:1: missing key "version"'):
        load_manifest("base.yaml", environ={}, types=types)


def test_a_renamed_entry_says_it_is_a_new_provider(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    """An overlay entry whose name is close to a base provider's adds a new provider; the
    error for its missing type says so, and names the provider it probably meant."""
    write("base.yaml", "version: 1\nproviders:\n  - {name: runbooks, type: static, text: hi}\n")
    write("prod.yaml", "extends: base.yaml\nproviders:\n  - {name: runbook, max_tokens: 5}\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest("prod.yaml", environ={}, types=types)
    assert str(caught.value) == (
        'prod.yaml:3:5: provider "runbook": missing key "type" (a new provider: an overlay '
        'updates one by its exact name; did you mean "runbooks"?); known types: probe, static'
    )


# -- replacing: a union field switching forms, !override and !reset


@pytest.fixture
def all_types() -> ProviderTypes:
    """The conftest's types, the union test type and memory (wherever the catalog finds it)."""
    return ProviderTypes(
        [static_type, probe_type, switch_type, ProviderTypes.installed().get("memory")]
    )


MEMORY_BASE = """
version: 1
providers:
  - name: notes
    type: memory
    source: {sqlite: notes.sqlite, seed: seed.jsonl}
    query: {text: "{{ instruction.text }}"}
"""


def test_an_overlay_switches_a_memory_source_from_sqlite_to_postgres_with_no_tag(
    write: Callable[..., Path], all_types: ProviderTypes
) -> None:
    write("base.yaml", MEMORY_BASE)
    write(
        "prod.yaml",
        "extends: base.yaml\nproviders:\n  - name: notes\n"
        "    source:\n      postgres: {dsn: postgresql://u@127.0.0.1/db}\n",
    )
    manifest = load_manifest("prod.yaml", environ={}, types=all_types)
    source = manifest.providers[0].source  # type: ignore[attr-defined]
    assert source.postgres.dsn == "postgresql://u@127.0.0.1/db"
    assert source.seed is None  # replaced whole: nothing of the sqlite form is left
    assert not hasattr(source, "sqlite")
    assert manifest.origin("providers", "notes", "source") == Origin("prod.yaml", 5, 7)
    assert manifest.origin("providers", "notes", "source", "sqlite") is None


async def test_the_switched_source_reads_the_postgres_store(
    write: Callable[..., Path], all_types: ProviderTypes, tmp_path: Path
) -> None:
    """End to end with a real PostgreSQL: prod's store answers, base's file is never made."""
    from memory.services import postgres_schema, postgres_server

    from composer.build import build_registry
    from composer.turn import Branch, Instruction

    write("base.yaml", MEMORY_BASE)
    write("seed.jsonl", '{"id": "r1", "content": "restart the primary first"}\n')
    with postgres_server() as dsn, postgres_schema(dsn) as schema:
        write(
            "prod.yaml",
            "extends: base.yaml\nproviders:\n  - name: notes\n    source:\n"
            f"      postgres: {{dsn: '{dsn}', schema: {schema}}}\n      seed: seed.jsonl\n",
        )
        manifest = load_manifest("prod.yaml", environ={}, types=all_types)
        try:
            provider = build_registry(manifest, types=all_types).managed[0]
            text = await provider.provide(Branch("s"), Instruction("restart primary"))
        finally:
            await manifest.aclose()
    assert text is not None
    assert "restart the primary first" in text
    assert not (tmp_path / "notes.sqlite").exists()


def test_an_overlay_of_optional_keys_only_updates_the_base_form(
    write: Callable[..., Path], all_types: ProviderTypes, tmp_path: Path
) -> None:
    write("base.yaml", MEMORY_BASE)
    write(
        "dev.yaml",
        "extends: base.yaml\nproviders:\n  - name: notes\n    source: {seed: dev.jsonl}\n",
    )
    source = load_manifest("dev.yaml", environ={}, types=all_types).providers[0].source  # type: ignore[attr-defined]
    assert (source.sqlite, source.seed) == (tmp_path / "notes.sqlite", tmp_path / "dev.jsonl")


def test_a_string_source_and_a_mapping_replace_each_other(
    write: Callable[..., Path], all_types: ProviderTypes, tmp_path: Path
) -> None:
    write("base.yaml", MEMORY_BASE)
    write("a.yaml", "extends: base.yaml\nproviders:\n  - {name: notes, source: branch}\n")
    write("b.yaml", "extends: a.yaml\nproviders:\n  - {name: notes, source: {jsonl: m.jsonl}}\n")
    assert load_manifest("a.yaml", environ={}, types=all_types).providers[0].source == "branch"  # type: ignore[attr-defined]
    source = load_manifest("b.yaml", environ={}, types=all_types).providers[0].source  # type: ignore[attr-defined]
    assert source.jsonl == tmp_path / "m.jsonl"


def test_a_discriminated_field_switches_by_its_literal_and_merges_within_one_form(
    write: Callable[..., Path], all_types: ProviderTypes
) -> None:
    write(
        "base.yaml",
        "version: 1\nproviders:\n  - {name: s, type: switch, backend: {kind: local, size: 3}}\n",
    )
    write(
        "remote.yaml",
        "extends: base.yaml\nproviders:\n  - {name: s, backend: {kind: remote, url: u}}\n",
    )
    write("bigger.yaml", "extends: base.yaml\nproviders:\n  - {name: s, backend: {size: 9}}\n")
    remote = load_manifest("remote.yaml", environ={}, types=all_types).providers[0]
    assert remote.backend == RemoteBackend(kind="remote", url="u")  # type: ignore[attr-defined]
    bigger = load_manifest("bigger.yaml", environ={}, types=all_types).providers[0]
    assert bigger.backend == LocalBackend(kind="local", size=9)  # type: ignore[attr-defined]


def test_override_replaces_a_mapping_inside_a_provider_merged_by_name(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("base.yaml", BASE)
    write(
        "m.yaml",
        "extends: base.yaml\nproviders:\n  - name: status\n"
        "    request: !override {url: https://other.example}\n",
    )
    status = cast("ProbeConfig", load_manifest("m.yaml", environ={}, types=types).providers[2])
    assert status.request is not None
    assert (status.request.url, status.request.timeout_s, status.request.headers) == (
        "https://other.example",
        1.0,
        {},
    )
    assert status.priority == 30  # the rest of the entry still merged


def test_override_at_the_top_level_replaces_a_mapping_and_the_provider_list(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("base.yaml", BASE + "runtime: {gather: concurrent, report: {history: 3}}\n")
    write(
        "m.yaml",
        "extends: base.yaml\nruntime: !override {timeout_s: 5}\n"
        "providers: !override\n  - {name: only, type: static, text: x}\n",
    )
    manifest = load_manifest("m.yaml", environ={}, types=types)
    assert [p.name for p in manifest.providers] == ["only"]
    assert (manifest.runtime.gather, manifest.runtime.report) == ("sequential", None)
    assert manifest.runtime.timeout_s == 5


def test_override_keeps_a_scalars_yaml_type(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("base.yaml", BASE)
    write("m.yaml", "extends: base.yaml\nbudget: !override 3000\n")
    assert load_manifest("m.yaml", environ={}, types=types).budget == 3000


@pytest.mark.parametrize(
    "value", ["!reset", "!reset null", "!reset 5", "!reset {a: 1}", "!reset [1]"]
)
def test_reset_removes_a_key_so_the_field_gets_its_default(
    write: Callable[..., Path], types: ProviderTypes, value: str
) -> None:
    write("base.yaml", BASE + "runtime: {gather: concurrent}\n")
    write(
        "m.yaml",
        f"extends: base.yaml\nbudget: {value}\nruntime: {value}\n"
        f"providers:\n  - name: runbooks\n    max_tokens: {value}\n",
    )
    manifest = load_manifest("m.yaml", environ={}, types=types)
    assert manifest.budget == 2000
    assert manifest.runtime.gather == "sequential"
    runbooks = cast("ProbeConfig", manifest.providers[1])
    assert runbooks.max_tokens is None
    assert runbooks.items == ["a", "b"]
    assert manifest.origin("providers", "runbooks", "max_tokens") is None


def test_reset_of_a_key_no_base_has_and_in_a_single_file_removes_it(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write(
        "one.yaml",
        "version: 1\nbudget: !reset 5\nproviders:\n  - {name: a, type: probe, count: !reset 4}\n",
    )
    manifest = load_manifest("one.yaml", environ={}, types=types)
    assert manifest.budget == 2000
    assert cast("ProbeConfig", manifest.providers[0]).count == 0
    write("m.yaml", "extends: one.yaml\nproviders:\n  - {name: b, type: probe, label: !reset x}\n")
    assert (
        cast("ProbeConfig", load_manifest("m.yaml", environ={}, types=types).providers[1]).label
        == ""
    )


def test_tags_apply_file_by_file_along_a_chain(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    """b replaces a's request and resets a's label; c merges into b's request, sets label."""
    write(
        "a.yaml",
        "version: 1\nproviders:\n  - name: p\n    type: probe\n    label: from-a\n"
        "    request: {url: a, timeout_s: 9, headers: {A: a}}\n",
    )
    write(
        "b.yaml",
        "extends: a.yaml\nproviders:\n  - name: p\n    label: !reset\n"
        "    request: !override {url: b}\n",
    )
    write(
        "c.yaml",
        "extends: b.yaml\nproviders:\n  - {name: p, label: from-c, request: {headers: {C: c}}}\n",
    )
    b = cast("ProbeConfig", load_manifest("b.yaml", environ={}, types=types).providers[0])
    assert b.label == ""
    c = cast("ProbeConfig", load_manifest("c.yaml", environ={}, types=types).providers[0])
    assert c.label == "from-c"
    assert c.request is not None
    assert (c.request.url, c.request.timeout_s, c.request.headers) == ("b", 1.0, {"C": "c"})


def test_resetting_a_providers_type_leaves_it_missing(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("base.yaml", BASE)
    write("m.yaml", "extends: base.yaml\nproviders:\n  - name: runbooks\n    type: !reset\n")
    with pytest.raises(
        ManifestError, match=r'^base\.yaml:8:5: provider "runbooks": missing key "type"'
    ):
        load_manifest("m.yaml", environ={}, types=types)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "version: 1\nbudget: !replace 5\n",
            "m.yaml:2:9: YAML tag '!replace' is not supported (only !!str, !override and !reset are)",
        ),
        (
            "version: 1\nproviders:\n  - !override {name: a, type: static, text: x}\n",
            'm.yaml:3:5: the !override tag marks the value of a key ("key: !override ..."), not a '
            "list item or the whole file",
        ),
        (
            "!reset\nversion: 1\n",
            'm.yaml:1:1: the !reset tag marks the value of a key ("key: !reset ..."), not a list '
            "item or the whole file",
        ),
    ],
    ids=["unknown-tag", "list-item", "whole-file"],
)
def test_a_tag_that_is_unknown_or_out_of_place_is_a_located_error(
    write: Callable[..., Path], types: ProviderTypes, text: str, expected: str
) -> None:
    write("m.yaml", text)
    with pytest.raises(ManifestError) as caught:
        load_manifest("m.yaml", environ={}, types=types)
    assert expected in str(caught.value).splitlines()


def test_files_other_than_manifests_refuse_the_overlay_tags(tmp_path: Path) -> None:
    """A tests or principals file is no overlay; and PyYAML's safe_load learns no tag."""
    path = tmp_path / "tests.yaml"
    path.write_text("tests: !reset\n", encoding="utf-8")
    _, errors = read_yaml("tests.yaml", path)
    assert [str(e) for e in errors] == [
        "tests.yaml:1:8: YAML tag '!reset' is not supported (only !!str is)"
    ]
    with pytest.raises(yaml.constructor.ConstructorError):
        yaml.safe_load("a: !override 1\n")
