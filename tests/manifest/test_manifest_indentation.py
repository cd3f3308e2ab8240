"""Indentation mistakes in a real manifest (the one ``composer init`` writes) are told as
``check the indentation of line N``, located at line N, the line to fix, whatever line the
YAML parser stopped at; the same with or without libyaml, through ``load_manifest`` and
``composer validate``; and no text, however indented, makes the reading fail otherwise."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from composer.cli.main import main
from composer.errors import ManifestError
from composer.inspect.scaffold import FILES
from composer.manifest.loader import load_manifest
from composer.manifest.yamlnodes import read_yaml

BASE = FILES["base.yaml"].replace("{team}", "the ops team")
LINES = BASE.splitlines(keepends=True)


def edited(**lines: str) -> str:
    """The scaffold's base manifest with lines replaced (``l21="..."`` is line 21)."""
    changed = list(LINES)
    for name, text in lines.items():
        changed[int(name[1:]) - 1] = text
    return "".join(changed)


def test_the_lines_the_cases_edit_are_where_they_say() -> None:
    assert LINES[11] == "  - name: house-rules          # a fixed text, the same every turn\n"
    assert LINES[15:17] == [
        "    text: |\n",
        "      House rules for the ops team: put the exact command first and say when a "
        "step is risky.\n",
    ]
    assert LINES[18].startswith("  - name: runbooks ")
    assert LINES[19:21] == ["    type: file_corpus\n", "    priority: 50\n"]
    assert LINES[25:27] == ["    top_k: 2\n", "    template: |-\n"]
    assert LINES[29] == "      {{ hit.text }}\n"
    assert LINES[32].startswith("  - name: team-memory ")
    assert LINES[33] == "    type: memory\n"
    assert LINES[36:38] == [
        "    source: {sqlite: memory.sqlite, seed: memory.jsonl}\n",
        '    query: {text: "{{ instruction.text }}", limit: 3}\n',
    ]


AROUND = "here a line is indented 4, 2 or 0 spaces, as the lines above it are"

CASES = {
    "a key one space less in a provider": (
        edited(l21="   priority: 50\n"),
        f"base.yaml:21:4: check the indentation of line 21: it is indented 3 spaces; {AROUND}",
    ),
    "a key one space more in a provider": (
        edited(l21="     priority: 50\n"),
        f"base.yaml:21:6: check the indentation of line 21: it is indented 5 spaces; {AROUND}",
    ),
    "a provider's second key one space less": (
        edited(l20="   type: file_corpus\n"),
        f"base.yaml:20:4: check the indentation of line 20: it is indented 3 spaces; {AROUND}",
    ),
    "a key at the list's indentation": (
        edited(l34="  type: memory\n"),
        f"base.yaml:34:3: check the indentation of line 34: it is indented 2 spaces; {AROUND}",
    ),
    # valid YAML on its own line (a top-level key): the parser stops at the line after it
    "a key dedented to column 1": (
        edited(l26="top_k: 2\n"),
        "base.yaml:26:1: check the indentation of line 26: it is indented 0 spaces, less than "
        "line 25 above it (4), so it ends the block that line is in; yet line 27 below it is "
        "indented 4, as if the block went on",
    ),
    "a provider's last key dedented to column 1": (
        edited(l38='query: {text: "{{ instruction.text }}", limit: 3}\n'),
        "base.yaml:38:1: check the indentation of line 38: it is indented 0 spaces, less than "
        "line 37 above it (4), so it ends the block that line is in; yet line 39 below it is "
        "indented 4, as if the block went on",
    ),
    # the parser stops at the next provider, line 19
    "a text block's key dedented to column 1": (
        edited(l16="text: |\n"),
        "base.yaml:16:1: check the indentation of line 16: it is indented 0 spaces, less than "
        "line 15 above it (4), so it ends the block that line is in; yet line 19 below it is "
        "indented 2, as if the block went on",
    ),
    "a list item one space more": (
        edited(l19="   - name: runbooks\n"),
        "base.yaml:19:4: check the indentation of line 19: its '-' is indented 3 spaces, the "
        "items of the list above it 2 (line 12)",
    ),
    "a list item one space less": (
        edited(l33=" - name: team-memory\n"),
        "base.yaml:33:2: check the indentation of line 33: its '-' is indented 1 space, the "
        "items of the list above it 2 (line 19)",
    ),
    "a list item among the keys of the provider above": (
        edited(l33="    - name: team-memory\n"),
        "base.yaml:33:5: check the indentation of line 33: its '-' is indented 4 spaces, the "
        "items of the list above it 2 (line 19)",
    ),
    # the parser stops at line 13, whose indentation is that of every other provider's keys
    "the first list item one space more": (
        edited(l12="   - name: house-rules\n"),
        "base.yaml:12:4: check the indentation of line 12: its '-' is indented 3 spaces, where "
        "the item of line 19 has it indented 2 (and its keys 4, as line 13 has)",
    ),
    "two spaces after a list item's dash": (
        edited(l12="  -  name: house-rules\n"),
        "base.yaml:12:3: check the indentation of line 12: its key is indented 5 spaces, where "
        "the item of line 19 has it 4 (one space after the '-'), as line 13 below it has",
    ),
    "a line of a text block one space less": (
        edited(l30="     {{ hit.text }}\n"),
        "base.yaml:30:6: check the indentation of line 30: it is indented 5 spaces; here a "
        "line is indented 6, 4, 2 or 0 spaces, as the lines above it are",
    ),
    "a key indented with a tab": (
        edited(l34="\ttype: memory\n"),
        "base.yaml:34:1: check the indentation of line 34: it is indented with a tab; YAML "
        "indents with spaces only",
    ),
    "a tab after the spaces": (
        edited(l34="  \ttype: memory\n"),
        "base.yaml:34:3: check the indentation of line 34: it is indented with a tab; YAML "
        "indents with spaces only",
    ),
    "a value on its own line at its key's indentation": (
        edited(l26="    top_k:\n    2\n"),
        "base.yaml:27:5: line 27 stands where a key goes but has no ': ' after a key; if it "
        "continues the value above, check the indentation of line 27: a value on lines of its "
        "own is indented deeper than its key",
    ),
}


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "memory.jsonl").write_text(FILES["memory.jsonl"])
    return tmp_path


@pytest.mark.parametrize(("text", "expected"), CASES.values(), ids=list(CASES))
def test_an_indentation_mistake_names_the_line_to_fix(
    folder: Path, text: str, expected: str
) -> None:
    (folder / "base.yaml").write_text(text)
    with pytest.raises(ManifestError) as caught:
        load_manifest("base.yaml", environ={})
    assert str(caught.value) == expected
    line, column = map(int, expected.split(":")[1:3])
    assert (caught.value.line, caught.value.column) == (line, column)


@pytest.mark.parametrize("libyaml", [True, False], ids=["libyaml", "python"])
@pytest.mark.parametrize(("text", "expected"), CASES.values(), ids=list(CASES))
def test_both_readers_say_the_same(folder: Path, text: str, expected: str, libyaml: bool) -> None:
    (folder / "base.yaml").write_text(text)
    with pytest.raises(ManifestError) as caught:
        read_yaml("base.yaml", folder / "base.yaml", libyaml=libyaml, overlay_tags=True)
    assert str(caught.value) == expected


def test_validate_prints_it_located(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / "base.yaml").write_text(edited(l16="text: |\n"))
    assert main(["validate", "base.yaml"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("base.yaml:16:1: check the indentation of line 16: ")
    assert "<block end>" not in err


def test_other_syntax_errors_keep_the_parsers_words(folder: Path) -> None:
    """A value holding ': ' or a key glued to its value is no indentation mistake."""
    (folder / "base.yaml").write_text(edited(l21="    priority: 50: 60\n"))
    with pytest.raises(ManifestError, match=r"^base\.yaml:21:17: YAML syntax error: mapping "):
        load_manifest("base.yaml", environ={})
    (folder / "base.yaml").write_text(edited(l21="    priority:50\n"))
    with pytest.raises(ManifestError) as caught:
        load_manifest("base.yaml", environ={})
    assert str(caught.value) == (
        "base.yaml:21:5: line 21 stands where a key goes but has no ': ': a key's ':' needs a "
        "space after it (priority: ...)"
    )


INDENTS = st.lists(st.sampled_from(["", " ", "  ", "   ", "\t", "- ", "-  "]), min_size=39)


@settings(max_examples=200, deadline=None, database=None)
@given(INDENTS)
def test_any_reindented_manifest_is_read_or_located_at_the_line_named(
    indents: list[str],
) -> None:
    """Each line of the base manifest given a random indentation: read, or refused with a
    located error; one that says "check the indentation of line N" is located at line N."""
    text = "".join(indent + line.lstrip(" ") for indent, line in zip(indents, LINES, strict=False))
    error: ManifestError | None = None
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch, "base.yaml")
        path.write_text(text, encoding="utf-8")
        try:
            read_yaml("base.yaml", path, libyaml=False, overlay_tags=True)
        except ManifestError as e:  # anything else fails the test
            error = e
    named = re.match(r"check the indentation of line (\d+):", error.message if error else "")
    if error is not None and named is not None:
        assert error.line == int(named.group(1))
        assert 1 <= error.column <= len(text.splitlines()[error.line - 1]) + 1
