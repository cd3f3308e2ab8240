"""Cold start of ``composer preview`` on a manifest of static texts, against loading the
tokenizer alone (its floor: a turn counts tokens, so it must load it).

Run from the repository root:  .venv/bin/python benchmarks/bench_cold_start.py [--runs N]

Each command runs N times in a fresh process, the commands interleaved round by round so that
a busy moment of the machine falls on all of them alike; the figures are the fastest run's
wall time and CPU time (user + system of the child) and their ratios to the tokenizer alone:
``python -c pass``; the tokenizer alone (``composer.tokens.encoding()``); ``composer validate``
and ``composer preview`` of a one-provider static manifest. In process, reading the rank file the way this version does is timed against the line-by-line
parse it replaced (the fastest of N rounds each).
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import composer.tokens  # noqa: E402

MANIFEST = "version: 1\nproviders:\n  - {name: rules, type: static, text: Answer briefly.}\n"


def _cli(argv: list[str]) -> str:
    return (
        "import contextlib, io\nfrom composer.cli.main import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main({argv!r}) == 0\n"
    )


def _timed(code: str) -> tuple[float, float]:
    """Wall and CPU seconds of ``python -c code`` in a fresh process."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu


def _lines_parse() -> dict[bytes, int]:
    """The parse before this version: a loop over the file's lines."""
    ranks: dict[bytes, int] = {}
    for line in composer.tokens.vendored_o200k_base().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _fastest(function: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as folder:
        manifest = str(Path(folder) / "static.yaml")
        Path(manifest).write_text(MANIFEST, encoding="utf-8")
        preview = ["preview", manifest, "--instruction", "the deploy failed"]
        commands = {
            "python -c pass": "pass",
            "tokenizer alone": "import composer.tokens as t; t.encoding()",
            "composer validate (static)": _cli(["validate", manifest]),
            "composer preview (static)": _cli(preview),
        }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, code in commands.items():
                times[name].append(_timed(code))
    floor_wall = min(wall for wall, _ in times["tokenizer alone"])
    floor_cpu = min(cpu for _, cpu in times["tokenizer alone"])
    print(f"{runs} runs each, interleaved; fastest run, and its ratio to the tokenizer alone")
    print(f"{'command':34} {'wall ms':>8} {'ratio':>6} {'CPU ms':>8} {'ratio':>6}")
    for name, measured in times.items():
        wall = min(w for w, _ in measured)
        cpu = min(c for _, c in measured)
        print(
            f"{name:34} {wall * 1000:8.0f} {wall / floor_wall:6.2f} "
            f"{cpu * 1000:8.0f} {cpu / floor_cpu:6.2f}"
        )
    counted = _fastest(composer.tokens._read_ranks, runs)
    lines = _fastest(_lines_parse, runs)
    print(
        f"reading the rank file: {counted * 1000:.0f} ms, line by line {lines * 1000:.0f} ms "
        f"({lines / counted:.1f}x)"
    )


if __name__ == "__main__":
    main()
