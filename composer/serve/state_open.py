"""The branch state store a ``composer serve --state URL`` names (``composer.serve.state``).

Apart from the stores' module so that they, which import the state's types, are imported
only here, and only for the URL's scheme.
"""

from __future__ import annotations

import re

from composer.errors import ServeError
from composer.serve.state import ProcessState, StateStore, mask_url

__all__ = ["SCHEMA", "open_state"]

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
        from composer.serve.state_postgres import PostgresState

        return PostgresState(url, schema=schema, max_records=max_records, ttl_s=ttl_s)
    if scheme in ("redis", "rediss", "unix"):
        from composer.serve.state_redis import RedisState

        return RedisState(url, prefix=schema, max_records=max_records, ttl_s=ttl_s)
    raise ServeError(
        f"--state {mask_url(url)!r}: give a postgresql:// or redis:// URL (or nothing, for "
        "state kept in the process)"
    )
