"""Real PostgreSQL and Redis servers for the memory tests: this machine's, or throwaway ones.

The servers at 127.0.0.1 (or ``COMPOSER_TEST_POSTGRES_DSN`` / ``COMPOSER_TEST_REDIS_URL``)
are used when they answer. Otherwise a throwaway PostgreSQL cluster is started with the local
``initdb``/``pg_ctl`` (as the ``postgres`` user when running as root, which initdb refuses),
and a throwaway ``redis-server``, each on a free port in a temporary folder. With neither, the
test is skipped with the reason, unless ``COMPOSER_REQUIRE_SERVICES=1`` (CI), which makes it a
failure: CI can never skip them silently.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from builtin_providers.stores import (
    ItemStore,
    JsonlMemoryStore,
    PostgresMemoryStore,
    SqliteMemoryStore,
)

__all__ = [
    "DEFAULT_POSTGRES_DSN",
    "DEFAULT_REDIS_URL",
    "PostgresCluster",
    "free_port",
    "open_kind",
    "postgres_answers",
    "postgres_binaries",
    "postgres_database",
    "postgres_schema",
    "postgres_server",
    "redis_answers",
    "redis_prefix_of",
    "require_postgres_extra",
    "require_redis_extra",
    "throwaway_postgres",
    "throwaway_redis",
    "unavailable",
]

DEFAULT_POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def unavailable(reason: str) -> NoReturn:
    """Skip for want of a service, or fail when the run requires the services (CI)."""
    if os.environ.get("COMPOSER_REQUIRE_SERVICES") == "1":
        pytest.fail(f"COMPOSER_REQUIRE_SERVICES=1 and {reason}", pytrace=False)
    pytest.skip(reason)


def require_postgres_extra() -> None:
    """Skip (or fail, as ``unavailable``) when the postgres extra is not installed."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[postgres]')")


def require_redis_extra() -> None:
    """Skip (or fail, as ``unavailable``) when the redis extra is not installed."""
    try:
        import redis  # noqa: F401
    except ImportError:
        unavailable("the redis client is not installed (pip install -e '.[redis]')")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def postgres_answers(dsn: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def redis_answers(url: str) -> bool:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def postgres_binaries() -> Path | None:
    """The folder holding initdb and pg_ctl, if this machine has them."""
    found = shutil.which("initdb")
    candidates = [Path(found).parent] if found else []
    candidates += [Path("/usr/local/bin")]
    candidates += sorted((Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")), reverse=True)
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    return None


@dataclass
class PostgresCluster:
    """A throwaway cluster: its DSN, and stop/start for tests that take the server away."""

    bin: Path
    data: Path
    port: int
    user: str | None  # run as this user (root may not run a cluster)

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", self.user, "--"] if self.user else []
        subprocess.run(
            [*prefix, *command], check=True, capture_output=True, timeout=120, cwd=self.data.parent
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.data.parent} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self.data.parent / "log")
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", log, "-w", "start"
        )

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[PostgresCluster]:
    """A new cluster on a free port, removed afterwards; skips (or fails) without binaries."""
    folder = postgres_binaries()
    if folder is None:
        unavailable("no PostgreSQL server answers and no initdb/pg_ctl to start one")
    user = None
    root = Path(tempfile.mkdtemp(prefix="composer-pg-"))
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            unavailable("running as root with no 'postgres' user to run a throwaway cluster")
        os.chown(root, owner.pw_uid, owner.pw_gid)
        user = "postgres"
    cluster = PostgresCluster(folder, root / "data", free_port(), user)
    try:
        cluster._run(
            str(folder / "initdb"),
            "-D",
            str(cluster.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        )
        cluster.start()
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server that answers: the configured one, else a throwaway cluster."""
    require_postgres_extra()
    dsn = os.environ.get("COMPOSER_TEST_POSTGRES_DSN", DEFAULT_POSTGRES_DSN)
    if postgres_answers(dsn):
        yield dsn
        return
    with throwaway_postgres() as cluster:
        yield cluster.dsn


@contextlib.contextmanager
def postgres_schema(dsn: str) -> Iterator[str]:
    """A schema name no other test uses (``t<pid>_<random>``), dropped afterwards."""
    import psycopg

    schema = f"t{os.getpid()}_{uuid.uuid4().hex[:10]}"
    try:
        yield schema
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextlib.contextmanager
def postgres_database(dsn: str) -> Iterator[str]:
    """The URL of a database no other test uses (``t<pid>_<random>``), on the server of the
    URL ``dsn``, dropped afterwards with whatever connections are left: for a manifest whose
    schema names are fixed."""
    import psycopg

    name = f"t{os.getpid()}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urllib.parse.urlsplit(dsn)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def throwaway_redis() -> Iterator[str]:
    """A redis-server on a free port that keeps nothing on disk, stopped afterwards."""
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("no Redis server answers and no redis-server to start one")
    port = free_port()
    folder = tempfile.mkdtemp(prefix="composer-redis-")
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            folder,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 30
        while not redis_answers(url):
            if time.monotonic() > deadline or process.poll() is not None:
                unavailable("a throwaway redis-server did not start")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def redis_prefix_of(url: str) -> Iterator[str]:
    """A word no other test uses (``t<pid>_<random>``) for key prefixes; every key holding
    it is removed afterwards."""
    import redis

    word = f"t{os.getpid()}_{uuid.uuid4().hex[:10]}"
    try:
        yield word
    finally:
        client = redis.Redis.from_url(url)
        try:
            keys = list(client.scan_iter(match=f"*{word}*"))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


def open_kind(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> ItemStore:
    """A new, empty store of ``kind`` (PostgreSQL in a schema of its own)."""
    if kind == "jsonl":
        return JsonlMemoryStore(tmp_path / "memory.jsonl")
    if kind == "sqlite":
        return SqliteMemoryStore(tmp_path / "memory.sqlite")
    dsn = request.getfixturevalue("postgres_dsn")
    schema = request.getfixturevalue("pg_schema")
    return PostgresMemoryStore(dsn, schema=schema)
