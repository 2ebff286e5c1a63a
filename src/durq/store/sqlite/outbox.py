"""The outbox on SQLite: checks on the caller's connection before durq writes a job in
the caller's transaction (``enqueue(..., connection=conn)``).

Two mistakes would otherwise end badly:

- **Another file.** The job would be written where no worker of this app looks (when
  that file has durq's tables), or fail with "no such table: jobs" named after the
  app's own file, which has them.
- **No schema yet.** The first use of a new file creates durq's tables, which takes the
  write lock; the caller's open transaction already holds it, so the open waited the
  whole ``lock_timeout`` (30 s) and failed as busy, "locked by another process".
"""

from __future__ import annotations

import os
import sqlite3

from durq.errors import ConfigError
from durq.store.sqlite.connection import (
    SqliteOptions,
    migration_files,
    schema_version,
    translate,
)


def main_file(conn: sqlite3.Connection) -> str:
    """The absolute path of ``conn``'s main database ('' for an in-memory or temporary
    one), from ``PRAGMA database_list``."""
    for _seq, name, path in conn.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return str(path or "")
    return ""


def check_connection(conn: sqlite3.Connection, opts: SqliteOptions, schema: bool) -> None:
    """Refuse ``conn`` for an outbox enqueue on the database ``opts`` names.

    Args:
        conn: the caller's connection, inside the caller's transaction (nothing is written).
        opts: the app's SQLite options (its file).
        schema: also check that durq's schema is there and current in that file (before
            the app's store is first opened, which would otherwise create it).

    Raises:
        ConfigError: ``conn`` is on another file (or in memory), or, with ``schema``, the
            file has no current durq schema yet (the message says how to create it).
        StoreError: the connection cannot be read (closed, say).
    """
    try:
        problem = _problem(conn, opts, schema)
    except sqlite3.Error as exc:
        raise translate(exc, opts.path) from exc
    if problem is not None:
        raise ConfigError(problem)


def _problem(conn: sqlite3.Connection, opts: SqliteOptions, schema: bool) -> str | None:
    ours = os.path.realpath(opts.path)
    theirs = main_file(conn)
    if not theirs or os.path.realpath(theirs) != ours:
        where = theirs or "an in-memory database"
        return (
            f"connection= is on {where}, but this app's jobs are in {ours}: the outbox writes "
            "the job in your transaction, so the connection must be on durq's own file"
        )
    if schema:
        latest = migration_files()[-1][0]
        current = schema_version(conn)
        if current < latest:
            return (
                f"{ours} has no current durq schema yet (v{current} of v{latest}), and "
                "creating it needs the write lock your open transaction holds: create it "
                f"once before the first transaction (`durq migrate --db sqlite:///{ours}`, or "
                "dq.store.migrate() at start-up)"
            )
    return None
