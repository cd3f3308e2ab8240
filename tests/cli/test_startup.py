"""What a command imports and loads: ``--version`` and ``--help`` none of the stack, and
``validate`` no tokenizer for fixed texts whose byte length already proves they fit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from repofiles import CONFIGS, REPO, put

from composer import count_tokens
from composer.cli import main

HEAVY = ("pydantic", "jinja2", "tiktoken", "yaml", "httpx", "numpy", "asyncio")


def imported_after(code: str, modules: tuple[str, ...] = HEAVY) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``."""
    script = (
        "import sys, contextlib, io, json\n"
        "from composer.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    {code}\n"
        f"print(json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True
    )
    names: list[str] = json.loads(result.stdout)
    return names


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["validate", "--help"]])
def test_version_and_help_import_none_of_the_stack(argv: list[str]) -> None:
    assert imported_after(f"main({argv!r})") == []


def test_validate_does_not_load_the_tokenizer_for_short_fixed_texts() -> None:
    script = (
        "from composer.cli import main\n"
        "import composer.tokens as tokens\n"
        f"assert main(['validate', {str(CONFIGS)!r}, '--all-envs', '--no-interpolate']) == 0\n"
        "print(tokens.is_loaded())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert result.stdout.splitlines()[-1] == "False"


def test_a_fixed_text_longer_than_its_cap_is_still_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Over the cap in bytes, the text is counted: a warning when its tokens are over too."""
    long = "word " * 40  # 200 bytes, about 40 tokens
    put(
        tmp_path / "m.yaml",
        f"version: 1\nproviders:\n  - {{name: a, type: static, max_tokens: 10, text: '{long}'}}\n"
        f"  - {{name: b, type: static, max_tokens: 150, text: '{long}'}}\n",
    )
    assert main(["validate", str(tmp_path / "m.yaml")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    tokens = count_tokens(long)
    assert 10 < tokens < 150
    assert f'provider "a": its fixed text is {tokens} tokens, over its max_tokens 10' in err[0]


PROVIDER_LIBRARIES = ("numpy", "bm25s", "Stemmer", "markdown_it", "httpx", "psycopg", "mcp")
"""What the other built-in types need: a manifest of static texts loads none of it."""


@pytest.mark.parametrize(
    "argv",
    [["validate", "{manifest}"], ["preview", "{manifest}", "--instruction", "the deploy failed"]],
    ids=["validate", "preview"],
)
def test_a_manifest_of_static_texts_loads_no_other_types_libraries(
    tmp_path: Path, argv: list[str]
) -> None:
    manifest = tmp_path / "m.yaml"
    put(manifest, "version: 1\nproviders:\n  - {name: rules, type: static, text: Be brief.}\n")
    code = f"assert main({[arg.format(manifest=manifest) for arg in argv]!r}) == 0"
    assert imported_after(code, PROVIDER_LIBRARIES) == []
    # and a manifest that uses file_corpus does load them (so the check above can fail)
    put(tmp_path / "docs" / "a.md", "# A\n\nthe deploy failed\n")
    put(
        manifest,
        "version: 1\nproviders:\n  - {name: docs, type: file_corpus, root: docs, "
        "query: '{{ instruction.text }}'}\n",
    )
    assert {"numpy", "bm25s"} <= set(imported_after(code, PROVIDER_LIBRARIES))


def test_the_json_documents_load_only_for_json_or_a_manifest_that_fails(tmp_path: Path) -> None:
    """A preview that prints a table neither imports nor builds the ``--json`` models."""
    documents = ("composer.inspect.documents",)
    preview = ["preview", str(CONFIGS), "--env", "dev", "--instruction", "the deploy failed"]
    assert imported_after(f"assert main({preview!r}) == 0", documents) == []
    validate = ["validate", str(CONFIGS), "--env", "dev", "--json"]
    assert imported_after(f"assert main({validate!r}) == 0", documents) == [*documents]
    broken = put(tmp_path / "m.yaml", "version: 1\nbudget: many\n")
    failing = ["preview", str(broken), "--instruction", "x"]
    assert imported_after(f"assert main({failing!r}) == 1", documents) == [*documents]
