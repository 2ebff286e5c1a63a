"""Raw access to a test database on either backend, for damaging rows on purpose."""

from __future__ import annotations

import sqlite3
from urllib.parse import parse_qsl, urlsplit

from durq.store.sqlite.connection import parse_url as parse_sqlite_url


def execute(url: str, statement: str, params: tuple[object, ...] = ()) -> None:
    """Run one statement against durq's ``jobs`` table, outside durq.

    ``statement`` uses ``?`` placeholders and the bare table name ``jobs``.
    """
    if url.startswith("postgresql://"):
        import psycopg

        schema = dict(parse_qsl(urlsplit(url).query)).get("schema", "durq")
        base = url.split("?", 1)[0]
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            conn.execute(statement.replace("?", "%s"), params)  # type: ignore[arg-type]
        return
    conn = sqlite3.connect(parse_sqlite_url(url).path)
    try:
        conn.execute(statement, params)
        conn.commit()
    finally:
        conn.close()


def query(url: str, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """The rows of one read against durq's tables, outside durq (as :func:`execute`)."""
    if url.startswith("postgresql://"):
        import psycopg

        schema = dict(parse_qsl(urlsplit(url).query)).get("schema", "durq")
        base = url.split("?", 1)[0]
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            return list(conn.execute(statement.replace("?", "%s"), params).fetchall())  # type: ignore[arg-type]
    conn = sqlite3.connect(parse_sqlite_url(url).path)
    try:
        return list(conn.execute(statement, params).fetchall())
    finally:
        conn.close()
