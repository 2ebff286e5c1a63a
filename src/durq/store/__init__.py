"""Choosing a store backend by URL."""

from __future__ import annotations

import time
from collections.abc import Callable

from durq.errors import ConfigError
from durq.model import Inserted, NewJob, StatusData, WorkerInfo
from durq.store.base import Store

__all__ = ["Inserted", "NewJob", "StatusData", "Store", "WorkerInfo", "open_store"]


def open_store(
    url: str, *, clock: Callable[[], float] = time.time, auto_migrate: bool = True
) -> Store:
    """Open the store a URL names and bring its schema up to date.

    Args:
        url: ``sqlite:///path.db``, a bare file path, or ``postgresql://...``.
        clock: seconds since the epoch (tests inject one to move time).
        auto_migrate: create or upgrade the schema on open; when False, refuse a database
            without this durq's exact schema instead (read-only tools).

    Raises:
        ConfigError: an unknown scheme or malformed URL.
        StoreError: the database cannot be opened.
        SchemaTooNew: the database was migrated by a newer durq.
    """
    if url.startswith(("postgres://", "postgresql://")):
        from durq.store.postgres.store import PostgresStore

        return PostgresStore(url, clock=clock, auto_migrate=auto_migrate)
    if "://" in url and not url.startswith("sqlite:"):
        raise ConfigError(
            f"unknown database URL scheme in {url!r}; use sqlite:///path.db or postgresql://..."
        )
    from durq.store.sqlite.store import SqliteStore

    return SqliteStore(url, clock=clock, auto_migrate=auto_migrate)
