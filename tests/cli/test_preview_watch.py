"""``composer preview --watch`` as a person runs it: a real process, the manifest edited under it.

Each change prints the preview again; a broken edit prints its located error instead of the
table; Ctrl-C (SIGINT) ends it with exit 0.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from interruptible import composer_command
from observe.conftest import write

WAIT_S = 60  # a bound that only catches a watch that never reacts


class Lines:
    """The lines a stream produced, read by a thread, waited for with a bound."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))

    def until(self, text: str) -> list[str]:
        """Lines up to the first that contains ``text``."""
        deadline = time.monotonic() + WAIT_S
        got: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{text!r} never came; got {got}") from None
            got.append(line)
            self.seen.append(line)
            if text in line:
                return got


def manifest(text: str) -> str:
    return f"version: 1\nbudget: 50\nproviders:\n  - {{name: rules, type: static, text: {json.dumps(text)}}}\n"


def test_preview_watch_runs_again_on_each_change_and_shows_a_broken_edit(tmp_path: Path) -> None:
    path = write(tmp_path / "m.yaml", manifest("First rules.\n"))
    env = {**os.environ, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    command = composer_command("preview", str(path), "--instruction", "x")
    with subprocess.Popen(
        [*command, "--watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        out, err = Lines(process.stdout), Lines(process.stderr)
        try:
            first = out.until("(watching")
            assert any(line.startswith("rules") and "fired" in line for line in first)
            assert "First rules." in first

            path.write_text(manifest("First rules.\n").replace("budget: 50", "budgett: 50"))
            out.until("changed, previewing again")
            located = err.until("m.yaml:2:1:")
            assert 'unknown key "budgett"' in located[-1]
            broken = out.until("(watching")
            assert not any(line.startswith("rules") for line in broken)  # the error, no table

            path.write_text(manifest("Second rules.\n"))
            fixed = out.until("(watching")
            assert "Second rules." in fixed
            assert any(line.startswith("rules") and "fired" in line for line in fixed)
        finally:
            process.send_signal(signal.SIGINT)
            try:
                code = process.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()  # fail, never hang the suite
                raise
    assert code == 0
