"""Load on ``composer serve``: turns over HTTP against ``prepare_turn`` in-process.

Run from the repository root:  .venv/bin/python benchmarks/bench_serve.py [--turns N]

``composer serve configs --env dev`` runs as its own process on 127.0.0.1 (no token, rate
limit off). An httpx client sends N turns (2,000 by default) spread over 50 branches, at most
16 in flight, each a real turn of the dev manifest (static house rules, the runbook corpus,
the JSONL team memory). The baseline, in this process, runs the same turns on the same 50
branches with ``prepare_turn`` (a lock per branch, as the server holds one), at the same
concurrency. Reported: turns per second, p50 and p99 latency of each, the ratio, and the
server's resident memory before the run (after warm-up and one turn per branch) and after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import composer  # noqa: E402

BRANCHES = 50
CONCURRENCY = 16
SYSTEM = "You are the on-call assistant.\n"
QUESTIONS = [
    "The API returns 502 errors after the deploy, what do I do?",
    "How do I roll back a deploy?",
    "Postgres replication lag is growing on the replica",
    "The payments queue is backing up",
    "Disk is almost full on a database host",
    "Certificates expire tomorrow, how do I renew them?",
    "What is our latency budget for the api service?",
    "Is there an outage on the status page?",
]


def requests(turns: int) -> list[tuple[str, str]]:
    """(branch id, instruction) of every turn: round-robin over branches and questions."""
    return [(f"branch-{i % BRANCHES}", QUESTIONS[i % len(QUESTIONS)]) for i in range(turns)]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def drive(
    turns: list[tuple[str, str]], call: Callable[[str, str], Awaitable[None]]
) -> tuple[float, list[float]]:
    """Run every turn through ``call``, at most CONCURRENCY at once: wall seconds, latencies."""
    gate = asyncio.Semaphore(CONCURRENCY)
    latencies: list[float] = []

    async def one(branch: str, text: str) -> None:
        async with gate:
            start = time.perf_counter()
            await call(branch, text)
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(one(branch, text) for branch, text in turns))
    return time.perf_counter() - start, latencies


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def cpu_s(pid: int) -> float:
    """User and system CPU seconds ``pid`` has used, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(extra: Sequence[str] = ()) -> tuple[subprocess.Popen[str], str]:
    """``composer serve configs --env dev EXTRA`` once ready; the process and its URL."""
    command = [sys.executable, "-m", "composer", "serve", str(REPO / "configs")]
    command += ["--env", "dev", "--port", "0", "--rate-limit", "0", *extra]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        raise RuntimeError(f"composer serve did not start: {line!r}")
    url = line.split("listening on ", 1)[1].split()[0]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("composer serve did not become ready")


async def served(turns: list[tuple[str, str]], url: str, pid: int) -> dict[str, float]:
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def call(branch: str, text: str) -> None:
            body = {"branch": {"id": branch}, "system": SYSTEM, "instruction": {"text": text}}
            response = await client.post("/v1/turns", json=body)
            response.raise_for_status()

        await drive(requests(BRANCHES), call)  # every branch exists, caches are warm
        before, cpu = rss_mib(pid), cpu_s(pid)
        wall, latencies = await drive(turns, call)
        after, cpu = rss_mib(pid), cpu_s(pid) - cpu
    figures = {"wall": wall, "p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99)}
    return figures | {"rss_before": before, "rss_after": after, "cpu": cpu}


async def in_process(turns: list[tuple[str, str]]) -> dict[str, float]:
    manifest = composer.load_manifest(REPO / "configs", env="dev")
    branches: dict[str, tuple[composer.Branch, asyncio.Lock]] = {}
    for i in range(BRANCHES):
        branch = composer.Branch(SYSTEM)
        composer.attach(branch, manifest)
        branches[f"branch-{i}"] = (branch, asyncio.Lock())

    async def call(branch_id: str, text: str) -> None:
        branch, lock = branches[branch_id]
        async with lock:
            await composer.prepare_turn(branch, composer.Instruction(text))
            branch.messages.clear()

    try:
        await drive(requests(BRANCHES), call)
        cpu = time.process_time()
        wall, latencies = await drive(turns, call)
        cpu = time.process_time() - cpu
    finally:
        await manifest.aclose()
    figures = {"wall": wall, "p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99)}
    return figures | {"cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    turns = requests(args.turns)

    local = asyncio.run(in_process(turns))
    process, url = start_server()
    try:
        remote = asyncio.run(served(turns, url, process.pid))
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
        if process.stdout is not None:
            process.stdout.close()

    n = args.turns
    print(f"{n} turns over {BRANCHES} branches, {CONCURRENCY} in flight, configs --env dev")
    print(f"{'':24}{'turns/s':>10}{'p50 ms':>10}{'p99 ms':>10}")
    for name, figures in (("prepare_turn in-process", local), ("composer serve (HTTP)", remote)):
        rate = n / figures["wall"]
        p50, p99 = figures["p50"] * 1000, figures["p99"] * 1000
        print(f"{name:24}{rate:>10.0f}{p50:>10.2f}{p99:>10.2f}")
    print(f"throughput ratio in-process / served: {remote['wall'] / local['wall']:.2f}x")
    print(f"p50 ratio served / in-process: {remote['p50'] / local['p50']:.2f}x")
    print(
        f"server resident memory: {remote['rss_before']:.1f} MiB before, "
        f"{remote['rss_after']:.1f} MiB after ({remote['rss_after'] - remote['rss_before']:+.1f})"
    )
    local_cpu = local["cpu"] / n * 1000
    print(f"CPU per turn: server {remote['cpu'] / n * 1000:.2f} ms, in-process {local_cpu:.2f} ms")
    print(f"server exit code after SIGTERM: {code}")
    print(f"cores: {os.cpu_count()}; client and server share them")


if __name__ == "__main__":
    main()
