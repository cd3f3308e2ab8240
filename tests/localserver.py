"""Run a test's ``http.server`` on 127.0.0.1 in a thread, and always stop it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from socketserver import BaseServer

__all__ = ["serving"]


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
