"""The README says what the code does: its reference, its examples and its quick start."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import composer
from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.cli.reference import END, START, markdown_reference, with_reference
from composer.plugin import ProviderType

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def test_manifest_reference_matches_the_models() -> None:
    """The reference section is exactly what the models generate (regenerate, don't edit)."""
    assert with_reference(README, markdown_reference()) == README, (
        "README reference is stale: run `python -m composer.cli.reference README.md`"
    )
    for name in ("static", "file_corpus", "memory", "http"):
        assert f"### `type: {name}`" in README[README.index(START) : README.index(END)]


def test_reference_lists_every_field_of_every_builtin_type() -> None:
    """No field is left out: each model field (by its alias) has a row."""
    reference = markdown_reference()
    for ptype in ProviderTypes.installed():
        for name, field in ptype.config.model_fields.items():
            if name != "type":
                assert f"| `{field.alias or name}` |" in reference, (ptype.name, name)


def test_quick_start_is_two_make_targets_that_exist() -> None:
    quick = _section("Quick start")
    assert "make demo" in quick
    assert "make test" in quick
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, flags=re.M)
    assert re.search(r"^test:", makefile, flags=re.M)
    assert "composer preview configs --env dev" in makefile


def test_library_guide_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """The first Python example of the library guide runs as written, from the repo root."""
    code = _blocks(_section("Library guide"), "python")[0]
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README-library-guide", "exec", dont_inherit=True), {})
    out = capsys.readouterr().out
    assert out.startswith("You are the on-call assistant.\nHouse rules for payments")
    assert "'provider_name': 'house-rules'" in out


async def test_plugin_example_is_a_working_provider_type(tmp_path: Path) -> None:
    """The "Writing a provider type" example loads through the same path as built-ins."""
    code = _blocks(_section("Library guide"), "python")[1]
    namespace: dict[str, Any] = {"__name__": "readme_plugin"}
    exec(compile(code, "README-plugin", "exec", dont_inherit=True), namespace)
    tickets = namespace["provider_type"]
    assert isinstance(tickets, ProviderType)
    manifest_file = tmp_path / "m.yaml"
    manifest_file.write_text(
        textwrap.dedent(
            """\
            version: 1
            providers:
              - name: queue
                type: tickets
                queue: "ops-{{ branch.name }}"
            """
        )
    )
    types = ProviderTypes([tickets, static_type])
    manifest = composer.load_manifest(manifest_file, types=types)
    branch = composer.Branch("sys\n", name="payments")
    composer.attach(branch, manifest, types=types)
    turn = await composer.prepare_turn(branch, "hello")
    assert turn.guidance == "sys\nNo open tickets in ops-payments."


def test_help_lists_every_documented_command() -> None:
    """`composer --help` and the README's command reference name the same commands."""
    result = subprocess.run(
        [sys.executable, "-m", "composer", "--help"], capture_output=True, text=True, check=True
    )
    documented = set(re.findall(r"^composer (\w+)", _section("Command reference"), flags=re.M))
    for command in documented:
        assert re.search(rf"^\s+{command}\s", result.stdout, flags=re.M), command
    assert documented >= {"validate", "preview", "explain", "diff", "schema"}


def test_every_test_the_security_section_names_exists() -> None:
    """The Security section's guarantees point at the tests holding them; none may vanish."""
    named = set(re.findall(r"`(test_\w+\.py)`", _section("Security")))
    assert named
    present = {path.name for path in (ROOT / "tests").rglob("test_*.py")}
    assert named <= present, named - present
