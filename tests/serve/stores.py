"""The shared state stores the serving tests run against: real Redis and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from memory.services import postgres_schema, redis_prefix_of
from memory.stores_fixtures import postgres_dsn, redis_url

__all__ = ["postgres_dsn", "redis_url", "shared_store"]  # fixtures, for the tests to import


@pytest.fixture(params=["redis", "postgres"])
def shared_store(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """A real store's URL and a key word (Redis) or schema (PostgreSQL) of this test's."""
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        with redis_prefix_of(url) as word:
            yield url, word
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        with postgres_schema(dsn) as schema:
            yield dsn, schema
