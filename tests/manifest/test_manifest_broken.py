"""A table of broken manifests: each must fail with a ManifestError at the exact place.

Every case names the file, line and column a user would jump to and a fragment of the
message that says what is wrong. ``str(error)`` starts with the path as given (``m.yaml``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from builtin_providers.static import StaticConfig
from composer.catalog import ProviderTypes
from composer.errors import ManifestError
from composer.manifest.loader import MAX_BYTES, MAX_DEPTH, load_manifest

HEAD = "version: 1\nproviders:\n"


def static(body: str, name: str = "a") -> str:
    """A manifest whose one static provider is named ``name`` and ends with ``body`` (line 5+)."""
    return HEAD + f"  - name: {name}\n    type: static\n" + body


LAUGHS = "version: 1\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10)
)

# (id, files, expected first matching line as a regex anchored at the line start)
CASES: list[tuple[str, dict[str, str | bytes], str]] = [
    # -- YAML itself
    ("unclosed-flow", {"m.yaml": "version: 1\nproviders: [\n"}, r"m\.yaml:3:1: YAML syntax error"),
    (
        "tab-indent",
        {"m.yaml": "version: 1\nproviders:\n\t- name: a\n"},
        r"m\.yaml:3:1: check the indentation of line 3: it is indented with a tab; YAML indents "
        "with spaces only$",
    ),
    (
        "bad-mapping",
        {"m.yaml": "version: 1\nbudget: 1: 2\n"},
        r"m\.yaml:2:10: YAML syntax error: mapping values",
    ),
    (
        "two-documents",
        {"m.yaml": "version: 1\n---\nversion: 1\n"},
        r"m\.yaml:2:1: YAML syntax error: .*single document",
    ),
    ("empty-file", {"m.yaml": ""}, r"m\.yaml:1:1: empty manifest"),
    ("only-comments", {"m.yaml": "# nothing here\n"}, r"m\.yaml:1:1: empty manifest"),
    (
        "list-at-top",
        {"m.yaml": "- version: 1\n"},
        r"m\.yaml:1:1: the top level must be a mapping .*not a list",
    ),
    (
        "scalar-at-top",
        {"m.yaml": "hello\n"},
        r"m\.yaml:1:1: the top level must be a mapping .*not a single value",
    ),
    (
        "binary-garbage",
        {"m.yaml": b"version: 1\nab\xff\xfe\x00\x01garbage"},
        r"m\.yaml:2:3: not UTF-8 text \(byte 0xff\)",
    ),
    (
        "nul-character",
        {"m.yaml": "version: 1\nbudget: 1\x00\n"},
        r"m\.yaml:2:10: control character U\+0000",
    ),
    (
        "too-large",
        {"m.yaml": "version: 1\n" + "#" * MAX_BYTES + "\n"},
        r"m\.yaml:1:1: manifest is larger than 1048576 bytes",
    ),
    (
        "too-deep",
        {"m.yaml": "version: 1\nx: " + "[" * 100 + "]" * 100 + "\n"},
        rf"m\.yaml:2:{4 + MAX_DEPTH - 1}: nesting is deeper than {MAX_DEPTH}",
    ),
    ("billion-laughs", {"m.yaml": LAUGHS}, r"m\.yaml:3:10: aliases \(\*name\) are not allowed"),
    ("self-alias", {"m.yaml": "version: 1\na: &a [*a]\n"}, r"m\.yaml:2:8: aliases"),
    (
        "python-tag",
        {"m.yaml": static("    text: !!python/object/apply:os.system [echo]\n")},
        r"m\.yaml:5:11: YAML tag .*python/object/apply:os\.system.* is not supported",
    ),
    (
        "non-scalar-key",
        {"m.yaml": "version: 1\n? [a, b]\n: 1\n"},
        r"m\.yaml:2:3: a key must be a plain name",
    ),
    (
        "duplicate-top-key",
        {"m.yaml": "version: 1\nbudget: 10\nbudget: 20\n"},
        r'm\.yaml:3:1: duplicate key "budget" \(first at line 2\)',
    ),
    (
        "duplicate-provider-key",
        {"m.yaml": static("    text: one\n    text: two\n")},
        r'm\.yaml:6:5: duplicate key "text" \(first at line 5\)',
    ),
    # -- the manifest's own keys
    ("version-2", {"m.yaml": "version: 2\n"}, r"m\.yaml:1:10: version: must be 1$"),
    ("version-missing", {"m.yaml": "budget: 10\n"}, r'm\.yaml:1:1: missing key "version"'),
    (
        "budget-word",
        {"m.yaml": "version: 1\nbudget: lots\n"},
        r"m\.yaml:2:9: budget: must be an integer$",
    ),
    (
        "budget-negative",
        {"m.yaml": "version: 1\nbudget: -5\n"},
        r"m\.yaml:2:9: budget: must be >= 0$",
    ),
    (
        "budget-fraction",
        {"m.yaml": "version: 1\nbudget: 1.5\n"},
        r"m\.yaml:2:9: budget: must be a whole number$",
    ),
    (
        "unknown-top-key",
        {"m.yaml": "version: 1\nbudgett: 10\n"},
        r'm\.yaml:2:1: unknown key "budgett" \(did you mean "budget"\?\)$',
    ),
    (
        "unknown-runtime-key",
        {"m.yaml": "version: 1\nruntime:\n  fast: true\n"},
        r'm\.yaml:3:3: unknown key "fast" in runtime',
    ),
    (
        "providers-mapping",
        {"m.yaml": "version: 1\nproviders: {a: 1}\n"},
        r"m\.yaml:2:12: providers: must be a list$",
    ),
    # -- provider entries
    (
        "provider-not-mapping",
        {"m.yaml": HEAD + "  - static\n"},
        r"m\.yaml:3:5: provider #1: must be a mapping",
    ),
    (
        "missing-type",
        {"m.yaml": HEAD + "  - name: a\n    text: hi\n"},
        r'm\.yaml:3:5: provider "a": missing key "type"; known types: probe, static$',
    ),
    (
        "unknown-type",
        {"m.yaml": HEAD + "  - name: a\n    type: statik\n"},
        r'm\.yaml:4:11: provider "a": unknown provider type "statik" \(did you mean "static"\?\); known types: probe, static$',
    ),
    (
        "missing-name",
        {"m.yaml": HEAD + "  - type: static\n    text: hi\n"},
        r'm\.yaml:3:5: provider #1: missing key "name"$',
    ),
    (
        "empty-name",
        {"m.yaml": HEAD + "  - name: ''\n    type: static\n    text: hi\n"},
        r"m\.yaml:3:11: provider #1: name: must not be empty$",
    ),
    (
        "missing-text",
        {"m.yaml": static("    priority: 1\n")},
        r'm\.yaml:3:5: provider "a": missing key "text"$',
    ),
    (
        "unknown-provider-key",
        {"m.yaml": HEAD + "  - name: runbooks\n    type: probe\n    tpo_k: 3\n"},
        r'm\.yaml:5:5: provider "runbooks": unknown key "tpo_k"; allowed keys: name, type, .*',
    ),
    (
        "unknown-nested-key",
        {
            "m.yaml": HEAD
            + "  - name: status\n    type: probe\n    request:\n      url: https://x\n      timout_s: 2\n"
        },
        r'm\.yaml:7:7: provider "status": unknown key "timout_s" in request \(did you mean "timeout_s"\?\)$',
    ),
    (
        "nested-missing-key",
        {"m.yaml": HEAD + "  - name: status\n    type: probe\n    request:\n      timeout_s: 2\n"},
        r'm\.yaml:6:7: provider "status": missing key "url" in request$',
    ),
    (
        "nested-wrong-type",
        {
            "m.yaml": HEAD
            + "  - name: s\n    type: probe\n    request: {url: x, headers: {A: {b: 1}}}\n"
        },
        r'm\.yaml:5:36: provider "s": request\.headers\.A: must be a string$',
    ),
    (
        "duplicate-names",
        {"m.yaml": static("    text: one\n") + "  - name: a\n    type: static\n    text: two\n"},
        r'm\.yaml:6:11: duplicate provider name "a" \(first at line 3\)$',
    ),
    (
        "priority-word",
        {"m.yaml": static("    text: hi\n    priority: high\n")},
        r'm\.yaml:6:15: provider "a": priority: must be an integer$',
    ),
    (
        "max-tokens-negative",
        {"m.yaml": static("    text: hi\n    max_tokens: -3\n")},
        r'm\.yaml:6:17: provider "a": max_tokens: must be >= 0$',
    ),
    (
        "enabled-word",
        {"m.yaml": static("    text: hi\n    enabled: maybe\n")},
        r'm\.yaml:6:14: provider "a": enabled: must be true or false$',
    ),
    (
        "label-list",
        {"m.yaml": HEAD + "  - name: p\n    type: probe\n    label: [a]\n"},
        r'm\.yaml:5:12: provider "p": label: must be a string$',
    ),
    (
        "label-bool",
        {"m.yaml": HEAD + "  - name: p\n    type: probe\n    label: true\n"},
        r'm\.yaml:5:12: provider "p": label: must be a string',
    ),
    (
        "items-member",
        {"m.yaml": HEAD + "  - name: p\n    type: probe\n    items: [a, [b]]\n"},
        r'm\.yaml:5:16: provider "p": items\[1\]: must be a string$',
    ),
    (
        "multi-line-type",
        {"m.yaml": HEAD + "  - name: t\n    type: static\n   \n      x\n"},
        r'm\.yaml:4:11: provider "t": unknown provider type "static\\nx" \(did you mean "static"\?\); known',
    ),
    # -- templates
    (
        "template-syntax",
        {"m.yaml": static('    text: "{{ branch.name"\n')},
        r'm\.yaml:5:11: provider "a": text: template syntax error',
    ),
    (
        "template-unknown-name",
        {"m.yaml": static('    text: "{{ secret }}"\n')},
        r'm\.yaml:5:11: provider "a": text: unknown name .secret.',
    ),
    (
        "when-syntax",
        {"m.yaml": static('    text: hi\n    when: "branch.name =="\n')},
        r'm\.yaml:6:11: provider "a": when: .*syntax error',
    ),
    # -- variables
    (
        "missing-variable",
        {"m.yaml": static('    text: "token ${API_TOKEN}"\n')},
        r'm\.yaml:5:11: environment variable "API_TOKEN" is not set',
    ),
    (
        "bad-variable-name",
        {"m.yaml": static('    text: "${1X}"\n')},
        r'm\.yaml:5:11: bad variable reference "\$\{1X\}"',
    ),
    (
        "unclosed-variable",
        {"m.yaml": static('    text: "${X"\n')},
        r'm\.yaml:5:11: unclosed "\$\{"',
    ),
    # -- extends
    (
        "extends-missing",
        {"m.yaml": "extends: nope.yaml\n"},
        r'm\.yaml:1:10: extends: cannot read "nope\.yaml": no such file$',
    ),
    (
        "extends-folder",
        {"m.yaml": "extends: sub\n", "sub/x.yaml": "version: 1\n"},
        r'm\.yaml:1:10: extends: cannot read "sub": is a directory$',
    ),
    (
        "extends-list",
        {"m.yaml": "extends: [a.yaml]\n"},
        r"m\.yaml:1:10: extends: must be the file name",
    ),
    (
        "extends-self",
        {"m.yaml": "extends: m.yaml\n"},
        r"m\.yaml:1:10: extends cycle: m\.yaml -> m\.yaml$",
    ),
    (
        "extends-cycle",
        {
            "m.yaml": "extends: b.yaml\n",
            "b.yaml": "version: 1\nextends: c.yaml\n",
            "c.yaml": "extends: b.yaml\n",
        },
        r"c\.yaml:1:10: extends cycle: m\.yaml -> b\.yaml -> c\.yaml -> b\.yaml$",
    ),
    (
        "error-in-base",
        {"m.yaml": "extends: base.yaml\nproviders: []\n", "base.yaml": "version: 1\nbudget: x\n"},
        r"base\.yaml:2:9: budget: must be an integer$",
    ),
    (
        "syntax-error-in-base",
        {"m.yaml": "extends: base.yaml\n", "base.yaml": "version: 1\n\tbudget: 3\n"},
        r"base\.yaml:2:1: check the indentation of line 2: it is indented with a tab",
    ),
    (
        "error-in-overlay-entry",
        {
            "m.yaml": "extends: base.yaml\nproviders:\n  - name: a\n    txet: hi\n",
            "base.yaml": static("    text: hi\n"),
        },
        r'm\.yaml:4:5: provider "a": unknown key "txet" \(did you mean "text"\?\)$',
    ),
    (
        "new-overlay-entry-without-type",
        {
            "m.yaml": "extends: base.yaml\nproviders:\n  - name: b\n    text: hi\n",
            "base.yaml": static("    text: hi\n"),
        },
        r'm\.yaml:3:5: provider "b": missing key "type"',
    ),
]


@pytest.mark.parametrize(("files", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_broken_manifest_is_located(
    files: dict[str, str | bytes],
    expected: str,
    write: Callable[..., Path],
    types: ProviderTypes,
) -> None:
    for name, text in files.items():
        write(name, text)
    with pytest.raises(ManifestError) as caught:
        load_manifest("m.yaml", environ={}, types=types)
    text = str(caught.value)
    assert re.search("^" + expected, text, re.MULTILINE), text
    # every error line is "path:line:col: message"
    for line in text.splitlines():
        assert re.match(r"^[^:]+:\d+:\d+: \S", line), line
    first = caught.value
    assert (first.path, first.line, first.column) == (
        first.errors[0].path,
        first.errors[0].line,
        first.errors[0].column,
    )


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 30
    assert len({case[0] for case in CASES}) == len(CASES)


def test_all_errors_of_a_file_are_reported_at_once(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write(
        "m.yaml",
        """
        version: 2
        budget: -1
        colour: red
        providers:
          - name: a
            type: static
            txt: hi
          - name: b
            type: nope
          - name: c
            type: static
            text: "${UNSET}"
        """,
    )
    with pytest.raises(ManifestError) as caught:
        load_manifest("m.yaml", environ={}, types=types)
    lines = str(caught.value).splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [
        "m.yaml:1:10",
        "m.yaml:2:9",
        "m.yaml:3:1",
        "m.yaml:5:5",
        "m.yaml:7:5",
        "m.yaml:9:11",
        "m.yaml:12:11",
    ]
    assert len(caught.value.errors) == 7
    assert caught.value.line == 1
    assert isinstance(caught.value, ValueError)


def test_an_unset_variable_in_a_base_value_the_overlay_replaces_is_no_error(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("base.yaml", static('    text: "${ONLY_IN_DEV}"\n'))
    write("m.yaml", "extends: base.yaml\nproviders:\n  - name: a\n    text: fixed\n")
    config = load_manifest("m.yaml", environ={}, types=types).providers[0]
    assert isinstance(config, StaticConfig)
    assert config.text == "fixed"


def test_an_unset_variable_in_a_disabled_provider_is_no_error(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("m.yaml", static('    text: "${ONLY_IN_DEV}"\n    enabled: false\n'))
    config = load_manifest("m.yaml", environ={}, types=types).providers[0]
    assert isinstance(config, StaticConfig)
    assert config.enabled is False
    assert config.text == "${ONLY_IN_DEV}"


def test_a_missing_manifest_file_is_a_located_error(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    with pytest.raises(ManifestError, match=r"^nope\.yaml:1:1: cannot read manifest"):
        load_manifest("nope.yaml", environ={}, types=types)


def test_a_template_error_deep_in_a_block_names_the_template_line(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("m.yaml", static("    text: |\n      line one\n      {{ branch.name\n"))
    with pytest.raises(ManifestError, match=r"^m\.yaml:5:11: .*template syntax error.*"):
        load_manifest("m.yaml", environ={}, types=types)
