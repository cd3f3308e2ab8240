"""Files written inside one folder and nowhere else, for ``composer init DIR``.

DIR may already hold what someone else put there: ``prod.yaml`` as a symlink to a file
outside, ``corpus`` as a symlink to another folder, a hard link to a file elsewhere. Nothing
under DIR is followed. Every path is checked first (each folder on the way and the
file itself, by ``lstat``) and only when all are fine is anything written, so a refusal leaves
the folder as it was. A folder on the way that is a symlink is refused, whatever ``replace``
says; a file that exists is refused unless ``replace``, and then replaced by renaming a new
file over its name, which replaces a symlink or a hard link itself, never what it points to.

The writes do not trust the check: each folder is opened relative to its parent's
descriptor with ``O_NOFOLLOW | O_DIRECTORY`` (made there first when missing), each new file
is created relative to its folder's descriptor with ``O_CREAT | O_EXCL | O_NOFOLLOW``, and
a replacement is such a new file renamed over the old name within that folder. So a link
planted between the check and the write (by someone who can write in DIR) makes the write
stop with an error naming the path, never follow the link; files written before it stay.
DIR itself is taken as named: a link the operator made for DIR is followed, since it is the
operator's choice of folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from composer.errors import ComposerError

__all__ = ["write_inside"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC


def _plan(folder: Path, names: list[str], *, replace: bool) -> None:
    """Raise ``ComposerError`` unless every one of ``names`` (relative POSIX paths) can be
    written under ``folder`` without following a link; touches nothing."""
    if folder.exists() and not folder.is_dir():
        raise ComposerError(f"not a folder: {folder}")
    links: dict[Path, str] = {}
    not_folders: dict[Path, None] = {}
    existing: list[Path] = []
    for name in names:
        path = folder
        *folders, file = _parts(name)
        for part in folders:
            path = path / part
            kind = _kind(path)
            if kind == "link":
                links[path] = _link_target(path)
            elif kind not in (None, "folder"):
                not_folders[path] = None
            if kind != "folder":
                break
        else:
            path = path / file
            kind = _kind(path)
            if kind == "folder":
                not_folders[path] = None  # a folder where the file goes: no rename replaces it
            elif kind is not None:
                existing.append(path)
    if links:
        shown = "; ".join(f"{path} is a symbolic link to {to}" for path, to in links.items())
        raise ComposerError(
            f"{shown}: composer init writes only inside {folder} and follows no link there "
            "(--force or not); remove the link or choose another folder"
        )
    if not_folders:
        raise ComposerError(
            f"{_listed(list(not_folders))}: in the way (a folder where a file goes, or a file "
            "where a folder goes); move it or choose another folder"
        )
    if existing and not replace:
        raise ComposerError(
            f"{len(existing)} of the files exist already ({_listed(existing)}); use --force "
            "to replace them (a symbolic link is replaced itself, never what it points to)"
        )


def write_inside(folder: Path, files: Mapping[str, str], *, replace: bool) -> list[Path]:
    """Write ``files`` (relative POSIX path -> UTF-8 text) under ``folder`` (made if missing),
    in order, once the check found every path fine; the paths written.

    A path that changed since the check (a link or a file planted meanwhile), or a file that
    cannot be written, is a ``ComposerError`` naming it; nothing outside ``folder`` is written.
    """
    _plan(folder, list(files), replace=replace)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        root = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    except OSError as e:
        raise ComposerError(f"cannot write {folder}: {e.strerror or e}") from e
    written: list[Path] = []
    try:
        for name, text in files.items():
            path = folder / name
            try:
                _write(root, _parts(name), text.encode("utf-8"), replace=replace)
            except OSError as e:
                raise ComposerError(f"cannot write {path}: {_why(e)}") from e
            written.append(path)
    finally:
        os.close(root)
    return written


def _write(root: int, parts: list[str], data: bytes, *, replace: bool) -> None:
    """``data`` into ``parts`` under the folder ``root``, every folder opened O_NOFOLLOW."""
    *folders, file = parts
    opened: list[int] = []
    try:
        parent = root
        for part in folders:
            with contextlib.suppress(FileExistsError):  # a link there is EEXIST, not followed
                os.mkdir(part, dir_fd=parent)
            parent = os.open(part, _DIR_FLAGS, dir_fd=parent)
            opened.append(parent)
        if not replace:
            _create(parent, file, data)
            return
        temporary = f".{file}.{secrets.token_hex(8)}.tmp"
        _create(parent, temporary, data)
        try:
            os.replace(temporary, file, src_dir_fd=parent, dst_dir_fd=parent)
        except OSError:
            os.unlink(temporary, dir_fd=parent)
            raise
    finally:
        for fd in opened:
            os.close(fd)


def _create(dir_fd: int, name: str, data: bytes) -> None:
    """A new file ``name`` in the folder ``dir_fd`` holding ``data``; one that exists, or a
    link, is an error (``O_EXCL``)."""
    fd = os.open(name, _NEW_FILE, 0o666, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _why(error: OSError) -> str:
    if error.errno in (errno.ELOOP, errno.ENOTDIR):
        return "a folder on the way became a symbolic link or a file since the check; not followed"
    if error.errno == errno.EEXIST:
        return "something was put there since the check (a file or a link); left as it is"
    return error.strerror or str(error)


def _parts(name: str) -> list[str]:
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"not a plain relative path: {name!r}")
    return parts


def _kind(path: Path) -> str | None:
    """``folder``, ``link``, ``file`` (anything else), or None when nothing is there."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return "file"  # a parent is a file: reported at that parent
    except OSError as e:
        raise ComposerError(f"cannot check {path}: {e.strerror or e}") from e
    if stat.S_ISLNK(mode):
        return "link"
    return "folder" if stat.S_ISDIR(mode) else "file"


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _listed(paths: list[Path]) -> str:
    shown = ", ".join(str(path) for path in paths[:3])
    return shown + (", ..." if len(paths) > 3 else "")
