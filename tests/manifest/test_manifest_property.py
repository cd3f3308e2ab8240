"""Whatever the bytes, load_manifest returns a Manifest or raises a ManifestError, nothing else."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from composer.catalog import ProviderTypes
from composer.errors import ManifestError
from composer.manifest import Manifest
from composer.manifest.loader import load_manifest

ENVIRON = {"A": "alpha", "N": "7"}
LOCATED = re.compile(r"^[^\n]*:\d+:\d+: \S")

SEEDS = [
    "version: 1\nbudget: 100\nproviders:\n  - name: a\n    type: static\n    text: hi ${A}\n",
    "extends: base.yaml\nbudget: 3\nproviders:\n  - name: p\n    request: {url: x}\n",
    "version: 1\nproviders:\n  - {name: p, type: probe, params: {a: [1, 2.5, no]}, items: [x]}\n",
    "version: 1\nproviders:\n  - name: t\n    type: static\n    text: |\n      {{ branch.name }}\n",
    "a: &x [1]\nb: *x\n",
]
BASE = "version: 1\nproviders:\n  - name: p\n    type: probe\n    label: ${N}\n"
ALPHABET = [*"abtxy019.:-_ \n\t[]{},&*!|>'\"#%@`?$~<=", "${", "$${", "{{", "}}", "\x00", "é"]

# ``types`` is a function-scoped fixture, but it is immutable here, so sharing it is fine.
FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def check(data: bytes | str, types: ProviderTypes) -> None:
    """Load ``data`` as m.yaml (next to a valid base.yaml): a Manifest or located errors only."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "base.yaml").write_text(BASE, encoding="utf-8")
        target = root / "m.yaml"
        if isinstance(data, str):
            target.write_text(data, encoding="utf-8", errors="surrogatepass")
        else:
            target.write_bytes(data)
        error: ManifestError | None = None
        try:
            result = load_manifest(target, environ=ENVIRON, types=types)
        except ManifestError as e:  # anything else fails the test
            error = e
    if error is None:
        assert isinstance(result, Manifest)
        return
    assert error.errors
    for line in str(error).splitlines():
        assert LOCATED.match(line), line


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 6))):
        position = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "duplicate", "replace"]))
        if action == "insert":
            text = text[:position] + draw(st.sampled_from(ALPHABET)) + text[position:]
        elif action == "delete":
            text = text[:position] + text[position + draw(st.integers(1, 8)) :]
        elif action == "duplicate":
            lines = text.splitlines(keepends=True) or [""]
            index = draw(st.integers(0, len(lines) - 1))
            text = "".join([*lines[: index + 1], lines[index], *lines[index + 1 :]])
        else:
            text = text[:position] + draw(st.sampled_from(ALPHABET)) + text[position + 1 :]
    return text


KEYS = st.sampled_from(
    [
        "version",
        "budget",
        "providers",
        "extends",
        "runtime",
        "name",
        "type",
        "text",
        "priority",
        "max_tokens",
        "enabled",
        "when",
        "label",
        "count",
        "params",
        "items",
        "request",
        "url",
        "x",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False),
    st.sampled_from(
        [
            "static",
            "probe",
            "1",
            "no",
            "{{ branch.name }}",
            "{{",
            "${A}",
            "${B}",
            "a.yaml",
            "base.yaml",
            "",
        ]
    ),
    st.text(max_size=10),
)
DATA = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=5),
    max_leaves=25,
)


@settings(FUZZ, max_examples=300)
@given(text=mutated())
def test_mutated_manifests(text: str, types: ProviderTypes) -> None:
    check(text, types)


@settings(FUZZ, max_examples=200)
@given(text=st.lists(st.sampled_from(ALPHABET), max_size=120).map("".join))
def test_random_text(text: str, types: ProviderTypes) -> None:
    check(text, types)


@settings(FUZZ, max_examples=100)
@given(data=st.binary(max_size=200))
def test_random_bytes(data: bytes, types: ProviderTypes) -> None:
    check(data, types)


@settings(FUZZ, max_examples=300)
@given(document=st.dictionaries(KEYS, DATA, max_size=6), versioned=st.booleans())
def test_random_structures(
    document: dict[str, object], versioned: bool, types: ProviderTypes
) -> None:
    if versioned:
        document = {"version": 1, **document}
    check(yaml.safe_dump(document, allow_unicode=True), types)
