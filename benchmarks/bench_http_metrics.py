"""What ``composer serve --metrics`` adds to each request: the HTTP metrics middleware (the
route template found, a counter and a histogram observed) and, on a turn, composer's turn
metrics.

Run from the repository root:  .venv/bin/python benchmarks/bench_http_metrics.py [--requests N]

Two apps of the dev manifest (``configs --env dev``, no token, rate limit off) are built in
this process with ``composer.serve.create_app``: the baseline without ``--metrics``, then the
same with it. Each request is one raw ASGI call (no socket, no client: what is left is the
app's own work), alternating between the two apps so that the machine's drift falls on both
alike, each call timed on its own. Reported per route (``GET /healthz``, the cheapest, where the middleware weighs
most; ``POST /v1/turns``, a real turn; ``GET /nope/<n>``, a distinct unknown path each time):
the median time of a request to each app (a median: other work on the machine lands on a few
calls, not on the middle one), the difference and the ratio.

The baseline's manifest serves its first turn before ``--metrics`` turns on the process-wide
switch (``composer.observe.switch``), so its turns stay unmeasured, as without the flag.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from starlette.applications import Starlette  # noqa: E402

import composer  # noqa: E402
from composer.serve import ServerConfig, create_app  # noqa: E402

TURN = json.dumps(
    {
        "branch": {"id": "bench", "name": "payments"},
        "system": "You are the on-call assistant.\n",
        "instruction": {"text": "How do I roll back a deploy?"},
    }
).encode()


def request(
    app: Starlette, method: str, path: str, body: bytes = b""
) -> Callable[[], Awaitable[int]]:
    """One raw ASGI call of ``app``; its status."""
    headers = [(b"host", b"127.0.0.1:8080")]
    if body:
        headers.append((b"content-type", b"application/json"))

    async def call() -> int:
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path.replace("<n>", str(time.perf_counter_ns())),
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080),
        }
        sent = False
        status = 0

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.sleep(3600)
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        await app(scope, receive, send)
        return status

    return call


async def timed(call: Callable[[], Awaitable[int]]) -> float:
    """Seconds one call took."""
    start = time.perf_counter()
    status = await call()
    elapsed = time.perf_counter() - start
    assert status < 500, status
    return elapsed


async def main(count: int) -> None:
    manifest = REPO / "configs"
    plain = create_app(composer.load_manifest(manifest, env="dev"), ServerConfig(rate_limit=0))
    async with plain.router.lifespan_context(plain):
        await request(plain, "POST", "/v1/turns", TURN)()  # its observer, before the switch
        config = ServerConfig(rate_limit=0, metrics=True)
        measured = create_app(composer.load_manifest(manifest, env="dev"), config)
        async with measured.router.lifespan_context(measured):
            routes = [
                ("GET /healthz", "GET", "/healthz", b"", count),
                ("POST /v1/turns", "POST", "/v1/turns", TURN, max(1, count // 10)),
                ("GET /nope/<n>", "GET", "/nope/<n>", b"", count),
            ]
            print(f"{'request':<16} {'baseline':>10} {'--metrics':>10} {'added':>9} {'ratio':>6}")
            for name, method, path, body, n in routes:
                base = request(plain, method, path, body)
                metered = request(measured, method, path, body)
                without: list[float] = []
                with_: list[float] = []
                for i in range(n + n // 10):  # alternately, the first tenth a warm-up
                    pair = (await timed(base), await timed(metered))
                    if i >= n // 10:
                        without.append(pair[0])
                        with_.append(pair[1])
                a, b = statistics.median(without), statistics.median(with_)
                print(
                    f"{name:<16} {a * 1e6:>8.1f}us {b * 1e6:>8.1f}us "
                    f"{(b - a) * 1e6:>7.1f}us {b / a:>5.2f}x"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="requests a route")
    asyncio.run(main(parser.parse_args().requests))
