"""Choosing a store backend by URL."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from durq.errors import ConfigError
from durq.model import Inserted, NewJob, StatusData, WorkerInfo
from durq.store.base import Store

__all__ = [
    "Inserted", "NewJob", "StatusData", "Store", "WorkerInfo", "check_outbox", "describe_url",
    "open_store",
]  # fmt: skip


def describe_url(url: str) -> str:
    """The database a URL names, for messages: a SQLite URL with its file's absolute path
    (a relative ``sqlite:///durq.db`` depends on the current directory), a PostgreSQL URL
    with its password masked. Never raises (a bad URL comes back as given)."""
    try:
        if url.startswith(("postgres://", "postgresql://")):
            from urllib.parse import urlsplit

            parts = urlsplit(url)
            if parts.password:
                netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
                return parts._replace(netloc=netloc).geturl()
            return url
        import os

        from durq.store.sqlite.connection import parse_url

        return f"sqlite:///{os.path.abspath(parse_url(url).path)}"
    except Exception:  # noqa: BLE001 - only a description
        return url


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
        ConfigError: an unknown scheme or malformed URL; a PostgreSQL URL without psycopg
            installed (the message says ``pip install 'durq[postgres]'``).
        StoreError: the database cannot be opened.
        SchemaTooNew: the database was migrated by a newer durq.
    """
    if url.startswith(("postgres://", "postgresql://")):
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"a postgresql:// URL needs the PostgreSQL driver, which is not installed "
                f"({exc.name} is missing): pip install 'durq[postgres]'"
            ) from None
        from durq.store.postgres.store import PostgresStore

        return PostgresStore(url, clock=clock, auto_migrate=auto_migrate)
    if "://" in url and not url.startswith("sqlite:"):
        raise ConfigError(
            f"unknown database URL scheme in {url!r}; use sqlite:///path.db or postgresql://..."
        )
    from durq.store.sqlite.store import SqliteStore

    return SqliteStore(url, clock=clock, auto_migrate=auto_migrate)


def check_outbox(url: str, connection: Any) -> None:
    """Before the store of ``url`` is first opened for an enqueue on ``connection`` (the
    caller's own transaction, the outbox): on SQLite, refuse at once a connection on
    another file, or a file without durq's current schema, which opening the store would
    have to create under the write lock that the caller's transaction holds (it waited
    ``lock_timeout`` and failed as busy). Nothing on PostgreSQL, where creating the schema
    takes no lock the caller's transaction holds.

    Raises:
        ConfigError: the connection is on another file, or the file has no current durq
            schema yet (the message says how to create it).
        StoreError: the connection cannot be read.
    """
    if url.startswith(("postgres://", "postgresql://")):
        return
    import sqlite3

    if not isinstance(connection, sqlite3.Connection):
        return  # the store's enqueue refuses it, naming the file
    from durq.store.sqlite.connection import parse_url
    from durq.store.sqlite.outbox import check_connection

    check_connection(connection, parse_url(url), schema=True)
