"""The one way a provider reads files from disk: confined to a root, never following links.

A corpus root is operator-controlled but its contents may not be: a symlink to ``/etc``, a
FIFO that blocks ``open()`` forever, a device, a file that grows while being read. Every
check happens on the open file descriptor, not on a path that could change in between.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger("builtin_providers.file_corpus")

__all__ = ["ConfinedReader", "GlobSet", "SkipFile", "WalkStats"]

_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)  # the last component may not be a symlink
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once instead of waiting for a writer
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class SkipFile(Exception):
    """A file the reader refuses; ``reason`` is one of the WalkStats counter names."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        super().__init__(detail)


def _glob_regex(pattern: str) -> str:
    """A glob as a regex over POSIX relative paths: ``**`` crosses folders, ``*`` does not."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


class GlobSet:
    """Include/exclude globs matched against paths relative to the root (``a/b.md``)."""

    def __init__(self, include: Sequence[str], exclude: Sequence[str]) -> None:
        self._include = [re.compile(_glob_regex(p)) for p in include]
        self._exclude = [re.compile(_glob_regex(p)) for p in exclude]
        # "dir/**" excludes a whole folder: skip walking it at all.
        self._prune = [re.compile(_glob_regex(p[:-3])) for p in exclude if p.endswith("/**")]

    def matches(self, relative: str) -> bool:
        return any(r.fullmatch(relative) for r in self._include) and not any(
            r.fullmatch(relative) for r in self._exclude
        )

    def prunes(self, relative_dir: str) -> bool:
        return any(r.fullmatch(relative_dir) for r in self._prune)


@dataclass
class WalkStats:
    """What a walk and the reads after it skipped, by reason (each is also logged)."""

    symlinks: int = 0
    not_regular: int = 0
    outside_root: int = 0
    too_large: int = 0
    undecodable: int = 0
    unreadable: int = 0
    over_file_count: int = 0
    over_total_bytes: int = 0
    examples: dict[str, str] = field(default_factory=dict)

    def count(self, reason: str, path: str, detail: str = "") -> None:
        """Count one skipped file; log it, except the cap overflows (summarised by the caller)."""
        setattr(self, reason, getattr(self, reason) + 1)
        self.examples.setdefault(reason, path)
        if not reason.startswith("over_"):
            logger.warning("skipped %s: %s", path, detail or reason.replace("_", " "))

    @property
    def skipped(self) -> int:
        return sum(
            getattr(self, name)
            for name in (
                "symlinks",
                "not_regular",
                "outside_root",
                "too_large",
                "undecodable",
                "unreadable",
                "over_file_count",
                "over_total_bytes",
            )
        )


class ConfinedReader:
    """Lists and reads regular files under ``root``; nothing outside it, no link followed."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve(strict=True)
        if not self.root.is_dir():
            raise NotADirectoryError(f"corpus root is not a folder: {root}")

    def walk(self, globs: GlobSet, stats: WalkStats) -> Iterator[tuple[str, os.stat_result]]:
        """``(relative POSIX path, lstat)`` of matching regular files, sorted, links skipped."""
        stack = [""]
        while stack:
            relative_dir = stack.pop()
            try:
                with os.scandir(self.root / relative_dir) as entries:
                    listed = sorted(entries, key=lambda e: e.name)
            except OSError:
                stats.count("unreadable", relative_dir or ".")
                continue
            subdirs: list[str] = []
            for entry in listed:
                relative = f"{relative_dir}/{entry.name}" if relative_dir else entry.name
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    stats.count("unreadable", relative)
                    continue
                if stat.S_ISLNK(info.st_mode):
                    if globs.matches(relative) or stat.S_ISDIR(_target_mode(entry.path)):
                        stats.count("symlinks", relative, "symlink (links are never followed)")
                    continue
                if stat.S_ISDIR(info.st_mode):
                    if not globs.prunes(relative):
                        subdirs.append(relative)
                    continue
                if not globs.matches(relative):
                    continue
                if not stat.S_ISREG(info.st_mode):
                    stats.count("not_regular", relative)
                    continue
                yield relative, info
            stack.extend(reversed(subdirs))

    def read(self, relative: str, max_bytes: int) -> bytes:
        """The bytes of one regular file under the root, or SkipFile saying why not."""
        path = self.root / relative
        try:
            if not path.resolve().is_relative_to(self.root):
                raise SkipFile("outside_root", "resolves outside the corpus root")
            fd = os.open(path, _OPEN_FLAGS)
        except SkipFile:
            raise
        except OSError as e:
            if os.path.islink(path):
                raise SkipFile("symlinks", "is a symlink") from e
            raise SkipFile("unreadable", f"{e.strerror or e}") from e
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise SkipFile("not_regular", "not a regular file")
            if info.st_size > max_bytes:
                raise SkipFile("too_large", f"{info.st_size} bytes > {max_bytes}")
            chunks: list[bytes] = []
            size = 0
            while size <= max_bytes:
                chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > max_bytes:
                raise SkipFile("too_large", f"grew past {max_bytes} bytes")
            return b"".join(chunks)
        except OSError as e:
            raise SkipFile("unreadable", f"{e.strerror or e}") from e
        finally:
            os.close(fd)


def _target_mode(path: str) -> int:
    try:
        return os.stat(path).st_mode
    except OSError:
        return 0
