"""``composer console``: the web console over an audit log alone, on 127.0.0.1.

The same pages as ``composer serve --console`` (turns, a turn, compare, providers), without a
manifest or a token: it listens on a loopback address only, and whoever can reach it sees
every turn of the log (the log's file permissions, or the database's credentials, already
decide who may read it).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from composer.cli.exit_codes import FAILURE, SUCCESS

if TYPE_CHECKING:
    from composer.cli.output import Output
    from composer.console import TurnSource

__all__ = ["DESCRIPTION", "add_arguments", "run"]

_EXTRA_HINT = "pip install 'context-composer[serve]'"

DESCRIPTION = (
    "Serve a read-only web console over an audit log (the file a manifest's `runtime.audit` "
    "writes, or the DSN of its PostgreSQL table) at http://127.0.0.1:PORT/console: the "
    "recent turns, filterable; a turn's "
    "providers, budget and the blocks the model saw; two turns side by side; each "
    "provider's counts and durations. Listens on 127.0.0.1 only, without a token. Needs the "
    "serve extra: " + _EXTRA_HINT
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="AUDIT_FILE_OR_DSN",
        help="the audit log (turns.jsonl), or a postgresql:// DSN of its table",
    )
    parser.add_argument(
        "--schema",
        default="composer",
        help="with a DSN: the schema of runtime.audit.postgres",
    )
    parser.add_argument("--port", type=int, default=8081, help="port; 0: any free port")


def run(args: argparse.Namespace, output: Output) -> int:
    from composer.errors import ComposerError

    needed = ("starlette", "uvicorn", "itsdangerous")
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        output.error(f"composer console: {', '.join(missing)} not installed: {_EXTRA_HINT}")
        return FAILURE
    from composer.console import TurnSource
    from composer.errors import AuditReadError
    from composer.observe.audit.reader import is_dsn, shown

    source = TurnSource(args.file if is_dsn(args.file) else Path(args.file), args.schema)
    if not source.is_table and not Path(args.file).is_file():
        output.error(f"composer console: {args.file}: no such file (give the audit log)")
        return FAILURE
    try:
        source.newest(None, limit=1)  # a database that cannot be reached says so now
    except AuditReadError as e:
        output.error(f"composer console: {e}")
        return FAILURE
    try:
        _serve(source, shown(args.file), args.port, output)
    except KeyboardInterrupt:
        return SUCCESS
    except ComposerError as e:
        output.error(f"composer console: {e}")
        return FAILURE
    return SUCCESS


def _serve(source: TurnSource, shown: str, port: int, output: Output) -> None:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    from composer.console import Console, console_mount
    from composer.serve.guard import RequestGuard
    from composer.serve.rates import RateLimit
    from composer.serve.runner import bind, serve
    from composer.serve.state import ProcessState

    rates = ProcessState(max_records=1).rate_storage  # counted in this process
    app = Starlette(
        routes=[console_mount(Console(source))],
        middleware=[
            Middleware(RequestGuard, loopback=True, open_paths=()),
            Middleware(RateLimit, storage=rates, rate=100.0, burst=200, exempt=()),
        ],
    )
    sock = bind("127.0.0.1", port)

    def started(url: str) -> None:
        output.print(f"composer console: {shown} at {url}/console (127.0.0.1 only)")
        output.out.flush()

    serve(app, sock, started=started)
