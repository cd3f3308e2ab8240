"""A value that came from a variable never shows in an error, a log line or command output."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Literal, NoReturn

import pytest
from pydantic import field_validator

from builtin_providers.static import provider_type as static_type
from composer.catalog import ProviderTypes
from composer.cli import main
from composer.errors import ManifestError
from composer.manifest import ProviderConfig
from composer.manifest.loader import load_manifest
from composer.plugin import BuildContext, ProviderType, Secrets

SECRET = "s3cr3t-Value-9f2c"


class EchoConfig(ProviderConfig):
    """A careless plugin whose validator puts the input in its message."""

    type: Literal["echo"] = "echo"
    key: str

    @field_validator("key")
    @classmethod
    def _check(cls, value: str) -> str:
        raise ValueError(f"key {value!r} is not a valid key")


def never_built(config: ProviderConfig, context: BuildContext) -> NoReturn:
    raise AssertionError("an echo entry never validates, so it is never built")


echo_type = ProviderType("echo", EchoConfig, never_built)

LEAKY = [
    "version: 1\nproviders:\n  - {name: a, type: '${S}'}\n",
    "version: 1\nproviders:\n  - {name: '${S}', type: static, txt: x}\n",
    "version: 1\nproviders:\n  - {name: a, type: static, text: '${S} {{'}\n",
    "version: 1\nproviders:\n  - {name: a, type: static, text: '{{ ${S} }}'}\n",
    "version: 1\nproviders:\n  - {name: a, type: static, text: x, max_tokens: '${S}'}\n",
    "version: 1\nproviders:\n  - {name: a, type: echo, key: 'k-${S}'}\n",
    "version: 1\nbudget: '${S}'\n",
    "extends: '${S}.yaml'\n",
    "extends: '${S}'\n",
    "version: 1\nproviders:\n  - {name: '${S}', type: static, text: x}\n  - {name: '${S}', type: static, text: y}\n",
]


@pytest.mark.parametrize("text", LEAKY)
def test_no_error_message_shows_a_secret(
    text: str, write: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    write("m.yaml", text)
    with pytest.raises(ManifestError) as caught:
        load_manifest(
            "m.yaml", environ={"S": SECRET}, types=ProviderTypes([static_type, echo_type])
        )
    shown = str(caught.value) + repr(caught.value) + "".join(e.message for e in caught.value.errors)
    assert SECRET not in shown
    assert SECRET not in caplog.text


@pytest.mark.parametrize("text", LEAKY)
def test_validate_output_never_shows_a_secret(
    text: str,
    write: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("S", SECRET)
    write("m.yaml", text)
    assert main(["validate", "m.yaml"]) == 1
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert err.startswith("m.yaml:")


def test_a_valid_manifest_reports_without_its_secrets(
    write: Callable[..., Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("S", SECRET)
    write(
        "m.yaml",
        "version: 1\nbudget: 10\nproviders:\n"
        "  - {name: '${S}', type: static, text: 'Bearer ${S}', max_tokens: 0}\n",
    )
    assert main(["validate", "m.yaml"]) == 0
    out, err = capsys.readouterr()
    assert 'warning: provider "***": max_tokens: 0 means no cap' in err
    assert SECRET not in out + err


def test_a_validator_never_quotes_part_of_a_secret(write: Callable[..., Path]) -> None:
    """Jinja would name ``Value`` from ``{{ top-Value }}``: the message names ${S} instead."""
    write("m.yaml", "version: 1\nproviders:\n  - {name: a, type: static, text: '{{ ${S} }}'}\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest("m.yaml", environ={"S": "top-Value"}, types=ProviderTypes([static_type]))
    assert (
        str(caught.value) == 'm.yaml:3:35: provider "a": text: invalid value (from ${S}; not shown)'
    )


class PlainVaultConfig(ProviderConfig):
    """A plugin with a credential field and no ``secrets`` hook."""

    type: Literal["vault"] = "vault"
    credential: str


class VaultConfig(PlainVaultConfig):
    """The same plugin naming its credential a secret, however it is written."""

    def secrets(self) -> list[str]:
        return [self.credential]


def test_a_config_names_secrets_that_are_masked_though_written_literally(
    write: Callable[..., Path],
) -> None:
    write("m.yaml", f"version: 1\nproviders:\n  - {{name: v, type: vault, credential: {SECRET}}}\n")
    loaded = load_manifest(
        "m.yaml", types=ProviderTypes([ProviderType("vault", VaultConfig, never_built)])
    )
    assert isinstance(loaded.providers[0], Secrets)
    assert loaded.redact(f"login with {SECRET} refused") == "login with *** refused"
    plain_type = ProviderType("vault", PlainVaultConfig, never_built)
    plain = load_manifest("m.yaml", types=ProviderTypes([plain_type]))
    assert plain.redact(f"login with {SECRET}") == f"login with {SECRET}"  # no hook: shown
