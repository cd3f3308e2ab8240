"""What a loaded manifest was read from, and whether any of it changed since.

A manifest depends on its file, every file it ``extends``, the ``.env`` files (the one beside
the manifest that its ``${VAR}``s read unless ``COMPOSER_ENV_FILE`` names another, and the
working directory's, which may hold ``COMPOSER_*`` settings) and the secrets directory (the
process environment cannot change under a running process). ``Inputs`` names them;
``snapshot`` digests each (a file's bytes, a folder's regular files), so a change is a digest
that differs, whatever the file system's timestamps say: two edits within one clock tick, or
an editor that writes a new file and renames it, are seen alike.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from composer.errors import ComposerError, ManifestError
from composer.manifest.models import Manifest
from composer.manifest.settings import MAX_SETTINGS_FILE_BYTES, load_settings
from composer.manifest.yamlnodes import MAX_BYTES, read_regular_file

__all__ = ["Digests", "Inputs", "has_watchfiles", "snapshot"]

_MAX_FOLDER_FILES = 256  # a secrets folder holds a few files; past this its rest is not read

Digests = dict[tuple[str, Path], str]
"""``("file" | "folder", path) -> digest`` of each input, as ``snapshot`` reads them."""


@dataclass(frozen=True)
class Inputs:
    """The files and folders (secrets) a manifest was loaded from, as absolute paths."""

    files: frozenset[Path]
    folders: frozenset[Path] = frozenset()

    def __or__(self, other: Inputs) -> Inputs:
        return Inputs(self.files | other.files, self.folders | other.folders)

    def keys(self) -> set[tuple[str, Path]]:
        return {("file", f) for f in self.files} | {("folder", f) for f in self.folders}

    @property
    def directories(self) -> frozenset[Path]:
        """The folders to watch for events: each file's, and each secrets folder."""
        found = {f.parent for f in self.files} | set(self.folders)
        return frozenset(d for d in found if d.is_dir())

    @classmethod
    def of(
        cls,
        manifest: Manifest | None,
        *,
        path: str | os.PathLike[str] | None,
        env: str | None,
        environ: Mapping[str, str] | None,
        error: ManifestError | None = None,
    ) -> Inputs:
        """The inputs of ``manifest`` (or of a load that failed with ``error``), and always the
        entry file that ``path`` and ``env`` name and the settings' ``.env`` and secrets folder."""
        files: set[Path] = set()
        folders: set[Path] = set()
        try:
            settings = load_settings(environ)
        except ComposerError:
            settings = None
        if settings is not None:
            if settings.env_file is not None:
                files.add(settings.env_file.expanduser().absolute())
            if settings.secrets_dir is not None:
                folders.add(settings.secrets_dir.expanduser().absolute())
            path = path if path is not None else settings.manifest
            env = env or settings.env
        if path is not None:
            entry = Path(path).absolute()
            if entry.is_dir() and env:
                entry = entry / f"{env}.yaml"
            files.add(entry)
            if settings is not None and "env_file" not in settings.model_fields_set:
                files.add(entry.parent / ".env")  # ${VAR}'s .env: the one beside the manifest
        if manifest is not None:
            if manifest.path is not None:
                files.add(manifest.path.absolute())
            files.update(Path(origin.path).absolute() for origin in manifest.origins.values())
        if error is not None:
            files.update(Path(e.path).absolute() for e in error.errors)
        return cls(frozenset(files), frozenset(folders))


def snapshot(inputs: Inputs, keys: Iterable[tuple[str, Path]] | None = None) -> Digests:
    """A digest of each input (or of those in ``keys``): what is there now, missing included."""
    wanted = inputs.keys() if keys is None else set(keys)
    return {
        key: _digest_file(key[1]) if key[0] == "file" else _digest_folder(key[1]) for key in wanted
    }


def _digest_file(path: Path, limit: int = MAX_BYTES) -> str:
    try:
        data = read_regular_file(path, limit)
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError) as e:  # unreadable, a FIFO: loading says what is wrong
        return f"unreadable: {type(e).__name__}"
    return hashlib.sha256(data).hexdigest()


def _digest_folder(folder: Path) -> str:
    digest = hashlib.sha256()
    try:
        names = sorted(entry.name for entry in os.scandir(folder))[:_MAX_FOLDER_FILES]
    except OSError:
        return "missing"
    for name in names:
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(_digest_file(folder / name, MAX_SETTINGS_FILE_BYTES).encode() + b"\0")
    return digest.hexdigest()


def has_watchfiles() -> bool:
    """Whether watchfiles (file events instead of polling) can be imported."""
    try:
        import watchfiles  # noqa: F401
    except ImportError:
        return False
    return True
