"""Reading a manifest with libyaml gives what the pure-Python reader gives: the same located
tree (overlay tags included), or the same located errors, whatever the text (the
broken-manifest table included)."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from manifest.test_manifest_broken import CASES

from composer.errors import ManifestError
from composer.manifest import yamlnodes
from composer.manifest.yamlnodes import Map, Node, Scalar, read_yaml

pytestmark = pytest.mark.skipif(not yamlnodes.LIBYAML, reason="PyYAML was built without libyaml")

PIECES = [
    *"abk:-,[]{}#&*!|>'\"% \n\t?",
    "\n  ",
    "\n- ",
    "key: ",
    "&a ",
    "*a",
    "!!str ",
    "!!int ",
    "!custom ",
    "!override ",
    "!reset ",
    "!reset\n",
    "1.10",
    "0o17",
    "0x1F",
    ".inf",
    "~",
    "null",
    "yes",
    "---\n",
    "...\n",
    "%YAML 1.2\n",
    "é",
    "\u2028",
    "\x85",
    "\x07",
    "\ufeff",
    "[" * 70,
    "- " * 70,
    "99999999999999999999999999",
    "\r\n",
    "\r",
    "\\",
    "'it''s'",
    "\u00a0",
    "  # c\n",
    "<<: ",
    "|-\n  a\n",
    ">+\n  b\n",
    "|2\n   c\n",
    "|#",
    '"multi\n  line"',
    "\U0001f600",
    "? ",
    "?q=1",
    "{a: , b: }",
]
SEEDS = [
    "version: 1\nbudget: 100\nproviders:\n  - name: a\n    type: static\n    text: hi\n",
    'version: 1\nproviders:\n  - {name: b, type: static, text: "x\\ty", priority: 007}\n',
    "extends: b.yaml\nbudget: !reset\nruntime: !override {gather: concurrent}\n",
    "version: 1\nproviders:\n  - name: t\n    type: static\n    text: |\n      line\n\n      end\n",
]
SAME = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def shape(node: Node) -> Any:
    """A tree as comparable data: marks, types and values (NaN compared as text)."""
    if isinstance(node, Scalar):
        value = node.value
        if isinstance(value, float) and math.isnan(value):
            value = "nan"
        kind = type(value).__name__
        return ("scalar", tuple(node.mark), kind, value, node.text, node.is_str, node.override)
    if isinstance(node, Map):
        items = {key: (tuple(mark), shape(child)) for key, (mark, child) in node.items.items()}
        return ("map", tuple(node.mark), items, node.override, node.resets)
    return ("seq", tuple(node.mark), [shape(item) for item in node.items], node.override)


def read_both(text: str, *, overlay_tags: bool = True) -> tuple[Any, Any]:
    """What each reader makes of ``text`` in m.yaml (a manifest's ``!override`` and ``!reset``
    read or, for other files, refused): a tree and its errors, or the error."""
    results: list[Any] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        for libyaml in (True, False):
            try:
                tree, errors = read_yaml("m.yaml", path, libyaml=libyaml, overlay_tags=overlay_tags)
                results.append((shape(tree), [str(e) for e in errors]))
            except ManifestError as e:
                results.append(str(e))
    return results[0], results[1]


@pytest.mark.parametrize(("name", "files", "expected"), CASES, ids=[c[0] for c in CASES])
def test_every_broken_manifest_reads_the_same(
    name: str, files: dict[str, str | bytes], expected: str
) -> None:
    for content in files.values():
        text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
        fast, pure = read_both(text)
        assert fast == pure


@st.composite
def texts(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 6))):
        position = draw(st.integers(0, len(text)))
        piece = draw(st.sampled_from(PIECES))
        if draw(st.booleans()):
            text = text[:position] + piece + text[position:]
        else:
            text = text[:position] + text[position + draw(st.integers(1, 6)) :]
    return text


@SAME
@given(texts(), st.booleans())
def test_any_text_reads_the_same(text: str, overlay_tags: bool) -> None:
    fast, pure = read_both(text, overlay_tags=overlay_tags)
    assert fast == pure


def test_the_fast_path_is_taken_for_an_ordinary_manifest() -> None:
    """Without this, every comparison above could hold because libyaml was never used."""
    assert yamlnodes._compose_with_libyaml(SEEDS[0]) is not yamlnodes._UNSURE
    for refused in (
        "a: &x 1\nb: *x\n",
        "a: \x07\n",
        "a:\tb\n",
        "? a\n",
        "a: |#\n  b\n",
        "a: !x.y!z 1\n",
    ):
        assert yamlnodes._compose_with_libyaml(refused) is yamlnodes._UNSURE, refused


TAGGED = "a: !reset\nb: !reset null\nc: !override {x: 1}\nd: !override [1, 2]\ne: !override 1.10\n"


@pytest.mark.parametrize(
    "text",
    [
        TAGGED,
        "a: {b: !reset , c: !override 'q'}\n",
        "a:\n  - !reset x\n",
        "!override\na: 1\n",
        "a: !<!override> 3\n",
    ],
)
def test_overlay_tags_read_the_same(text: str) -> None:
    assert yamlnodes._compose_with_libyaml(text) is not yamlnodes._UNSURE  # libyaml reads it
    for overlay_tags in (True, False):
        fast, pure = read_both(text, overlay_tags=overlay_tags)
        assert fast == pure


def test_overlay_tags_mark_the_values_they_tag() -> None:
    """``!override`` marks the value, read as untagged (``1.10`` a number); a key tagged
    ``!reset`` is left out and named in its mapping's ``resets``."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.yaml"
        path.write_text(TAGGED, encoding="utf-8")
        tree, errors = read_yaml("m.yaml", path, overlay_tags=True)
    assert errors == []
    assert isinstance(tree, Map)
    assert tree.resets == ("a", "b")
    assert {key: child.override for key, (_, child) in tree.items.items()} == dict.fromkeys(
        "cde", True
    )
    number = tree.items["e"][1]
    assert isinstance(number, Scalar)
    assert (number.value, number.text, number.is_str) == (1.1, "1.10", False)


def test_a_key_reset_and_written_again_is_a_duplicate() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.yaml"
        path.write_text("a: !reset\na: 1\n", encoding="utf-8")
        _, errors = read_yaml("m.yaml", path, overlay_tags=True)
    assert [str(e) for e in errors] == ['m.yaml:2:1: duplicate key "a" (first at line 1)']
