"""Where a ``memory`` provider's items live, as a manifest writes it: ``source:`` and its models.

``branch`` (the branch's own ``memory``), ``{jsonl: path}``, ``{sqlite: path}`` or
``{postgres: {dsn: ...}}``; each of composer's stores is opened once per place per loaded
manifest (``builtin_providers.memory``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from composer.plugin import ManifestPath, StrictModel

__all__ = ["JsonlSource", "PostgresConnection", "PostgresSource", "Source", "SqliteSource"]


class JsonlSource(StrictModel):
    """A JSONL memory file, relative to the manifest that names it."""

    jsonl: ManifestPath = Field(
        description="One JSON object per line: content, tags, metadata, id."
    )


_SEED = "A JSONL file imported on first use and again when it changes (ids already there stay)."
_SHARED = "Several teams or tenants use this store: `namespace` is then required."


class SqliteSource(StrictModel):
    """A SQLite database file, relative to the manifest: several processes, one machine."""

    sqlite: ManifestPath = Field(
        description="The database file; created, with its schema, on first use."
    )
    seed: ManifestPath | None = Field(default=None, description=_SEED)
    shared: bool = Field(default=False, description=_SHARED)


class PostgresConnection(StrictModel):
    """Where the PostgreSQL store lives."""

    dsn: str = Field(
        min_length=1,
        description="libpq URL or key=value string; give the password through ${VAR}.",
    )
    db_schema: str = Field(
        default="composer",
        alias="schema",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="The schema holding the tables; created or migrated on first use.",
    )
    pool_size: int = Field(default=4, ge=1, le=100, description="Connections kept per process.")
    connect_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description="Longest wait for a connection; past it the turn's provider fails.",
    )


class PostgresSource(StrictModel):
    """A PostgreSQL database: agents on many machines share it."""

    postgres: PostgresConnection = Field(description="The connection (needs the postgres extra).")
    seed: ManifestPath | None = Field(default=None, description=_SEED)
    shared: bool = Field(default=False, description=_SHARED)


Source = Literal["branch"] | JsonlSource | SqliteSource | PostgresSource
