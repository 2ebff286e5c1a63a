"""PostgreSQL plumbing: the server probe, and a fresh schema or database per case.

Every case gets its own name (``bench_<random hex>``) and drops it afterwards, even when
the case fails, so runs can share a server with other users.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

PG_URL_ENV = "BENCH_PG_URL"
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
CONNECT_TIMEOUT = 3
DROP_RETRY_SECONDS = 20.0


def default_pg_url() -> str:
    return os.environ.get(PG_URL_ENV, DEFAULT_PG_URL)


def fresh_name() -> str:
    """``bench_<16 hex digits>``: a schema or database name nobody else uses."""
    return f"bench_{secrets.token_hex(8)}"


def with_query(url: str, **params: str) -> str:
    """``url`` with query parameters added (or replaced)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))


def with_database(url: str, database: str) -> str:
    """``url`` pointing at another database on the same server."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{database}"))


def _connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)


def server_info(url: str) -> dict[str, Any]:
    """Facts about the server (version and the durability settings every peer shares).

    Raises:
        psycopg.OperationalError: the server does not answer.
    """
    settings = (
        "server_version",
        "synchronous_commit",
        "fsync",
        "full_page_writes",
        "wal_sync_method",
        "max_connections",
    )
    with _connect(url) as conn:
        info: dict[str, Any] = {
            name: conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0]
            for name in settings
        }
    info["url"] = mask(url)
    return info


def mask(url: str) -> str:
    """``url`` without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _drop(url: str, statement: str) -> None:
    """Run a ``DROP``; retry for a while if the server is away (restarting), so that a
    case interrupted by a restart still cleans up once the server is back."""
    import psycopg

    deadline = time.monotonic() + DROP_RETRY_SECONDS
    while True:
        try:
            with _connect(url) as conn:
                conn.execute(statement)
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@contextlib.contextmanager
def durq_schema(url: str) -> Iterator[str]:
    """A durq URL whose tables go to a new schema; the schema is dropped afterwards.

    durq creates the schema itself (its migrations) when the store first opens.
    """
    name = fresh_name()
    try:
        yield with_query(url, schema=name)
    finally:
        _drop(url, f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@contextlib.contextmanager
def fresh_database(url: str) -> Iterator[str]:
    """A new, empty database on the server of ``url``; dropped afterwards (``FORCE``
    closes sessions a killed child may have left)."""
    name = fresh_name()
    with _connect(url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(url, name)
    finally:
        _drop(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
