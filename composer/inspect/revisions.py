"""A manifest folder as it was at a git revision, for ``composer diff --rev A..B``.

The folder (with everything under it: overlays, a corpus, a JSONL file) is exported from git
into a temporary directory with ``git archive`` and read from there like any folder; nothing
in the working tree or the repository changes. A base outside the folder (``extends:
../shared/base.yaml``) is refused as outside it, as it is for any load.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from composer.errors import SettingsError
from composer.manifest.settings import read_settings_file

__all__ = ["Checkout", "checkout", "split_range"]


@dataclass(frozen=True)
class Checkout:
    """``path`` as it was at ``rev`` (``None``: the working tree), exported under ``root``."""

    rev: str | None
    path: str  # what to load: the exported copy of the manifest path
    root: str = ""  # the export's folder, standing for ``label``
    label: str = ""  # the manifest folder as given on the command line, with a trailing /
    dotenv: str = ""  # the working tree's .env read in place of one not committed at ``rev``

    @property
    def note(self) -> str | None:
        """What to tell of the variables this side reads when they are not the revision's."""
        if not self.dotenv:
            return None
        return (
            f"no {self.dotenv} at {self.rev} (not committed): "
            f"its variables are read from the working tree's {self.dotenv}"
        )

    def shown(self, text: str) -> str:
        """``text`` with the export's folder written ``REV:folder/``, the way git names a file."""
        return text if self.rev is None else text.replace(self.root, f"{self.rev}:{self.label}")


def split_range(spec: str) -> tuple[str, str | None]:
    """``A..B`` -> (A, B); ``A..`` -> (A, HEAD) as git reads it; ``A`` -> (A, None), which
    compares A with the working tree."""
    old, dots, new = spec.partition("..")
    if not old or new.startswith("."):
        raise SettingsError(f'--rev "{spec}": expected A..B, A.. or A (against the working tree)')
    if not dots:
        return old, None
    return old, new or "HEAD"


def _git(folder: Path, *args: str) -> bytes:
    try:
        result = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, check=False, timeout=120
        )
    except OSError as e:
        raise SettingsError(f"cannot run git: {e.strerror or e}") from e
    if result.returncode != 0:
        message = result.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SettingsError(f"git {args[0]}: {message[-1] if message else 'failed'}")
    return result.stdout


@contextmanager
def checkout(path: str, rev: str | None, *, dotenv: bool = False) -> Iterator[Checkout]:
    """``path`` (a manifest file or folder in a git work tree) as it was at ``rev``.

    With ``rev=None`` the working tree itself. The export is removed on exit. With
    ``dotenv``, a ``.env`` beside the manifest that the revision lacks (it is gitignored,
    holding secrets) is the working tree's, copied into the export (a folder of this user's
    alone), so both sides read the same variables (``Checkout.dotenv`` says so).
    """
    if rev is None:
        yield Checkout(None, path, "")
        return
    target = Path(path).absolute()
    folder = target if target.is_dir() else target.parent
    top = Path(_git(folder, "rev-parse", "--show-toplevel").decode().strip())
    inside = folder.resolve().relative_to(top.resolve()).as_posix()
    spec = f"{rev}:{inside}" if inside != "." else f"{rev}:"
    data = _git(top, "archive", "--format=tar", spec)
    with tempfile.TemporaryDirectory(prefix="composer-rev-") as tmp:
        export = Path(tmp) / (folder.name or "root")
        export.mkdir()
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            archive.extractall(export, filter="data")
        loaded = export if target.is_dir() else export / target.name
        given = os.fspath(path) if target.is_dir() else os.path.dirname(os.fspath(path))
        label = "" if given in ("", ".") else os.path.join(given, "")
        shared = dotenv and _share_dotenv(folder / ".env", export / ".env")
        root = os.path.join(os.fspath(export), "")
        yield Checkout(rev, os.fspath(loaded), root, label, f"{label}.env" if shared else "")


def _share_dotenv(source: Path, target: Path) -> bool:
    """Copy the working tree's ``.env`` (``source``) to ``target`` when the revision has none
    there and the working tree has one; whether it did. Read as the loader reads it (a
    regular UTF-8 file of at most 1 MiB: ``SettingsError`` otherwise), written 0600."""
    if os.path.lexists(target) or not os.path.lexists(source) or source.is_dir():
        return False
    try:
        text = read_settings_file(source, ".env file")
    except OSError as e:
        raise SettingsError(f'.env file "{source}": {e.strerror or e}') from e
    if text is None:
        return False
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    return True
