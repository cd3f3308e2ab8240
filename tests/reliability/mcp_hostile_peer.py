"""An MCP server over stdio that misbehaves on request: the hostile peer of tests/reliability.

Standard library only, so it starts in milliseconds. It speaks just enough of the protocol
(the ``initialize`` handshake, ``resources/read``, ``tools/list``, ``tools/call``) and chooses
how to misbehave by the resource URI (``peer://<kind>:<argument>``, percent-encoded or not)
or the tool name:

* ``big:<n>``: a text resource of ``n`` bytes, on one line, written in chunks;
* ``endless``: a message that never ends (no newline, ever);
* ``hang``: no answer at all;
* ``text:<words>``: the text ``<words>``;
* tool ``sleep``: sleeps for ten minutes before answering (``BUSY_FILE`` says when it starts).

Environment: ``STARTS_FILE`` (its process id is appended there at start), ``START_DELAY_S``
(sleep before reading anything), ``STDERR_LINES`` (written to stderr at start, one per line),
``EXIT_CODE`` (then exit at once with it), ``STOP_FILE`` (SIGTERM writes ``SIGTERM`` there and
exits), ``IGNORE_SIGTERM``, ``IGNORE_EOF`` (stay after stdin closes), ``GRANDCHILD_FILE`` (start a sleeping child in this process group
and write its id there).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
from typing import Any

CHUNK = 1 << 20


def send(message: dict[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def write_resource(request_id: Any, uri: str, size: int | None) -> None:
    """A resources/read result whose text is ``size`` bytes of "a" (``None``: endless)."""
    head = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"contents": []}})
    prefix = head[: head.index("[") + 1] + json.dumps({"uri": uri, "text": ""})[:-2]
    out = sys.stdout.buffer
    out.write(prefix.encode())
    chunk = b"a" * CHUNK
    written = 0
    while size is None or written < size:
        part = chunk if size is None else chunk[: min(CHUNK, size - written)]
        out.write(part)
        written += len(part)
    out.write(b'"}]}}\n')
    out.flush()


def answer(message: dict[str, Any]) -> None:
    request_id, method = message.get("id"), message.get("method")
    params = message.get("params") or {}
    if request_id is None:
        return  # a notification
    if method == "initialize":
        version = params.get("protocolVersion", "2025-06-18")
        result = {
            "protocolVersion": version,
            "capabilities": {"resources": {}, "tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
    elif method == "resources/read":
        uri = params["uri"]
        kind, _, rest = urllib.parse.unquote(uri.partition("://")[2]).partition(":")
        if kind == "big":
            write_resource(request_id, uri, int(rest))
        elif kind == "endless":
            write_resource(request_id, uri, None)
        elif kind == "text":
            contents = [{"uri": uri, "text": rest, "mimeType": "text/plain"}]
            send({"jsonrpc": "2.0", "id": request_id, "result": {"contents": contents}})
        # hang gets no answer
    elif method == "tools/list":
        tools = [{"name": "sleep", "inputSchema": {"type": "object"}}]
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
    elif method == "tools/call" and params.get("name") == "sleep":
        if os.environ.get("BUSY_FILE"):
            with open(os.environ["BUSY_FILE"], "w", encoding="utf-8") as file:
                file.write("sleeping")
        time.sleep(600)
    else:
        error = {"code": -32601, "message": f"no method {method}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})


def on_sigterm(signum: int, frame: Any) -> None:
    with open(os.environ["STOP_FILE"], "w", encoding="utf-8") as file:
        file.write("SIGTERM")
    os._exit(0)


def main() -> None:
    if os.environ.get("STARTS_FILE"):
        with open(os.environ["STARTS_FILE"], "a", encoding="utf-8") as file:
            file.write(f"{os.getpid()}\n")
    if os.environ.get("STOP_FILE"):
        signal.signal(signal.SIGTERM, on_sigterm)
    if os.environ.get("IGNORE_SIGTERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.environ.get("GRANDCHILD_FILE"):
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL
        )
        with open(os.environ["GRANDCHILD_FILE"], "w", encoding="utf-8") as file:
            file.write(str(child.pid))
    for line in os.environ.get("STDERR_LINES", "").splitlines():
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
    if os.environ.get("EXIT_CODE"):
        sys.exit(int(os.environ["EXIT_CODE"]))
    time.sleep(float(os.environ.get("START_DELAY_S", "0")))
    try:
        for line in sys.stdin:
            if line.strip():
                answer(json.loads(line))
    except BrokenPipeError:
        pass
    if os.environ.get("IGNORE_EOF"):
        time.sleep(600)


if __name__ == "__main__":
    main()
