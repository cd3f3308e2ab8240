"""Run a test's ``http.server`` on 127.0.0.1 in a thread, and always stop it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseServer
from typing import Any, ClassVar

__all__ = ["JsonAnswer", "serving", "serving_json"]


@contextmanager
def serving(httpd: BaseServer, before_stop: Callable[[], None] | None = None) -> Iterator[None]:
    """Serve ``httpd`` in a background thread for the block; shut down and close it after.

    ``before_stop`` runs first, e.g. to release handlers that are still answering slowly.
    """
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        if before_stop is not None:
            before_stop()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


class JsonAnswer(BaseHTTPRequestHandler):
    """Answers every GET with ``ANSWER`` as JSON over keep-alive HTTP/1.1; records the paths."""

    ANSWER: ClassVar[Any] = {"results": [{"title": "all green"}]}
    paths: ClassVar[list[str]] = []
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms stall

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        body = json.dumps(self.ANSWER).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serving_json() -> Iterator[str]:
    """A ``JsonAnswer`` server on 127.0.0.1 for the block; yields its base URL."""
    JsonAnswer.paths = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), JsonAnswer)
    httpd.daemon_threads = True
    with serving(httpd):
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
