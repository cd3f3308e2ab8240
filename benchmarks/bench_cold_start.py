"""Cold start of ``composer`` commands, against loading the tokenizer alone (its floor: a turn
counts tokens, so it must load it).

Run from the repository root:  .venv/bin/python benchmarks/bench_cold_start.py [--runs N]

Each command runs N times in a fresh process, the commands interleaved round by round so that
a busy moment of the machine falls on all of them alike. A process reports its own CPU time
(user + system, every thread) as it exits, and its wall time is taken from outside; the figures
are the medians and their ratios to the tokenizer alone (``composer.tokens.encoding()``).
Beside it: tiktoken's own load of the same tokens (``load_tiktoken_bpe`` of the published file
and ``tiktoken.Encoding``, what ``tiktoken.get_encoding`` does from its cache), and the
libraries a preview of the bundled dev configs cannot do without, imported with the
tokenizer loaded: the floor of that preview whatever composer does. In process, reading the
vendored tokens is timed against parsing the published text line by line.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import composer.tokens  # noqa: E402

STATIC = "version: 1\nproviders:\n  - {name: rules, type: static, text: Answer briefly.}\n"
LIBRARIES = (
    "import pydantic, pydantic_settings, yaml, jinja2.sandbox, numpy, bm25s, Stemmer, "
    "markdown_it, httpx, sqlite3, asyncio"
)
"""What a preview of configs/ (static, file_corpus, memory and a disabled http) must import."""
REPORT = "import atexit, os, time\natexit.register(lambda: print(time.process_time(), file=open(os.environ['CPU_TO'], 'w')))\n"


def _cli(argv: list[str]) -> str:
    return (
        "import contextlib, io\nfrom composer.cli.main import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main({argv!r}) == 0\n"
    )


def _timed(code: str, report: Path) -> tuple[float, float]:
    """Wall seconds of ``python -c code`` in a fresh process, and the CPU seconds it reports."""
    env = {**os.environ, "CPU_TO": str(report)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", REPORT + code], check=True, cwd=REPO, env=env)
    wall = time.perf_counter() - start
    return wall, float(report.read_text())


def _lines_parse(text: bytes) -> dict[bytes, int]:
    """How tiktoken reads the published file: a loop over its lines."""
    ranks: dict[bytes, int] = {}
    for line in text.splitlines():
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
        Path(manifest).write_text(STATIC, encoding="utf-8")
        published = Path(folder) / "o200k_base.tiktoken"
        published.write_bytes(composer.tokens.vendored_o200k_base())
        tiktoken_load = (
            "import tiktoken, tiktoken.load, composer.tokens as t\n"
            f"tiktoken.Encoding(name='o200k_base', pat_str=t._PAT_STR, special_tokens="
            f"t._SPECIAL_TOKENS, mergeable_ranks=tiktoken.load.load_tiktoken_bpe({str(published)!r}))"
        )
        commands = {
            "python -c pass": "pass",
            "tokenizer alone": "import composer.tokens as t; t.encoding()",
            "tiktoken's own load": tiktoken_load,
            "libraries of a dev preview": f"import composer.tokens as t; t.encoding(); {LIBRARIES}",
            "composer validate (static)": _cli(["validate", manifest]),
            "composer preview (static)": _cli(
                ["preview", manifest, "--instruction", "the deploy failed"]
            ),
            "composer preview configs --env dev": _cli(
                [
                    "preview",
                    str(REPO / "configs"),
                    "--env",
                    "dev",
                    "--instruction",
                    "the deploy failed",
                ]
            ),
        }
        report = Path(folder) / "cpu"
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, code in commands.items():
                times[name].append(_timed(code, report))
    floor_wall = statistics.median(wall for wall, _ in times["tokenizer alone"])
    floor_cpu = statistics.median(cpu for _, cpu in times["tokenizer alone"])
    print(f"{runs} runs each, interleaved; medians, and their ratio to the tokenizer alone")
    print(f"{'command':36} {'wall ms':>8} {'ratio':>6} {'CPU ms':>8} {'ratio':>6}")
    for name, measured in times.items():
        wall = statistics.median(w for w, _ in measured)
        cpu = statistics.median(c for _, c in measured)
        print(
            f"{name:36} {wall * 1000:8.0f} {wall / floor_wall:6.2f} "
            f"{cpu * 1000:8.0f} {cpu / floor_cpu:6.2f}"
        )
    text = composer.tokens.vendored_o200k_base()
    vendored = _fastest(composer.tokens._read_ranks, runs)
    lines = _fastest(lambda: _lines_parse(text), runs)
    print(
        f"reading the vendored tokens: {vendored * 1000:.0f} ms, the published text line by "
        f"line {lines * 1000:.0f} ms ({lines / vendored:.1f}x)"
    )


if __name__ == "__main__":
    main()
