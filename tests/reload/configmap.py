"""A ConfigMap volume as the kubelet's atomic writer keeps it, for the tests of reloads.

The kubelet writes each version of a ConfigMap into a new timestamped folder
(``..2026_12_06_02_50_13.000000001``), points a ``..data_tmp`` link at it and renames that
link over ``..data`` (one atomic swap), then makes a link per top-level name
(``dev.yaml -> ..data/dev.yaml``) and removes the previous folder. The files the pod reads
are links whose own path, target and timestamps never change across updates: only what
``..data`` points at does.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ConfigMapVolume", "version"]


class ConfigMapVolume:
    """The folder ``root``, written as the kubelet writes a ConfigMap's volume."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self._versions = 0

    def publish(self, files: Mapping[str, str]) -> Path:
        """Make ``files`` (path in the volume -> text) the volume's content, atomically; the
        new timestamped folder."""
        self._versions += 1
        stamp = time.strftime("..%Y_%m_%d_%H_%M_%S", time.gmtime())
        version = self.root / f"{stamp}.{self._versions:09d}"
        for name, text in files.items():
            target = version / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        data = self.root / "..data"
        old = os.readlink(data) if data.is_symlink() else None
        swap = self.root / "..data_tmp"
        swap.symlink_to(version.name)
        os.replace(swap, data)  # the one atomic step
        tops = {Path(name).parts[0] for name in files}
        for top in tops:
            link = self.root / top
            if not link.is_symlink():
                link.symlink_to(Path("..data") / top)
        for entry in self.root.iterdir():
            if entry.is_symlink() and not entry.name.startswith("..") and entry.name not in tops:
                entry.unlink()
        if old is not None:
            shutil.rmtree(self.root / old)
        return version


def version(number: int, *, broken: bool = False) -> dict[str, str]:
    """Two files of one version: each names it, so a turn shows which version each came from."""
    base = (
        "version: 1\nbudget: 500\nproviders:\n"
        f"  - {{name: base, type: static, priority: 2, text: 'base v{number}'}}\n"
    )
    key = "budgett" if broken else "budget"
    dev = (
        f"extends: base.yaml\n{key}: 400\nproviders:\n"
        f"  - {{name: dev, type: static, priority: 1, text: 'dev v{number}'}}\n"
    )
    return {"base.yaml": base, "dev.yaml": dev}
