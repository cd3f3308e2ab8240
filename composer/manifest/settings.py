"""Deployment settings (``COMPOSER_*``) and the variables ``${VAR}`` in a manifest reads.

Both come through the same sources, in pydantic-settings' order: init arguments, then the
environment, then a ``.env`` file, then a secrets directory (one file per variable). Tests and
embedding applications pass the environment in as a mapping instead of mutating
``os.environ``, as starlette's ``Config(environ=...)`` does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SecretsSettingsSource,
    SettingsConfigDict,
)

__all__ = ["VARIABLE_NAME", "ComposerSettings", "Variables", "load_settings"]

VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What ``${NAME}`` may be: the letters, digits and underscore of a shell variable."""


@dataclass(frozen=True)
class _Sources:
    """What the sources read while ``load_settings`` runs (None: pydantic-settings' defaults)."""

    environ: Mapping[str, str] | None = None
    env_file: Path | None = None
    secrets_dir: Path | None = None


_SOURCES: ContextVar[_Sources | None] = ContextVar("composer_settings_sources", default=None)


class _MappingEnvSource(EnvSettingsSource):
    """The environment source, reading a given mapping instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        if self.case_sensitive:
            return dict(self._environ)
        return {key.lower(): value for key, value in self._environ.items()}


class ComposerSettings(BaseSettings):
    """``COMPOSER_MANIFEST``, ``COMPOSER_ENV``, ``COMPOSER_ENV_FILE``, ``COMPOSER_SECRETS_DIR``."""

    model_config = SettingsConfigDict(env_prefix="COMPOSER_", extra="ignore")

    manifest: Path | None = None
    """The manifest file, or a directory of per-environment manifests."""
    env: str | None = None
    """The environment whose ``<env>.yaml`` is chosen when ``manifest`` is a directory."""
    env_file: Path | None = Path(".env")
    """A dotenv file (relative to the working directory); missing is fine."""
    secrets_dir: Path | None = None
    """A directory holding one file per secret variable (e.g. ``/run/secrets``)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        bound = _SOURCES.get() or _Sources()
        if bound.environ is not None:
            env_settings = _MappingEnvSource(settings_cls, bound.environ)
        dotenv_settings = DotEnvSettingsSource(settings_cls, env_file=bound.env_file)
        file_secret_settings = SecretsSettingsSource(settings_cls, secrets_dir=bound.secrets_dir)
        return init_settings, env_settings, dotenv_settings, file_secret_settings

    def variables(self, environ: Mapping[str, str] | None = None) -> Variables:
        """The lookup for ``${VAR}``: ``environ`` (default os.environ), ``.env``, secrets dir."""
        dotenv: dict[str, str] = {}
        if self.env_file is not None and self.env_file.is_file():
            dotenv = {k: v for k, v in dotenv_values(self.env_file).items() if v is not None}
        return Variables(
            os.environ if environ is None else environ,
            dotenv,
            self.secrets_dir
            if self.secrets_dir is not None and self.secrets_dir.is_dir()
            else None,
        )


@contextmanager
def _bound(sources: _Sources) -> Iterator[None]:
    token = _SOURCES.set(sources)
    try:
        yield
    finally:
        _SOURCES.reset(token)


def load_settings(environ: Mapping[str, str] | None = None, **overrides: Any) -> ComposerSettings:
    """Settings from ``overrides``, then ``environ`` (default os.environ), ``.env``, secrets dir.

    Where the ``.env`` file and the secrets directory are is read first (from ``overrides`` or
    the environment), since those two sources cannot locate themselves.
    """
    with _bound(_Sources(environ)):
        located = ComposerSettings(**overrides)
    secrets_dir = located.secrets_dir
    if secrets_dir is not None and not secrets_dir.is_dir():
        secrets_dir = None  # pydantic-settings would warn; a missing directory is just empty
    with _bound(_Sources(environ, located.env_file, secrets_dir)):
        return ComposerSettings(**overrides)


@dataclass(frozen=True)
class Variables:
    """Where ``${NAME}`` is looked up, first match wins: environment, ``.env``, secrets dir."""

    environ: Mapping[str, str]
    dotenv: Mapping[str, str] = field(default_factory=dict)
    secrets_dir: Path | None = None

    def get(self, name: str) -> str | None:
        """The value of ``name``, or None when no source has it.

        ``OSError`` from reading a secrets file propagates; the loader locates it.
        """
        if name in self.environ:
            return self.environ[name]
        if name in self.dotenv:
            return self.dotenv[name]
        if self.secrets_dir is not None and VARIABLE_NAME.fullmatch(name):
            secret = self.secrets_dir / name
            if secret.is_file():
                return secret.read_text(encoding="utf-8").rstrip("\r\n")
        return None
