"""What the command line prints is safe for the operator's terminal and logs.

Provider names and corpus file names come from files other people write. Printed raw, an OSC
or CSI sequence retitles or clears the terminal, a C1 ``\\x9b`` does the same on terminals
that take 8-bit controls, a bidi override disguises text, and a newline forges a log line.
Every human-readable line escapes them; ``--json`` stays valid JSON holding the exact names.
A name that came from a ``${VAR}`` is shown as written, never as its value.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from repofiles import put

from composer.cli import Output, main

OSC = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
FORGED = "a\nforged: line"
C1_BIDI = "csi\x9b31m bidi\u202edm.exe"
NAMES = [OSC, CLEAR, FORGED, C1_BIDI]
RAW = ["\x1b", "\x07", "\x9b", "\u202e"]  # none of these may reach the terminal
CORPUS_FILE = "evil\x1b]0;owned\x07.md"


def statics(*rows: tuple[str, int]) -> str:
    """A manifest of static providers with these names (YAML-escaped) and priorities; each has
    ``max_tokens: 0``, so that ``validate`` warns about it by name."""
    entries = [
        f'  - {{name: "{name}", type: static, priority: {priority}, max_tokens: 0, text: t}}\n'
        for name, priority in rows
    ]
    return "version: 1\nbudget: 500\nproviders:\n" + "".join(entries)


# YAML escapes (\e, \a, \x9b, \u202e) put the control characters into the names.
YAML_NAMES = [r"\e]0;pwned\a", r"\e[2J", r"a\nforged: line", r"csi\x9b31m bidi\u202edm.exe"]
MANIFEST_A = (
    statics(*zip(YAML_NAMES, [4, 3, 2, 1], strict=True))
    + """\
  - name: docs
    type: file_corpus
    root: corpus
    query: "{{ instruction.text }}"
    top_k: 1
    template: "{% for hit in hits %}[{{ hit.path }}] {{ hit.text }}{% endfor %}"
"""
)
MANIFEST_B = statics(
    (YAML_NAMES[0], 40), (YAML_NAMES[1], 30), (YAML_NAMES[3], 10), (r"b\nforged: line", 0)
)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two environments, ``a`` and ``b``, of providers with hostile names, and a corpus."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    put(tmp_path / "envs" / "a.yaml", MANIFEST_A)
    put(tmp_path / "envs" / "b.yaml", MANIFEST_B)
    put(tmp_path / "envs" / "corpus" / CORPUS_FILE, "# Restarts\n\nrestart the gateway first\n")
    return tmp_path / "envs"


def run(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_safe(text: str) -> None:
    """No raw control or bidi character, and no line that a name's newline started."""
    for char in RAW:
        assert char not in text, (char, text)
    assert not [line for line in text.splitlines() if line.startswith("forged: line")], text


COMMANDS = [
    ["validate", "{folder}", "--env", "a"],
    ["explain", "{folder}", "--env", "a"],
    ["diff", "{folder}", "--env", "a", "--env", "b"],
    ["preview", "{folder}", "--env", "a", "--instruction", "restart the gateway"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_human_readable_output_escapes_names(
    command: list[str], folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(*(a.format(folder=folder) for a in command), capsys=capsys)
    assert code == 0, err
    assert_safe(out)
    assert_safe(err)


def test_explain_and_diff_show_each_name_escaped_not_dropped(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, explained, _ = run("explain", str(folder), "--env", "a", capsys=capsys)
    for shown in (r"\x1b]0;pwned\x07", r"\x1b[2J", r"a\nforged: line", r"csi\x9b31m bidi\u202e"):
        assert f"provider {shown}" in explained
    _, diffed, _ = run("diff", str(folder), "--env", "a", "--env", "b", capsys=capsys)
    assert r"- providers.a\nforged: line: " in diffed
    assert r"+ providers.b\nforged: line: " in diffed
    assert r"~ providers.\x1b[2J.priority: 3 -> 30" in diffed


def test_validate_warnings_escape_names(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = run("validate", str(folder), "--env", "a", capsys=capsys)
    assert r'provider "\x1b]0;pwned\x07": max_tokens: 0 means no cap' in err


def test_preview_shows_a_corpus_file_name_escaped(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        "preview", str(folder), "--env", "a", "--instruction", "restart the gateway", capsys=capsys
    )
    assert code == 0
    assert r"[evil\x1b]0;owned\x07.md] restart the gateway first" in out


def test_preview_json_is_valid_and_keeps_the_exact_names(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        "preview",
        str(folder),
        "--env",
        "a",
        "--instruction",
        "restart the gateway",
        "--json",
        capsys=capsys,
    )
    assert code == 0, err
    assert_safe(out)
    document = json.loads(out)
    assert [row["name"] for row in document["providers"]][:4] == NAMES
    assert CORPUS_FILE in document["guidance"]


@pytest.mark.parametrize(
    "command",
    [
        ["validate", "{folder}", "--all-envs", "--json"],
        ["render", "{folder}", "--env", "a", "--json"],
        ["diff", "{folder}", "--env", "a", "--env", "b", "--json"],
    ],
    ids=lambda c: c[0],
)
def test_every_json_document_is_valid_and_keeps_the_exact_names(
    command: list[str], folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(*(a.format(folder=folder) for a in command), capsys=capsys)
    assert code == 0, err
    assert_safe(out)
    text = json.dumps(json.loads(out), ensure_ascii=False)
    for name in NAMES:
        assert json.dumps(name, ensure_ascii=False)[1:-1] in text, name


def test_a_manifest_file_name_is_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = tmp_path / "m\x1b[2J\u202e.yaml"
    put(hostile, "version: 1\nproviders: []\n")
    code, out, _ = run("validate", str(hostile), capsys=capsys)
    assert code == 0
    assert_safe(out)
    assert out.endswith(r"m\x1b[2J\u202e.yaml: valid; 0 providers (0 enabled), budget 2000" + "\n")


def test_located_errors_escape_file_and_provider_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "base\x1b]0;x\x07.yaml"
    put(base, 'version: 1\nproviders:\n  - {name: "\\e[2J", type: nope}\n')
    put(tmp_path / "m.yaml", 'extends: "base\\e]0;x\\a.yaml"\n')
    code, out, err = run("validate", str(tmp_path / "m.yaml"), capsys=capsys)
    assert (code, out) == (1, "")
    assert_safe(err)
    assert r'base\x1b]0;x\x07.yaml:3:27: provider "\x1b[2J": unknown provider type' in err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_output_on_a_terminal_escapes_names_too(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal, rich draws the table and the warnings; the names reach it escaped."""
    out, err = _Terminal(), _Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    assert Output().colour
    for command in COMMANDS[::3]:  # validate (warnings) and preview (the table)
        assert main([a.format(folder=folder) for a in command]) == 0
    for payload in (OSC, CLEAR, "\x07", "\x9b", "\u202e", "\x1b]0;"):
        assert payload not in out.getvalue() + err.getvalue()
    assert r"\x1b[2J" in out.getvalue()


# --------------------------------------------------------------------------- names from ${VAR}

SENTINEL = "sentinel-provider-name-5f3e"
OTHER = "sentinel-other-name-91ab"


@pytest.fixture
def variable_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Environments whose provider names come from variables holding sentinel values."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROVIDER_NAME", SENTINEL)
    monkeypatch.setenv("OTHER_NAME", OTHER)
    body = "  - {{name: '${{PROVIDER_NAME}}', type: static, priority: {p}, text: hi}}\n"
    put(tmp_path / "envs" / "a.yaml", "version: 1\nproviders:\n" + body.format(p=1))
    put(
        tmp_path / "envs" / "b.yaml",
        "version: 1\nproviders:\n"
        + body.format(p=2)
        + "  - {name: 'x-${OTHER_NAME}', type: static, text: hi}\n",
    )
    return tmp_path / "envs"


def test_explain_shows_a_name_from_a_variable_as_written(
    variable_names: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run("explain", str(variable_names), "--env", "b", capsys=capsys)
    assert code == 0, err
    assert SENTINEL not in out + err
    assert OTHER not in out + err
    assert "provider ${PROVIDER_NAME}  # " in out
    assert "provider x-${OTHER_NAME}  # " in out


def test_diff_shows_a_name_from_a_variable_as_written(
    variable_names: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run("diff", str(variable_names), "--env", "a", "--env", "b", capsys=capsys)
    assert code == 0, err
    assert SENTINEL not in out + err
    assert OTHER not in out + err
    assert "~ providers.${PROVIDER_NAME}.priority: 1 -> 2" in out
    assert "+ providers.x-${OTHER_NAME}: type static, priority 0" in out
