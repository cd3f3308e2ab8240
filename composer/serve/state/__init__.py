"""What a server remembers of each branch, in the process or in a store every replica shares.

A turn's writeback is idempotent because the branch's turns are counted: the memory provider
keys what it stores by the turn (``composer.plugin.turn_key``: ``principal:epoch:count``), so
a retry of one turn's writeback stores nothing twice and the same result in a later turn is
stored again. Several replicas behind a load balancer must agree on that key, so with
``composer serve --state URL`` the count lives in PostgreSQL or Redis beside what a replica
needs to serve a branch another one served last: the name and bound metadata of its last
turn (a writeback that states no branch), and its last composed text and report summary
(the MCP resource ``composer://branches/{id}/context``). Each replica still keeps its own
branches' registries (``composer.branches``): they hold no more than a cache of the
manifest's shared state.

The rate limits are counted in the same store (``rate_storage``, a ``limits`` storage), so
that every process sharing it counts one limit (``composer.serve.rates``).

The epoch. A count alone would repeat after its record is gone (dropped as idle, over the
bound, or with the store): turn 1 of the new record would be taken for a retry of turn 1 of
the old one, and its result not stored. So each record draws a random epoch when it is
created and keeps it for its life; the key is the epoch and the count. Every replica reads the
same epoch (a retry on another replica is a retry), a replica's restart changes nothing (the
record is in the store), and a record made again has a new epoch (a new turn is never taken
for an old one). In the process (no ``--state``), the store is the process: its epoch is a
random run id drawn at start (``TurnCounter``), which a restart changes, as it must.

Every record belongs to a principal, and each read names one: a record of another principal
is not found. Records are bounded as the process's counts are: each expires after
``ttl_s`` without a turn, and the least recently used go over ``max_records``.

```
base.py            the contract (StateStore), a turn's slot, a branch's record, their bounds
batch.py           Batcher: the calls made while a round trip is out, sent as one in the next
process.py         ProcessState: counts in the process, the default
postgres.py        PostgresState: a schema in PostgreSQL (the postgres extra)
postgres_rates.py  the rate limits' windows beside it, a storage of the limits library
redis.py           RedisState: a key prefix in Redis (the redis extra)
```

``open_state`` opens the one a ``--state`` URL names; the stores' modules, which import
their clients' types, are imported only then, and only for the URL's scheme.
"""

from __future__ import annotations

import re

from composer.errors import ServeError
from composer.manifest.dsn import mask_url
from composer.serve.state.base import (
    NO_TURN,
    BranchRecord,
    SharedState,
    StateStore,
    TurnSlot,
    cut,
    report_summary,
)
from composer.serve.state.process import ProcessState

__all__ = [
    "NO_TURN",
    "SCHEMA",
    "BranchRecord",
    "ProcessState",
    "SharedState",
    "StateStore",
    "TurnSlot",
    "cut",
    "open_state",
    "report_summary",
]

SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""A PostgreSQL schema name (or Redis key prefix word) the server will use."""


def open_state(
    url: str | None,
    *,
    schema: str = "composer_state",
    max_records: int = 100_000,
    ttl_s: float = 36_000.0,
) -> StateStore:
    """The store ``--state URL`` names (``postgresql://``, ``redis://``/``rediss://``), or the
    process's own without one. ``schema`` is the PostgreSQL schema, or the Redis key prefix's
    word. The clients are imported when the store is first used."""
    if url is None:
        return ProcessState(max_records)
    if not SCHEMA.fullmatch(schema):
        raise ServeError(
            f"--state-schema {schema!r}: use a lower-case SQL identifier (letters, digits, _)"
        )
    scheme = url.partition("://")[0].lower()
    if scheme in ("postgresql", "postgres"):
        from composer.serve.state.postgres import PostgresState

        return PostgresState(url, schema=schema, max_records=max_records, ttl_s=ttl_s)
    if scheme in ("redis", "rediss", "unix"):
        from composer.serve.state.redis import RedisState

        return RedisState(url, prefix=schema, max_records=max_records, ttl_s=ttl_s)
    raise ServeError(
        f"--state {mask_url(url)!r}: give a postgresql:// or redis:// URL (or nothing, for "
        "state kept in the process)"
    )
