"""Choosing the file (COMPOSER_MANIFEST, COMPOSER_ENV, folders) and ${VAR} interpolation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from builtin_providers.static import StaticConfig
from composer.catalog import ProviderTypes
from composer.errors import ManifestError, SettingsError
from composer.manifest import Manifest
from composer.manifest.loader import environments, load_manifest
from composer.manifest.settings import load_settings

if TYPE_CHECKING:
    from manifest.conftest import ProbeConfig

ONE = "version: 1\nbudget: {budget}\n"
TEXT = "version: 1\nproviders:\n  - name: a\n    type: static\n    text: {text}\n"


@pytest.fixture
def envs(write: Callable[..., Path]) -> None:
    write("configs/base.yaml", ONE.format(budget=1))
    write("configs/dev.yaml", "extends: base.yaml\nbudget: 2\n")
    write("configs/prod.yaml", "extends: base.yaml\nbudget: 3\n")


def test_env_picks_a_file_from_a_folder(envs: None, types: ProviderTypes) -> None:
    manifest = load_manifest("configs", env="prod", environ={}, types=types)
    assert manifest.budget == 3
    assert manifest.path == Path("configs/prod.yaml")


def test_composer_env_picks_it_when_no_env_is_given(envs: None, types: ProviderTypes) -> None:
    assert load_manifest("configs", environ={"COMPOSER_ENV": "dev"}, types=types).budget == 2


def test_an_explicit_env_wins_over_composer_env(envs: None, types: ProviderTypes) -> None:
    manifest = load_manifest("configs", env="prod", environ={"COMPOSER_ENV": "dev"}, types=types)
    assert manifest.budget == 3


def test_a_folder_without_env_is_an_error_listing_the_files(
    envs: None, types: ProviderTypes
) -> None:
    """No file is at fault, so the error is a setting's, with no made-up line:column."""
    with pytest.raises(
        SettingsError,
        match=r'^"configs" is a folder; .*--env or COMPOSER_ENV \(found: base, dev, prod\)$',
    ):
        load_manifest("configs", environ={}, types=types)


def test_an_unknown_env_is_an_error_listing_the_files(envs: None, types: ProviderTypes) -> None:
    with pytest.raises(
        SettingsError,
        match=r'^no manifest for environment "qa" in "configs" \(found: base, dev, prod\)$',
    ):
        load_manifest("configs", env="qa", environ={}, types=types)


def test_an_env_cannot_walk_out_of_the_folder(envs: None, types: ProviderTypes) -> None:
    with pytest.raises(SettingsError, match=r'no manifest for environment "\.\./configs/dev"'):
        load_manifest("configs", env="../configs/dev", environ={}, types=types)


def test_a_test_file_beside_the_manifests_is_not_an_environment(
    envs: None, write: Callable[..., Path], types: ProviderTypes
) -> None:
    """A ``composer test`` file is not listed; a file that does not parse still is."""
    write("configs/tests.yaml", "manifest: .\ntests: []\n")
    write("configs/broken.yaml", "version: [\n")
    assert environments("configs") == ["base", "broken", "dev", "prod"]
    with pytest.raises(SettingsError, match=r"\(found: base, broken, dev, prod\)$"):
        load_manifest("configs", env="qa", environ={}, types=types)


def test_env_is_ignored_for_a_file(envs: None, types: ProviderTypes) -> None:
    assert load_manifest("configs/dev.yaml", env="prod", environ={}, types=types).budget == 2


def test_composer_manifest_is_used_without_a_path(envs: None, types: ProviderTypes) -> None:
    environ = {"COMPOSER_MANIFEST": "configs", "COMPOSER_ENV": "prod"}
    assert load_manifest(environ=environ, types=types).budget == 3


def test_no_path_and_no_composer_manifest_is_an_error(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    with pytest.raises(SettingsError, match=r"^no manifest given"):
        load_manifest(environ={}, types=types)


def test_settings_come_from_a_dotenv_file(write: Callable[..., Path], types: ProviderTypes) -> None:
    write("configs/dev.yaml", ONE.format(budget=5))
    write(".env", "COMPOSER_MANIFEST=configs\nCOMPOSER_ENV=dev\n")
    assert load_manifest(environ={}, types=types).budget == 5


def test_the_environment_wins_over_the_dotenv_file(write: Callable[..., Path]) -> None:
    write(".env", "COMPOSER_ENV=dev\n")
    assert load_settings({"COMPOSER_ENV": "prod"}).env == "prod"
    assert load_settings({}).env == "dev"
    assert load_settings({"COMPOSER_ENV": "prod"}, env="qa").env == "qa"


# -- ${VAR}


def text_of(manifest: Manifest) -> str:
    """The text of the manifest's one provider, a ``static``."""
    config = manifest.providers[0]
    assert isinstance(config, StaticConfig)
    text: str = config.text  # ``Template`` is typed Any
    return text


def load_text(
    write: Callable[..., Path], types: ProviderTypes, text: str, environ: dict[str, str]
) -> Manifest:
    write("m.yaml", TEXT.format(text=text))
    return load_manifest("m.yaml", environ=environ, types=types)


@pytest.mark.parametrize(
    ("text", "environ", "expected"),
    [
        ('"${A}"', {"A": "x1"}, "x1"),
        ('"a ${A} b ${B}"', {"A": "1", "B": "2"}, "a 1 b 2"),
        ('"${A:-dflt}"', {}, "dflt"),
        ('"${A:-dflt}"', {"A": ""}, "dflt"),
        ('"${A:-}"', {}, ""),
        ('"${A:-dflt}"', {"A": "set"}, "set"),
        ('"$${A}"', {"A": "set"}, "${A}"),
        ('"$$${A}"', {"A": "v"}, "$${A}"),
        ('"cost: $5 and $"', {}, "cost: $5 and $"),
        ('"{A}"', {"A": "v"}, "{A}"),
        ("'${A}'", {"A": "single"}, "single"),
        ("${A}", {"A": "plain"}, "plain"),
    ],
)
def test_interpolation(
    write: Callable[..., Path],
    types: ProviderTypes,
    text: str,
    environ: dict[str, str],
    expected: str,
) -> None:
    assert text_of(load_text(write, types, text, environ)) == expected


def test_a_variable_value_is_taken_literally(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    """Not parsed as YAML, not interpolated again, not typed: ``[1, 2] ${B} 10`` stays text."""
    write("m.yaml", "version: 1\nproviders:\n  - {name: p, type: probe, params: {a: '${A}'}}\n")
    manifest = load_manifest("m.yaml", environ={"A": "[1, 2] ${B} 10"}, types=types)
    # a ``type: probe`` entry validates to the conftest's ProbeConfig
    assert cast("ProbeConfig", manifest.providers[0]).params == {"a": "[1, 2] ${B} 10"}


def test_variables_come_from_dotenv_and_secrets_dir_after_the_environment(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write(".env", "FROM_DOTENV=dotenv-value\nBOTH=dotenv\n")
    write("run/secrets/FROM_SECRET", "secret-value\n")
    write("run/secrets/BOTH", "secret\n")
    manifest = load_text(
        write,
        types,
        '"${FROM_DOTENV} ${FROM_SECRET} ${BOTH} ${ENVIRON}"',
        {"COMPOSER_SECRETS_DIR": "run/secrets", "ENVIRON": "environ-value"},
    )
    assert text_of(manifest) == "dotenv-value secret-value dotenv environ-value"
    assert {"dotenv-value", "secret-value", "environ-value"} <= manifest._secrets


def test_composer_env_file_moves_the_dotenv_file(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("conf/app.env", "TOKEN=from-file\n")
    manifest = load_text(write, types, '"${TOKEN}"', {"COMPOSER_ENV_FILE": "conf/app.env"})
    assert text_of(manifest) == "from-file"


def test_a_missing_secrets_dir_is_no_error(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    manifest = load_text(write, types, '"${A:-x}"', {"COMPOSER_SECRETS_DIR": "nowhere"})
    assert text_of(manifest) == "x"


def test_a_missing_variable_names_itself_and_its_place(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    with pytest.raises(ManifestError) as caught:
        load_text(write, types, '"${PRESENT} ${ABSENT}"', {"PRESENT": "hunter2-value"})
    assert str(caught.value).startswith('m.yaml:5:11: environment variable "ABSENT" is not set')
    assert "hunter2-value" not in str(caught.value)
    assert len(caught.value.errors) == 1


def test_variables_are_read_from_os_environ_by_default(
    write: Callable[..., Path], types: ProviderTypes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPOSER_TEST_VARIABLE", "from-os")
    write("m.yaml", TEXT.format(text='"${COMPOSER_TEST_VARIABLE}"'))
    assert text_of(load_manifest("m.yaml", types=types)) == "from-os"


def test_substituted_values_are_secrets_and_origins_keep_the_reference(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    manifest = load_text(write, types, '"Bearer ${TOKEN}"', {"TOKEN": "tok-123456"})
    origin = manifest.origin("providers", "a", "text")
    assert origin is not None
    assert origin.raw == "Bearer ${TOKEN}"
    assert origin.variables == ("TOKEN",)
    assert origin.is_secret
    assert manifest.redact("sent Bearer tok-123456") == "sent Bearer ***"
    type_origin = manifest.origin("providers", "a", "type")
    assert type_origin is not None
    assert not type_origin.is_secret


def test_a_default_is_not_a_secret(write: Callable[..., Path], types: ProviderTypes) -> None:
    manifest = load_text(write, types, '"${TOKEN:-public}"', {})
    assert manifest._secrets == frozenset()
    origin = manifest.origin("providers", "a", "text")
    assert origin is not None
    assert origin.variables == ()


def test_a_short_secret_is_masked_only_as_a_whole_word(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    manifest = load_text(write, types, '"${X}"', {"X": "ab"})
    assert manifest.redact("tab ab lab") == "tab *** lab"


def test_an_unset_variable_in_a_name_is_reported_once(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("m.yaml", "version: 1\nproviders:\n  - {name: '${WHO}', type: static, text: x}\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest("m.yaml", environ={}, types=types)
    assert str(caught.value) == (
        'm.yaml:3:12: environment variable "WHO" is not set (use ${WHO:-default} for a default)'
    )


def test_names_that_collide_once_substituted_are_an_error(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write(
        "m.yaml",
        "version: 1\nproviders:\n  - {name: ops, type: static, text: x}\n"
        "  - {name: '${TEAM}', type: static, text: y}\n",
    )
    with pytest.raises(
        ManifestError,
        match=r'^m\.yaml:4:12: provider "\$\{TEAM\}": the same name as the provider at line 3',
    ):
        load_manifest("m.yaml", environ={"TEAM": "ops"}, types=types)


def test_an_unset_variable_brings_no_follow_on_error(
    write: Callable[..., Path], types: ProviderTypes
) -> None:
    write("m.yaml", "version: 1\nproviders:\n  - {name: p, type: probe, count: '${N}'}\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest("m.yaml", environ={}, types=types)
    assert [e.message for e in caught.value.errors] == [
        'environment variable "N" is not set (use ${N:-default} for a default)'
    ]
