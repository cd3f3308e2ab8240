"""How YAML values become manifest values: YAML 1.2 core scalars, text kept, paths per file."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from composer.catalog import ProviderTypes
from composer.errors import ManifestError
from composer.manifest.loader import load_manifest

if TYPE_CHECKING:
    from manifest.conftest import ProbeConfig

PROBE = "version: 1\nproviders:\n  - name: p\n    type: probe\n"


def probe(
    write: Callable[..., Path], types: ProviderTypes, body: str, name: str = "m.yaml"
) -> ProbeConfig:
    write(name, PROBE + body)
    # a ``type: probe`` entry validates to the conftest's ProbeConfig
    return cast("ProbeConfig", load_manifest(name, environ={}, types=types).providers[0])


def test_only_true_and_false_are_booleans(write: Callable[..., Path], types: ProviderTypes) -> None:
    config = probe(
        write,
        types,
        "    params: {country: no, a: yes, b: on, c: off, d: y, e: true, f: False, g: TRUE}\n",
    )
    assert config.params == {
        "country": "no",
        "a": "yes",
        "b": "on",
        "c": "off",
        "d": "y",
        "e": True,
        "f": False,
        "g": True,
    }


def test_numbers_keep_their_text_where_a_string_is_expected(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    config = probe(write, types, "    label: 1.10\n    items: [007, 0x1F, 1e3, .5, -0]\n")
    assert config.label == "1.10"
    assert config.items == ["007", "0x1F", "1e3", ".5", "-0"]


def test_core_numbers_are_numbers_where_data_is_free(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    config = probe(
        write, types, "    params: {a: 10, b: 0o17, c: 0x1F, d: 1.5, e: .inf, f: -.Inf, g: .nan}\n"
    )
    params = config.params
    assert (params["a"], params["b"], params["c"], params["d"]) == (10, 15, 31, 1.5)
    assert params["e"] == math.inf
    assert params["f"] == -math.inf
    assert math.isnan(params["g"])
    assert type(params["a"]).__mro__[1] is int


def test_no_timestamps_no_sexagesimal_no_yaml11_octal(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    config = probe(
        write,
        types,
        "    params: {date: 2024-01-01, time: 12:30, octal: 0755, plus: +12, null: ~}\n",
    )
    assert config.params["date"] == "2024-01-01"
    assert config.params["time"] == "12:30"
    assert config.params["octal"] == 755  # YAML 1.2: a decimal with a leading zero
    assert config.params["plus"] == 12
    assert config.params["null"] is None


def test_quoted_and_tagged_scalars_are_strings(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    config = probe(write, types, "    params: {a: '10', b: \"true\", c: !!str 3, d: ''}\n")
    assert config.params == {"a": "10", "b": "true", "c": "3", "d": ""}


def test_numbers_convert_for_numeric_fields_as_written(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    config = probe(write, types, "    count: 3\n    priority: -2\n    max_tokens: 0x10\n")
    assert (config.count, config.priority, config.max_tokens) == (3, -2, 16)


def test_block_scalars_keep_their_text(write: Callable[..., Path], types: ProviderTypes) -> None:
    config = probe(write, types, "    label: |\n      one\n        two\n")
    assert config.label == "one\n  two\n"


def test_a_relative_path_is_relative_to_the_file_that_holds_it(
    write: Callable[..., Path], types: ProviderTypes, tmp_path: Path
) -> None:
    write("team/base.yaml", PROBE + "    root: corpus\n")
    write("m.yaml", "extends: team/base.yaml\nbudget: 10\n")
    config = cast("ProbeConfig", load_manifest("m.yaml", environ={}, types=types).providers[0])
    assert config.root == tmp_path / "team" / "corpus"


def test_an_overlay_path_is_relative_to_the_overlay(
    write: Callable[..., Path], types: ProviderTypes, tmp_path: Path
) -> None:
    write("team/base.yaml", PROBE + "    root: corpus\n")
    write("env/prod.yaml", "extends: ../team/base.yaml\nproviders:\n  - name: p\n    root: data\n")
    environ = {"COMPOSER_EXTENDS_ROOTS": str(tmp_path / "team")}  # a sibling folder: allowed
    config = cast(
        "ProbeConfig", load_manifest("env/prod.yaml", environ=environ, types=types).providers[0]
    )
    assert config.root == tmp_path / "env" / "data"


def test_an_absolute_path_stays_absolute(
    write: Callable[..., Path], types: ProviderTypes, tmp_path: Path
) -> None:
    config = probe(write, types, f"    root: {tmp_path / 'abs'}\n")
    assert config.root == tmp_path / "abs"


def test_a_huge_integer_is_an_error_not_a_crash(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    with pytest.raises(ManifestError, match=r"^m\.yaml:5:12: number is too long"):
        probe(write, types, "    count: " + "9" * 5000 + "\n")


def test_a_byte_order_mark_is_accepted(write: Callable[..., Path], types: ProviderTypes) -> None:
    write("m.yaml", "\ufeffversion: 1\n".encode())
    assert load_manifest("m.yaml", environ={}, types=types).version == 1


def test_anchors_without_aliases_are_harmless(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    config = probe(write, types, "    label: &x hello\n")
    assert config.label == "hello"


def test_a_merge_key_is_one_error_not_a_merge(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    """One error at the ``<<``; a key given only inside it is not reported missing too."""
    write("m.yaml", "version: 1\nproviders:\n  - <<: {name: a}\n    type: static\n    text: hi\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest("m.yaml", environ={}, types=types)
    assert str(caught.value) == (
        "m.yaml:3:5: merge keys (<<) are not supported in a manifest; write the keys out, "
        "or share settings with extends"
    )


def test_a_template_error_in_a_union_field_is_said_once(write: Callable[..., Path]) -> None:
    """``params`` values are a template or a list of them: a syntax error is not also
    "must be a list"."""
    write(
        "m.yaml",
        "version: 1\nproviders:\n  - name: s\n    type: http\n"
        '    request: {url: "http://x.com", params: {q: "{{ instruction.text "}}\n',
    )
    with pytest.raises(ManifestError) as caught:
        load_manifest("m.yaml", environ={})  # the installed types: http among them
    assert [e.message for e in caught.value.errors] == [
        'provider "s": request.params.q: template syntax error: unexpected end of template, '
        "expected 'end of print statement'."
    ]
