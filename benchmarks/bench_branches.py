"""Many branches on one loaded manifest with an http provider: open descriptors and memory.

Run from the repository root:  .venv/bin/python benchmarks/bench_branches.py [--branches N]

A keep-alive HTTP/1.1 server runs on 127.0.0.1 in this process. The manifest (one ``http``
provider) is loaded once; then N branches are attached one by one and each runs one turn. The
figures: open file descriptors of the process and its resident memory before the first
branch and after the last, and the turns per second. Every branch's http provider sends
through the manifest's one connection pool for the origin, so descriptors stay flat; before
the pool, each branch opened its own client (908 descriptors after 900 branches, and
``OSError: Too many open files`` at about 1,000).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import threading
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--branches", type=int, default=10_000)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
