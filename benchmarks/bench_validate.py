"""Start-up and validation cost of the ``composer`` command, as ratios to ``python -c pass``.

Run from the repository root:  .venv/bin/python benchmarks/bench_validate.py [--runs N]

Each command runs N times in a fresh subprocess next to the floor every command pays,
``python -c pass``, measured the same way in the same run; the ratio is of the fastest runs
(the least disturbed by other work on the machine), the median is shown too: ``--version``,
``--help``, ``validate`` on each bundled environment, ``validate --all-envs --no-interpolate``
on the bundled folder, and ``validate`` on a generated 500-provider manifest (static,
file_corpus, memory and http entries in turn, each with templates of its own). In process,
``load_manifest`` on that manifest is timed against PyYAML's pure-Python ``SafeLoader``
reading the same text (N rounds each, fastest and median). A command this version does not
have is shown as ``-``, so the script also measures an older commit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from composer import load_manifest  # noqa: E402

PROVIDERS = 500
# prod and staging read these; validation makes no request, so any value will do
PLACEHOLDERS = {"STATUS_URL": "https://status.example.com", "STATUS_TOKEN": "placeholder"}

_ENTRY = {
    "static": """  - name: rule-{i}
    type: static
    priority: {i}
    text: "Rule {i} for {{{{ branch.name or 'the team' }}}}: answer in English."
""",
    "file_corpus": """  - name: corpus-{i}
    type: file_corpus
    priority: {i}
    max_tokens: 600
    root: corpus
    query: "{{{{ instruction.text }}}} {i}"
    top_k: 2
""",
    "memory": """  - name: memory-{i}
    type: memory
    priority: {i}
    source: {{jsonl: memory.jsonl}}
    query: {{tags: [incident, t{i}], limit: 3}}
    template: "- {i}: {{{{ item.content }}}}"
""",
    "http": """  - name: status-{i}
    type: http
    priority: {i}
    when: "'outage {i}' in instruction.text.lower()"
    request:
      url: "https://status.example.com/search/{i}"
      params: {{q: "{{{{ instruction.text }}}}"}}
      headers: {{Authorization: "Bearer token-{i}"}}
    response:
      template: "{{% for r in json.results %}}- {i} {{{{ r.title }}}}\\n{{% endfor %}}"
""",
}


def write_large_manifest(folder: Path, providers: int = PROVIDERS) -> Path:
    """A manifest of ``providers`` entries cycling through the four built-in types."""
    (folder / "corpus").mkdir()
    (folder / "corpus" / "a.md").write_text("# Runbook\n\nRestart the service.\n")
    (folder / "memory.jsonl").write_text('{"content": "an incident", "tags": ["incident"]}\n')
    kinds = list(_ENTRY)
    body = "".join(_ENTRY[kinds[i % len(kinds)]].format(i=i) for i in range(providers))
    path = folder / "large.yaml"
    path.write_text(f"version: 1\nbudget: 100000\nproviders:\n{body}")
    return path


def command_seconds(argv: Sequence[str], runs: int, env: dict[str, str]) -> list[float] | None:
    """Wall times of ``argv`` in a fresh process; None when it exits non-zero."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run(argv, env=env, capture_output=True, check=False, cwd=REPO)
        times.append(time.perf_counter() - start)
        if result.returncode != 0:
            return None
    return times


def in_process_seconds(run: Callable[[], object], runs: int) -> list[float]:
    run()  # warm-up: imports, entry points, compiled templates of the first round
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSER_", "STATUS_"))}
    python = sys.executable
    composer = [python, "-m", "composer"]
    with tempfile.TemporaryDirectory() as tmp:
        large = write_large_manifest(Path(tmp))
        floor_times = command_seconds([python, "-c", "pass"], args.runs, env)
        assert floor_times is not None
        floor = min(floor_times)
        rows: list[tuple[str, Sequence[str], dict[str, str]]] = [
            ("composer --version", [*composer, "--version"], env),
            ("composer --help", [*composer, "--help"], env),
        ]
        for name in ("dev", "staging", "prod"):
            rows.append(
                (
                    f"validate configs --env {name}",
                    [*composer, "validate", "configs", "--env", name],
                    {**env, **PLACEHOLDERS},
                )
            )
        rows.append(
            (
                "validate configs --all-envs --no-interpolate",
                [*composer, "validate", "configs", "--all-envs", "--no-interpolate"],
                env,
            )
        )
        rows.append(
            (f"validate {PROVIDERS}-provider manifest", [*composer, "validate", str(large)], env)
        )
        print(
            f"subprocess, {args.runs} runs; floor `python -c pass`: fastest {floor * 1000:.0f} ms, "
            f"median {statistics.median(floor_times) * 1000:.0f} ms"
        )
        print(f"{'command':<48}{'fastest':>9}{'median':>9}{'ratio':>8}")
        for label, argv, command_env in rows:
            times = command_seconds(argv, args.runs, command_env)
            if times is None:
                print(f"{label:<48}{'-':>9}{'-':>9}{'-':>8}")
                continue
            fastest, median = min(times), statistics.median(times)
            print(
                f"{label:<48}{fastest * 1000:>7.0f}ms{median * 1000:>7.0f}ms{fastest / floor:>7.1f}x"
            )

        text = large.read_text()
        load = in_process_seconds(lambda: load_manifest(large), args.runs)
        pure = in_process_seconds(
            lambda: yaml.load(text, Loader=yaml.SafeLoader),  # the pure-Python safe loader
            args.runs,
        )
        print()
        print(f"in process, {args.runs} rounds")
        print(f"{'measure':<48}{'fastest':>9}{'median':>9}{'ratio':>8}")
        for label, times in (
            ("yaml.SafeLoader (pure Python) on the same text", pure),
            (f"load_manifest, {PROVIDERS} providers", load),
        ):
            fastest, median = min(times), statistics.median(times)
            ratio = fastest / min(pure)
            print(f"{label:<48}{fastest * 1000:>7.1f}ms{median * 1000:>7.1f}ms{ratio:>7.2f}x")


if __name__ == "__main__":
    main()
