"""The audit log on standard output, one JSON line per turn, for a log shipper."""

from __future__ import annotations

import sys
from collections.abc import Hashable
from typing import Unpack

from composer.observe.audit.base import AuditQueue, QueueOptions

__all__ = ["StdoutAuditLog"]


class StdoutAuditLog(AuditQueue):
    """Writes one JSON line per turn to standard output (``sys.stdout`` when the batch is
    written), for a log shipper: a reader that stalls holds the writer, never a turn."""

    kind = "stdout"

    def __init__(self, key: Hashable = "stdout", **queue: Unpack[QueueOptions]) -> None:
        super().__init__("standard output", key, **queue)

    def _write(self, lines: list[bytes]) -> None:
        try:
            stream = sys.stdout
            stream.write(b"".join(lines).decode("ascii"))  # whole lines, one write
            stream.flush()
        except (OSError, ValueError, AttributeError) as e:  # closed, a broken pipe, None
            self._lost(type(e).__name__, len(lines), str(e) or type(e).__name__)
            return
        self._written(len(lines))
