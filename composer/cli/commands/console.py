"""``composer console``: the web console over an audit log alone, on 127.0.0.1.

The same pages as ``composer serve --console`` (turns, a turn, compare, providers), without a
manifest or a token: it listens on a loopback address only, and whoever can reach it sees
every turn of the log (the log's own file permissions already decide who may read it).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS, USAGE

if TYPE_CHECKING:
    from composer.cli.output import Output

__all__ = ["DESCRIPTION", "add_arguments", "run"]

_EXTRA_HINT = "pip install 'context-composer[serve]'"

DESCRIPTION = (
    "Serve a read-only web console over an audit log (the file a manifest's `runtime.audit` "
    "writes) at http://127.0.0.1:PORT/console: the recent turns, filterable; a turn's "
    "providers, budget and the blocks the model saw; two turns side by side; each "
    "provider's counts and durations. Listens on 127.0.0.1 only, without a token. Needs the "
    "serve extra: " + _EXTRA_HINT
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="AUDIT_FILE", help="the audit log (turns.jsonl)")
    parser.add_argument("--port", type=int, default=8081, help="port (8081; 0: any free port)")


def run(args: argparse.Namespace, output: Output) -> int:
    from composer.errors import ComposerError

    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        output.error(f"composer console: {', '.join(missing)} not installed: {_EXTRA_HINT}")
        return FAILURE
    if "://" in args.file:
        output.error(
            "composer console: give the audit log's file (turns.jsonl); a database address "
            "is not read here yet"
        )
        return USAGE
    path = Path(args.file)
    if not path.is_file():
        output.error(f"composer console: {args.file}: no such file (give the audit log)")
        return FAILURE
    try:
        _serve(path, args.port, output)
    except KeyboardInterrupt:
        return SUCCESS
    except ComposerError as e:
        output.error(f"composer console: {e}")
        return FAILURE
    return SUCCESS


def _serve(path: Path, port: int, output: Output) -> None:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    from composer.cli.console import Console, TurnSource, console_mount
    from composer.serve.guard import RequestGuard
    from composer.serve.limits import RateLimit
    from composer.serve.runner import bind, serve

    app = Starlette(
        routes=[console_mount(Console(TurnSource(path)))],
        middleware=[
            Middleware(RequestGuard, loopback=True, open_paths=()),
            Middleware(RateLimit, rate=100.0, burst=200, exempt=()),
        ],
    )
    sock = bind("127.0.0.1", port)

    def started(url: str) -> None:
        output.print(f"composer console: {path} at {url}/console (127.0.0.1 only)")
        output.out.flush()

    serve(app, sock, started=started)
