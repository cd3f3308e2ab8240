"""extends and overlays: deep merge of mappings, providers merged by name, origins per file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from builtin_providers.static import StaticConfig
from composer.catalog import ProviderTypes
from composer.errors import ManifestError
from composer.manifest import Manifest, Origin
from composer.manifest.loader import load_manifest

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
