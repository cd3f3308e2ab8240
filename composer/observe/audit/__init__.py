"""The audit log: one line per turn, written off the turn's path by a sink, read back by one reader.

```
base.py      AuditQueue: the bounded queue and thread every sink shares; open_audit_log keeps
             one sink per place in the process
file.py      AuditLog: a JSON Lines file, rotated; audit_problem (what `composer validate` says)
stdout.py    StdoutAuditLog: standard output, for a log shipper
postgres.py  PostgresAuditLog: a PostgreSQL table (the postgres extra), with its retention
table.py     that table: its DDL, one turn's row, a connection to it
held.py      a server's turn lines, held until it knows whether its client was answered
reader.py    read_turns, find_turn: the one reader of a file or a table
```

The sinks a manifest's ``runtime.audit`` names are opened by ``composer.observe.observer``;
the table's writer and the reader are imported only when a table or a reader is used.
"""

from composer.observe.audit.base import AuditQueue, open_audit_log, release_audit_log
from composer.observe.audit.file import AuditLog, audit_problem
from composer.observe.audit.stdout import StdoutAuditLog

__all__ = [
    "AuditLog",
    "AuditQueue",
    "StdoutAuditLog",
    "audit_problem",
    "open_audit_log",
    "release_audit_log",
]
