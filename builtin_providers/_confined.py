"""The one way a provider reads files from disk: confined to a root, never following links.

A corpus root is operator-controlled but its contents may not be: a symlink to ``/etc``, a
hard link to a file outside, a folder swapped for a symlink while the index is built, a FIFO
that blocks ``open()`` forever, a device, a file that grows while being read. Folders are
walked and files opened relative to folder descriptors, each opened with ``O_NOFOLLOW``, never
through a path that could change in between; every check happens on the open descriptor.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

logger = logging.getLogger("builtin_providers.file_corpus")

__all__ = ["MAX_FOLDER_DEPTH", "ConfinedReader", "Glob", "GlobSet", "SkipFile", "WalkStats"]

MAX_FOLDER_DEPTH = 128
"""Folders nested deeper than this are not walked (each open level holds a descriptor)."""

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # the last component may not be a symlink
_OPEN_FLAGS = (
    os.O_RDONLY
    | _NOFOLLOW
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once instead of waiting for a writer
    | getattr(os, "O_NOCTTY", 0)
    | _CLOEXEC
)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC


class SkipFile(Exception):
    """A file the reader refuses; ``reason`` is one of the WalkStats counter names."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        super().__init__(detail)


def _class_regex(body: str, negate: bool, pattern: str) -> str:
    """A ``[...]`` body as a regex class; a reversed range (``z-a``) is a ValueError."""
    items: list[str] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            low, high = body[k], body[k + 2]
            if low > high:
                raise ValueError(f"glob {pattern!r}: bad range {low}-{high} in [...]")
            items.append(f"{re.escape(low)}-{re.escape(high)}")
            k += 3
        else:
            items.append(re.escape(body[k]))
            k += 1
    return "[" + ("^" if negate else "") + "".join(items) + "]"


def _class_end(text: str, start: int) -> int:
    """Where the class opened just before ``start`` ends (its ``]``), or -1 if it never does."""
    if text[start : start + 1] in ("!", "^"):
        start += 1
    return text.find("]", start + 1)  # a `]` first in the class is one of its characters


def _segment(text: str, pattern: str) -> str | re.Pattern[str]:
    """One path segment of a glob: itself when literal, else a regex that cannot backtrack.

    ``*`` and ``?`` never cross a folder (a segment has no ``/``); ``[...]`` is a class,
    ``[!...]`` or ``[^...]`` its negation, ``]`` first in it is literal, an unclosed ``[`` is
    literal. Text between two stars is matched at its first occurrence inside an atomic group,
    as ``fnmatch`` does: no star ever retries, so a match is polynomial in the segment length.
    """
    chunks = [""]  # regex text between stars
    wild = False
    i = 0
    while i < len(text):
        char = text[i]
        i += 1
        end = _class_end(text, i) if char == "[" else -1
        if char == "*":
            chunks.append("")
        elif char == "?":
            chunks[-1] += "."
        elif end != -1:
            negate = text[i] in "!^"
            chunks[-1] += _class_regex(text[i + negate : end], negate, pattern)
            i = end + 1
        else:
            chunks[-1] += re.escape(char)
            continue
        wild = True
    if not wild:
        return text
    if len(chunks) == 1:
        return re.compile(chunks[0], re.S)
    head, *middle, tail = chunks
    return re.compile(head + "".join(f"(?>.*?{m})" for m in middle) + ".*" + tail, re.S)


_Run = list[str | re.Pattern[str]]


def _fits(run: _Run, parts: Sequence[str], at: int) -> bool:
    """Whether the segments of ``run`` match ``parts[at:at + len(run)]``."""
    for segment, part in zip(run, parts[at : at + len(run)], strict=True):
        if isinstance(segment, str):
            if part != segment:
                return False
        elif segment.fullmatch(part) is None:
            return False
    return True


class Glob:
    """One include/exclude glob, matched segment by segment: never catastrophic backtracking.

    ``**`` must be a whole segment: ``**/x`` is ``x`` in any folder, the root included;
    ``a/**`` is everything under ``a``. Between two ``**`` stands a fixed-length run of
    segments; like text between two stars, each such run is matched at its first fit, so a
    match costs at most (path segments) x (glob segments) segment tests, whatever the number
    of ``**``. A bad glob is a ValueError, raised here, when the manifest is loaded.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        texts = pattern.split("/")
        if "" in texts:
            raise ValueError(
                f"glob {pattern!r}: empty path segment (a glob is relative to root: no "
                "leading, trailing or double '/')"
            )
        runs: list[_Run] = [[]]
        for text in texts:
            if text == "**":
                if runs[-1] or len(runs) == 1:  # `**/**` is one `**`
                    runs.append([])
            elif "**" in text:
                raise ValueError(
                    f"glob {pattern!r}: '**' must be a whole path segment (e.g. **/*.md)"
                )
            else:
                runs[-1].append(_segment(text, pattern))
        self._runs = runs

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r})"

    def matches(self, relative: str) -> bool:
        """Whether the POSIX relative path ``relative`` (``a/b.md``) matches."""
        return self.matches_parts(relative.split("/"))

    def matches_parts(self, parts: Sequence[str]) -> bool:
        """``matches`` for a path already split on ``/``."""
        if len(self._runs) == 1:
            return len(parts) == len(self._runs[0]) and _fits(self._runs[0], parts, 0)
        first, *middle, last = self._runs
        tail_at = len(parts) - len(last)
        if tail_at < len(first) or not _fits(first, parts, 0):
            return False
        at = len(first)
        for run in middle:
            starts = range(at, tail_at - len(run) + 1)
            fit = next((start for start in starts if _fits(run, parts, start)), None)
            if fit is None:
                return False
            at = fit + len(run)
        if not last:  # a trailing `**` stands for one segment or more
            return at < len(parts)
        return _fits(last, parts, tail_at)


class GlobSet:
    """Include/exclude globs matched against paths relative to the root (``a/b.md``)."""

    def __init__(self, include: Sequence[str], exclude: Sequence[str]) -> None:
        self._include = [Glob(p) for p in include]
        self._exclude = [Glob(p) for p in exclude]
        # "dir/**" excludes a whole folder: skip walking it at all.
        self._prune = [Glob(p[:-3]) for p in exclude if p.endswith("/**")]

    def matches(self, relative: str) -> bool:
        parts = relative.split("/")
        return any(g.matches_parts(parts) for g in self._include) and not any(
            g.matches_parts(parts) for g in self._exclude
        )

    def prunes(self, relative_dir: str) -> bool:
        parts = relative_dir.split("/")
        return any(g.matches_parts(parts) for g in self._prune)


@dataclass
class WalkStats:
    """What a walk and the reads after it skipped, by reason (each is also logged)."""

    symlinks: int = 0
    hard_links: int = 0
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
        return sum(getattr(self, f.name) for f in fields(self) if f.name != "examples")


def _strerror(error: OSError) -> str:
    return error.strerror or str(error)


def _is_link(name: str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _target_mode(name: str, dir_fd: int) -> int:
    try:
        return os.stat(name, dir_fd=dir_fd).st_mode
    except OSError:
        return 0


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


class ConfinedReader:
    """Lists and reads regular files under ``root``; nothing outside it, no link followed.

    A file with more than one name (``st_nlink > 1``) is refused unless ``allow_hard_links``:
    a hard link inside the root may be the same file as one outside it, and nothing on the
    descriptor tells which name is the original.
    """

    def __init__(self, root: Path, *, allow_hard_links: bool = False) -> None:
        self.root = root.resolve(strict=True)
        self.allow_hard_links = allow_hard_links
        if not self.root.is_dir():
            raise NotADirectoryError(f"corpus root is not a folder: {root}")

    def _open(self, name: str, flags: int, dir_fd: int | None) -> int:
        """``name`` opened relative to ``dir_fd`` (a folder descriptor), or SkipFile."""
        try:
            return os.open(name, flags, dir_fd=dir_fd)
        except OSError as e:
            if e.errno == errno.ELOOP or _is_link(name, dir_fd):
                raise SkipFile("symlinks", "symlink (links are never followed)") from e
            raise SkipFile("unreadable", _strerror(e)) from e

    def walk(self, globs: GlobSet, stats: WalkStats) -> Iterator[tuple[str, os.stat_result]]:
        """``(relative POSIX path, lstat)`` of matching regular files, sorted, links skipped.

        Each folder is opened relative to its parent's descriptor with ``O_NOFOLLOW``: a
        folder swapped for a symlink mid-walk is refused, never entered.
        """
        try:
            fd = self._open(str(self.root), _DIR_FLAGS, None)
        except SkipFile as skip:
            stats.count(skip.reason, ".", str(skip))
            return
        relative_dir = ""
        # The open folders from the root down: descriptor, relative path, subfolders to walk.
        levels: list[tuple[int, str, list[str]]] = []
        try:
            while True:
                levels.append((fd, relative_dir, []))
                subdirs = yield from self._scan(fd, relative_dir, globs, stats)
                levels[-1][2].extend(reversed(subdirs))
                fd = -1
                while fd < 0 and levels:
                    parent, parent_dir, pending = levels[-1]
                    if not pending:
                        os.close(levels.pop()[0])
                        continue
                    name = pending.pop()
                    relative_dir = _join(parent_dir, name)
                    if len(levels) >= MAX_FOLDER_DEPTH:
                        stats.count("unreadable", relative_dir, f"{MAX_FOLDER_DEPTH} folders deep")
                        continue
                    try:
                        fd = self._open(name, _DIR_FLAGS, parent)
                    except SkipFile as skip:
                        stats.count(skip.reason, relative_dir, str(skip))
                if fd < 0:
                    return
        finally:
            for level in levels:
                os.close(level[0])

    def _scan(
        self, fd: int, relative_dir: str, globs: GlobSet, stats: WalkStats
    ) -> Generator[tuple[str, os.stat_result], None, list[str]]:
        """Yield the matching files of one open folder; return its subfolders to walk."""
        try:
            with os.scandir(fd) as entries:
                listed = sorted(entries, key=lambda e: e.name)
        except OSError as e:
            stats.count("unreadable", relative_dir or ".", _strerror(e))
            return []
        subdirs: list[str] = []
        for entry in listed:
            relative = _join(relative_dir, entry.name)
            try:
                info = entry.stat(follow_symlinks=False)  # fstatat() on the folder descriptor
            except OSError as e:
                stats.count("unreadable", relative, _strerror(e))
                continue
            if stat.S_ISLNK(info.st_mode):
                if globs.matches(relative) or stat.S_ISDIR(_target_mode(entry.name, fd)):
                    stats.count("symlinks", relative, "symlink (links are never followed)")
                continue
            if stat.S_ISDIR(info.st_mode):
                if not globs.prunes(relative):
                    subdirs.append(entry.name)
                continue
            if not globs.matches(relative):
                continue
            if not stat.S_ISREG(info.st_mode):
                stats.count("not_regular", relative)
                continue
            if info.st_nlink > 1 and not self.allow_hard_links:
                stats.count("hard_links", relative, self._hard_link(info))
                continue
            yield relative, info
        return subdirs

    @staticmethod
    def _hard_link(info: os.stat_result) -> str:
        return f"hard link ({info.st_nlink} names; allow_hard_links is off)"

    def read(self, relative: str, max_bytes: int) -> bytes:
        """The bytes of one regular file under the root, or SkipFile saying why not.

        Every folder on the way is opened relative to the one before, with ``O_NOFOLLOW``.
        """
        *folders, name = relative.split("/")
        if any(part in ("", ".", "..") for part in (*folders, name)):
            raise SkipFile("outside_root", "resolves outside the corpus root")
        opened: list[int] = []
        try:
            opened.append(self._open(str(self.root), _DIR_FLAGS, None))
            for folder in folders:
                opened.append(self._open(folder, _DIR_FLAGS, opened[-1]))
            fd = self._open(name, _OPEN_FLAGS, opened[-1])
        finally:
            for dir_fd in opened:
                os.close(dir_fd)
        try:
            return self._read_open(fd, max_bytes)
        except OSError as e:
            raise SkipFile("unreadable", _strerror(e)) from e
        finally:
            os.close(fd)

    def _read_open(self, fd: int, max_bytes: int) -> bytes:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SkipFile("not_regular", "not a regular file")
        if info.st_nlink > 1 and not self.allow_hard_links:
            raise SkipFile("hard_links", self._hard_link(info))
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
