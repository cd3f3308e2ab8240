"""Whatever the values, the YAML ``composer render`` prints loads back to the same manifest,
with ``--only-set`` too."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from composer.cli import Output
from composer.cli.main import build_parser
from composer.manifest.loader import load_manifest

ENVIRON = {"A": "alpha-9q1", "B": "two words 8k2"}

# Characters a renderer must take care of: quotes, YAML indicators, a comment sign, spaces at
# the ends, line breaks, tabs, controls and bidi marks a terminal must not see raw,
# line separators YAML reads as breaks, and the ${ of variables.
PIECES = [
    *"ab é:#-'\"|>!&*%@`?,[]\\ \n\t",
    "\x00",
    "\x1b",
    "\x85",
    "\u2028",
    "\u202e",
    "\x9b",
    "${A}",
    "${B}",
    "${UNSET:-dflt}",
    "$${",
    "$x",
    "1.10",
    "0o17",
    "true",
    "null",
    "~",
    "- ",
    "# ",
    ": ",
]
RENDER = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

text_values = (
    st.lists(st.sampled_from(PIECES), max_size=8)
    .map("".join)
    .filter(lambda text: not any(tag in text for tag in ("{#", "{%", "{{")))  # not templates
)
names = st.text(alphabet="abcxyz-_. é:#\x1b", min_size=1, max_size=6)


@st.composite
def manifests(draw: st.DrawFn) -> tuple[str, str]:
    """A base manifest and an overlay of it, both as YAML text (JSON-quoted strings)."""
    count = draw(st.integers(0, 4))
    provider_names = draw(st.lists(names, min_size=count, max_size=count, unique=True))
    entries = []
    for name in provider_names:
        entry = {
            "name": name,
            "type": "static",
            "text": draw(text_values),
            "priority": draw(st.integers(-5, 500)),
        }
        if draw(st.booleans()):
            entry["max_tokens"] = draw(st.one_of(st.none(), st.integers(0, 900)))
        if draw(st.booleans()):
            entry["enabled"] = draw(st.booleans())
        if draw(st.booleans()):
            entry["timeout_s"] = draw(st.floats(0.01, 30, allow_nan=False))
        entries.append(entry)
    base: dict[str, object] = {
        "version": 1,
        "budget": draw(st.integers(0, 5000)),
        "providers": entries,
    }
    if draw(st.booleans()):
        base["runtime"] = {"gather": draw(st.sampled_from(["sequential", "concurrent"]))}
    overlay: dict[str, object] = {"extends": "base.yaml"}
    changed: bool = draw(st.booleans())
    if provider_names and changed:
        overlay["providers"] = [{"name": provider_names[0], "text": draw(text_values)}]
    if draw(st.booleans()):
        overlay["budget"] = draw(st.integers(0, 5000))
    return json.dumps(base), json.dumps(overlay)


def render(path: Path, *options: str) -> str:
    out = io.StringIO()
    args = build_parser().parse_args(["render", str(path), *options])
    assert args.run(args, Output(out, io.StringIO())) == 0
    return out.getvalue()


@RENDER
@given(pair=manifests())
def test_rendered_yaml_loads_back_to_the_same_manifest(
    pair: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)
    base, overlay = pair
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "base.yaml").write_text(base, encoding="utf-8")
        (folder / "m.yaml").write_text(overlay, encoding="utf-8")
        original = load_manifest(folder / "m.yaml", environ=ENVIRON)
        for options in ((), ("--only-set",)):
            text = render(folder / "m.yaml", *options)
            for value in ENVIRON.values():
                assert value not in text  # a variable's value never shows
            (folder / "rendered.yaml").write_text(text, encoding="utf-8")
            again = load_manifest(folder / "rendered.yaml", environ=ENVIRON)
            assert again.model_dump(exclude={"extends"}) == original.model_dump(
                exclude={"extends"}
            ), options
