"""Fixtures of the memory tests: real servers, one fresh store of each kind per test.

Each PostgreSQL test gets a schema of its own (``t<pid>_<random>``), dropped afterwards, so
tests never meet each other's rows nor anything left behind by an earlier run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from memory.services import open_kind
from memory.stores_fixtures import pg_schema, postgres_dsn

from builtin_providers.stores import ItemStore

STORE_KINDS = ["jsonl", "sqlite", "postgres"]
RANKED_KINDS = ["sqlite", "postgres"]
__all__ = ["pg_schema", "postgres_dsn"]  # the server's fixtures, for this folder


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
