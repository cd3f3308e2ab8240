"""Deployment settings (``COMPOSER_*``) and the variables ``${VAR}`` in a manifest reads.

Both come through the same sources, in pydantic-settings' order: init arguments, then the
environment, then a ``.env`` file, then a secrets directory (one file per variable). Tests and
embedding applications pass the environment in as a mapping instead of mutating
``os.environ``, as starlette's ``Config(environ=...)`` does.

Every such file is read by ``read_settings_file``, never by pydantic-settings or python-dotenv
directly: a ``.env`` that is a FIFO would hang every command, and a binary or huge one would
fail deep inside a parser; here each fails at once as a ``SettingsError`` naming the file.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SecretsSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings import SettingsError as SourceError
from pydantic_settings.sources.utils import parse_env_vars

from composer.errors import SettingsError
from composer.manifest.yamlnodes import printable, read_regular_file

__all__ = [
    "MAX_SETTINGS_FILE_BYTES",
    "VARIABLE_NAME",
    "ComposerSettings",
    "Variables",
    "load_settings",
    "read_dotenv",
    "read_settings_file",
]

VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What ``${NAME}`` may be: the letters, digits and underscore of a shell variable."""

MAX_SETTINGS_FILE_BYTES = 1 << 20
"""Largest ``.env`` or secret file read (1 MiB): settings are small, a larger file is a mistake."""


def read_settings_file(path: Path, what: str) -> str | None:
    """The text of a ``.env`` or secret file (``what`` names the kind); None when there is none.

    Not a regular file, larger than ``MAX_SETTINGS_FILE_BYTES``, not UTF-8 or holding a NUL
    byte: a ``SettingsError`` naming the file and the problem. Other ``OSError``s of reading
    (permissions) propagate, for the caller to say where the file was wanted.
    """
    shown = f'{what} "{printable(str(path))}"'
    try:
        data = read_regular_file(path, MAX_SETTINGS_FILE_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except ValueError as e:  # not a regular file
        raise SettingsError(f"{shown}: {e}") from None
    if len(data) > MAX_SETTINGS_FILE_BYTES:
        raise SettingsError(f"{shown}: larger than {MAX_SETTINGS_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        problem = f"not UTF-8 text (byte 0x{data[e.start]:02x}); is it a binary file?"
        raise SettingsError(f"{shown}: {problem}") from None
    if "\x00" in text:
        raise SettingsError(f"{shown}: holds a NUL byte; is it a binary file?")
    return text


def read_dotenv(path: Path | None) -> dict[str, str | None]:
    """The variables of the ``.env`` file at ``path``; none when it is missing or a folder
    (a virtualenv is often called ``.env``); any other problem is a ``SettingsError``."""
    if path is None:
        return {}
    path = path.expanduser()
    if path.is_dir():
        return {}
    try:
        text = read_settings_file(path, ".env file")
    except OSError as e:
        raise SettingsError(f'.env file "{printable(str(path))}": {e.strerror or e}') from e
    return {} if text is None else dotenv_values(stream=io.StringIO(text))


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


class _DotEnvSource(DotEnvSettingsSource):
    """pydantic-settings' ``.env`` source, its file read by ``read_dotenv`` (which would
    otherwise open a FIFO and wait for a writer forever)."""

    def _read_env_files(self) -> Mapping[str, str | None]:
        file = self.env_file
        if not isinstance(file, str | os.PathLike):
            return {}
        values = read_dotenv(Path(file))
        return parse_env_vars(
            values, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


class _SecretsSource(SecretsSettingsSource):
    """pydantic-settings' secrets source (``COMPOSER_*`` as files), each file read by
    ``read_settings_file`` like a ``${VAR}`` secret is."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        found: tuple[Any, str, bool] = (None, field_name, False)
        for key, env_name, is_complex in self._extract_field_info(field, field_name):
            found = (None, key, is_complex)
            for folder in reversed(self.secrets_paths):
                path = self.find_case_path(folder, env_name, self.case_sensitive)
                if path is None:
                    continue
                try:
                    text = read_settings_file(path, "secret file")
                except OSError as e:
                    message = f'secret file "{printable(str(path))}": {e.strerror or e}'
                    raise SettingsError(message) from e
                if text is not None:
                    return text.strip(), key, is_complex
        return found


class ComposerSettings(BaseSettings):
    """``COMPOSER_MANIFEST``, ``COMPOSER_ENV``, ``COMPOSER_ENV_FILE``, ``COMPOSER_SECRETS_DIR``,
    ``COMPOSER_EXTENDS_ROOTS``."""

    model_config = SettingsConfigDict(env_prefix="COMPOSER_", extra="ignore")

    manifest: Path | None = None
    """The manifest file, or a directory of per-environment manifests."""
    env: str | None = None
    """The environment whose ``<env>.yaml`` is chosen when ``manifest`` is a directory."""
    env_file: Path | None = Path(".env")
    """A dotenv file; missing is fine. ``COMPOSER_*`` settings are read from ``.env`` in the
    working directory; ``${VAR}`` from ``.env`` beside the manifest, unless this is set."""
    secrets_dir: Path | None = None
    """A directory holding one file per secret variable (e.g. ``/run/secrets``)."""
    extends_roots: str | None = None
    """Folders, separated by ``os.pathsep``, where an ``extends`` may also lead; by default it
    stays within the folder of the manifest loaded (whoever edits a manifest then cannot have
    composer read, and report on, any other file of the machine)."""

    @property
    def extends_folders(self) -> tuple[Path, ...]:
        """``extends_roots`` as paths, empty entries left out."""
        entries = (self.extends_roots or "").split(os.pathsep)
        return tuple(Path(entry).expanduser() for entry in entries if entry.strip())

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
        dotenv_settings = _DotEnvSource(settings_cls, env_file=bound.env_file)
        file_secret_settings = _SecretsSource(settings_cls, secrets_dir=bound.secrets_dir)
        return init_settings, env_settings, dotenv_settings, file_secret_settings

    def variables(
        self, environ: Mapping[str, str] | None = None, *, folder: Path | None = None
    ) -> Variables:
        """The lookup for ``${VAR}``: ``environ`` (default os.environ), ``.env``, secrets dir.

        The ``.env`` file is ``folder``'s (the manifest's) unless ``COMPOSER_ENV_FILE`` names
        one, so a manifest reads the same variables from whatever directory it is run.
        """
        env_file = self.env_file
        if folder is not None and "env_file" not in self.model_fields_set:
            env_file = folder / ".env"
        dotenv = {k: v for k, v in read_dotenv(env_file).items() if v is not None}
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
    the environment), since those two sources cannot locate themselves. A file of either that
    cannot be used raises ``SettingsError`` naming it.
    """
    with _bound(_Sources(environ)):
        located = _settings(overrides)
    secrets_dir = located.secrets_dir
    if secrets_dir is not None and not secrets_dir.is_dir():
        secrets_dir = None  # pydantic-settings would warn; a missing directory is just empty
    with _bound(_Sources(environ, located.env_file, secrets_dir)):
        return _settings(overrides)


def _settings(overrides: Mapping[str, Any]) -> ComposerSettings:
    """``ComposerSettings(**overrides)``; a source's own SettingsError unwrapped, since
    pydantic-settings rewraps it as "error getting value for field", naming no file."""
    try:
        return ComposerSettings(**overrides)
    except SourceError as e:
        if isinstance(e.__cause__, SettingsError):
            raise e.__cause__ from None
        raise


@dataclass(frozen=True)
class Variables:
    """Where ``${NAME}`` is looked up, first match wins: environment, ``.env``, secrets dir."""

    environ: Mapping[str, str]
    dotenv: Mapping[str, str] = field(default_factory=dict)
    secrets_dir: Path | None = None

    def get(self, name: str) -> str | None:
        """The value of ``name``, or None when no source has it.

        A secrets file that is no regular text file raises ``SettingsError``; any other
        ``OSError`` from reading it propagates, and the loader locates it.
        """
        if name in self.environ:
            return self.environ[name]
        if name in self.dotenv:
            return self.dotenv[name]
        if self.secrets_dir is not None and VARIABLE_NAME.fullmatch(name):
            text = read_settings_file(self.secrets_dir / name, "secret file")
            if text is not None:
                return text.rstrip("\r\n")
        return None
