"""Many branches on one loaded manifest: descriptors and pool (part 1), memory per branch (part 2).

Run from the repository root:
    .venv/bin/python benchmarks/bench_branches.py [--branches N]           # both parts
    .venv/bin/python benchmarks/bench_branches.py --memory [--branches N]  # part 2 only

1. A keep-alive HTTP/1.1 server runs on 127.0.0.1 in this process. The manifest (one ``http``
   provider) is loaded once; then N branches are attached one by one and each runs one turn.
   The figures: open file descriptors of the process and its resident memory before the first
   branch and after the last, and the turns per second. Every branch's http provider sends
   through the manifest's one connection pool for the origin, so descriptors stay flat;
   before the pool, each branch opened its own client (908 descriptors after 900 branches,
   and ``OSError: Too many open files`` at about 1,000).
2. What an attached branch costs in memory: N branches (10,000 by default) kept alive, each a
   ``composer.Branch`` with its registry, built in a fresh process per side so that each
   side's resident memory is its own. Sides: ``composer.attach`` of the bundled dev and prod
   manifests, and the baseline, a bare lionagi-style registry per branch: lionagi 0.36's own
   ``ContextProviderRegistry`` (and composer's ADR ``ContextProviderRegistry``, built the
   same way) holding the same, already built provider objects with the same priority, cap
   and name. Per branch: the growth of resident memory (``VmRSS``) and what tracemalloc
   counts as allocated, each divided by N; the ratio is attach over the lionagi registry.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import composer  # noqa: E402


class KeepAlive(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps({"results": [{"title": "all green"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def run(manifest: composer.Manifest, branches: int) -> tuple[float, int]:
    start = time.perf_counter()
    for _ in range(branches):
        branch = composer.Branch("sys\n")
        composer.attach(branch, manifest)
        turn = await composer.prepare_turn(branch, "status")
        assert turn.report is not None
        assert turn.report.failed == [], turn.report.outcomes
    elapsed = time.perf_counter() - start
    open_after_turns = descriptors()
    await manifest.aclose()
    return elapsed, open_after_turns


# prod reads these; attaching builds providers but makes no request, so any value will do
PLACEHOLDERS = {"STATUS_URL": "https://status.example.com", "STATUS_TOKEN": "placeholder"}
SIDES = ("lionagi", "registry", "attach")


def memory_side(side: str, env: str, branches: int) -> dict[str, float]:
    """One side of part 2, in this (fresh) process: bytes per branch, RSS and tracemalloc."""
    import gc
    import tracemalloc

    manifest = composer.load_manifest(
        REPO / "configs", env=env, environ={**os.environ, **PLACEHOLDERS}
    )
    template = composer.build_registry(manifest)
    entries = [
        (m.provider, m.config.priority, m.config.max_tokens, m.name) for m in template.managed
    ]
    registry_class: Any = composer.ContextProviderRegistry
    if side == "lionagi":
        from lionagi.protocols.context_providers import ContextProviderRegistry

        registry_class = ContextProviderRegistry

    def make() -> composer.Branch:
        branch = composer.Branch("s")
        if side == "attach":
            composer.attach(branch, manifest)
            return branch
        registry = registry_class(budget=manifest.budget)
        for provider, priority, max_tokens, name in entries:
            registry.register(provider, priority=priority, max_tokens=max_tokens, name=name)
        branch._context_providers = registry
        return branch

    def grown(measure: Callable[[], float]) -> float:
        gc.collect()
        before = measure()
        kept = [make() for _ in range(branches)]
        gc.collect()
        after = measure()
        assert len(kept) == branches
        return (after - before) / branches

    make()  # warm-up: compiled templates cached, shared state made
    rss = grown(lambda: rss_mib() * 1024 * 1024)
    tracemalloc.start()
    traced = grown(lambda: float(tracemalloc.get_traced_memory()[0]))
    tracemalloc.stop()
    return {"rss": rss, "traced": traced}


def memory(branches: int) -> None:
    """Part 2: each side in a fresh process, its figures read back as JSON."""
    print(f"\n{branches:,} branches kept alive, bytes per branch (a fresh process per side)")
    print("| manifest | side | RSS per branch | allocated per branch | attach / lionagi (RSS) |")
    print("|---|---|---|---|---|")
    for env in ("dev", "prod"):
        figures = {}
        for side in SIDES:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--memory-side",
                    side,
                    "--env",
                    env,
                    "--branches",
                    str(branches),
                ],
                check=True,
                capture_output=True,
                text=True,
                cwd=REPO,
            ).stdout
            figures[side] = json.loads(out.splitlines()[-1])
        names = {
            "lionagi": "bare lionagi 0.36 registry",
            "registry": "bare composer registry",
            "attach": "composer.attach",
        }
        for side in SIDES:
            rss, traced = figures[side]["rss"], figures[side]["traced"]
            ratio = rss / figures["lionagi"]["rss"]
            print(f"| {env} | {names[side]} | {rss:,.0f} B | {traced:,.0f} B | {ratio:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--branches", type=int, default=10_000)
    parser.add_argument("--memory", action="store_true", help="part 2 only")
    parser.add_argument("--memory-side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--env", default="dev", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_side:
        print(json.dumps(memory_side(args.memory_side, args.env, args.branches)))
        return
    if args.memory:
        memory(args.branches)
        return
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.yaml"
        path.write_text(
            "version: 1\nproviders:\n  - name: status\n    type: http\n"
            f"    request: {{url: '{url}/search', params: {{q: '{{{{ instruction.text }}}}'}}}}\n"
        )
        manifest = composer.load_manifest(path)
        composer.count_tokens("warm up")
        fds, rss = descriptors(), rss_mib()
        elapsed, during = asyncio.run(run(manifest, args.branches))
        print(f"{args.branches} branches, one turn each, {args.branches / elapsed:.0f} turns/s")
        print(
            f"open descriptors: {fds} before, {during} after the last turn, "
            f"{descriptors()} after Manifest.aclose()"
        )
        print(f"resident memory:  {rss:.0f} MiB before, {rss_mib():.0f} MiB after")
        print(
            f"peak resident:    {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
        )
    httpd.shutdown()
    memory(args.branches)


if __name__ == "__main__":
    main()
