"""The loader is as strict as the JSON Schema editors use: a quoted string is not a number or
a boolean; and the ``.env`` file of ``${VAR}`` is the one beside the manifest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from repofiles import put

from composer.errors import ManifestError
from composer.inspect.schema import manifest_schema
from composer.manifest.loader import load_manifest

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema checks the schema's verdict")


def test_a_quoted_number_is_an_error_as_in_the_schema(tmp_path: Path) -> None:
    text = (
        'version: 1\nbudget: "2500"\nproviders:\n'
        '  - {name: a, type: static, priority: "5", enabled: "true", text: "1.10"}\n'
    )
    put(tmp_path / "m.yaml", text)
    with pytest.raises(ManifestError) as caught:
        load_manifest(tmp_path / "m.yaml", environ={})
    where = str(tmp_path / "m.yaml")
    assert str(caught.value).splitlines() == [
        f"{where}:2:9: budget: must be a number, not a quoted string (remove the quotes)",
        f'{where}:4:39: provider "a": priority: must be a number, not a quoted string '
        "(remove the quotes)",
        f'{where}:4:53: provider "a": enabled: must be true or false, not a quoted string '
        "(remove the quotes)",
    ]
    validator = jsonschema.Draft202012Validator(manifest_schema())
    refused = {tuple(e.absolute_path) for e in validator.iter_errors(yaml.safe_load(text))}
    assert ("budget",) in refused


def test_a_string_field_keeps_a_number_as_written_and_a_variable_may_be_a_number(
    tmp_path: Path,
) -> None:
    put(
        tmp_path / "m.yaml",
        'version: 1\nbudget: "${BUDGET}"\nproviders:\n  - {name: a, type: static, text: 1.10}\n',
    )
    manifest = load_manifest(tmp_path / "m.yaml", environ={"BUDGET": "900"})
    assert manifest.budget == 900
    assert str(vars(manifest.providers[0])["text"]) == "1.10"


def test_variables_come_from_the_dotenv_beside_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from anywhere, a manifest reads the same ``.env``; settings still come from the
    working directory's, and COMPOSER_ENV_FILE names another."""
    put(
        tmp_path / "configs/m.yaml",
        'version: 1\nproviders:\n  - {name: a, type: static, text: "${WHO}"}\n',
    )
    put(tmp_path / "configs/.env", "WHO=beside-the-manifest\n")
    put(tmp_path / "elsewhere/.env", "WHO=working-directory\n")
    put(tmp_path / "other.env", "WHO=named\n")
    monkeypatch.chdir(tmp_path / "elsewhere")
    for path in (tmp_path / "configs/m.yaml", Path("../configs/m.yaml")):
        manifest = load_manifest(path, environ={})
        assert str(vars(manifest.providers[0])["text"]) == "beside-the-manifest"
    manifest = load_manifest(
        tmp_path / "configs/m.yaml",
        environ={"COMPOSER_ENV_FILE": os.fspath(tmp_path / "other.env")},
    )
    assert str(vars(manifest.providers[0])["text"]) == "named"
