"""Fixtures of the memory tests: real servers, one fresh store of each kind per test.

Each PostgreSQL test gets a schema of its own (``t<pid>_<random>``), dropped afterwards, so
tests never meet each other's rows nor anything left behind by an earlier run; each Redis test
gets its own key prefix.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from memory.services import (
    DEFAULT_POSTGRES_DSN,
    DEFAULT_REDIS_URL,
    open_kind,
    postgres_answers,
    redis_answers,
    throwaway_postgres,
    throwaway_redis,
    unavailable,
)

from builtin_providers.stores import ItemStore

STORE_KINDS = ["jsonl", "sqlite", "postgres"]
RANKED_KINDS = ["sqlite", "postgres"]


def unique_schema() -> str:
    return f"t{os.getpid()}_{uuid.uuid4().hex[:10]}"


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A PostgreSQL server that answers: the configured one, else a throwaway cluster."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[postgres]')")
    dsn = os.environ.get("COMPOSER_TEST_POSTGRES_DSN", DEFAULT_POSTGRES_DSN)
    if postgres_answers(dsn):
        yield dsn
        return
    with throwaway_postgres() as cluster:
        yield cluster.dsn


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis server that answers: the configured one, else a throwaway redis-server."""
    try:
        import redis  # noqa: F401
    except ImportError:
        unavailable("the redis client is not installed (pip install -e '.[redis]')")
    url = os.environ.get("COMPOSER_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    if redis_answers(url):
        yield url
        return
    with throwaway_redis() as started:
        yield started


@pytest.fixture
def pg_schema(postgres_dsn: str) -> Iterator[str]:
    """A schema name no other test uses; dropped afterwards."""
    schema = unique_schema()
    yield schema
    drop_schema(postgres_dsn, schema)


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
