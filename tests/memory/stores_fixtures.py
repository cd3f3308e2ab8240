"""The real servers as fixtures (``memory.services``), for any test folder's conftest:
PostgreSQL and Redis once per session, a schema of its own per test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from memory.services import (
    DEFAULT_REDIS_URL,
    postgres_schema,
    postgres_server,
    redis_answers,
    require_redis_extra,
    throwaway_redis,
)

__all__ = ["pg_schema", "postgres_dsn", "redis_url"]


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A PostgreSQL server that answers: the configured one, else a throwaway cluster."""
    with postgres_server() as dsn:
        yield dsn


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis server that answers: the configured one, else a throwaway redis-server."""
    require_redis_extra()
    url = os.environ.get("COMPOSER_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    if redis_answers(url):
        yield url
        return
    with throwaway_redis() as started:
        yield started


@pytest.fixture
def pg_schema(postgres_dsn: str) -> Iterator[str]:
    """A schema name no other test uses; dropped afterwards."""
    with postgres_schema(postgres_dsn) as schema:
        yield schema
