"""Fixtures of the memory tests: real servers, one fresh store of each kind per test.

Each PostgreSQL test gets a schema of its own (``t<pid>_<random>``), dropped afterwards, so
tests never meet each other's rows nor anything left behind by an earlier run; each Redis test
gets its own key prefix.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from memory.services import (
    DEFAULT_REDIS_URL,
    open_kind,
    postgres_schema,
    postgres_server,
    redis_answers,
    require_redis_extra,
    throwaway_redis,
)

from builtin_providers.stores import ItemStore

STORE_KINDS = ["jsonl", "sqlite", "postgres"]
RANKED_KINDS = ["sqlite", "postgres"]


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


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ItemStore]:
    """One empty store of each kind."""
    opened = open_kind(request.param, tmp_path, request)
    yield opened
    await opened.aclose()


@pytest.fixture(params=RANKED_KINDS)
async def ranked_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ItemStore]:
    """One empty store of each kind that ranks full text."""
    opened = open_kind(request.param, tmp_path, request)
    yield opened
    await opened.aclose()
