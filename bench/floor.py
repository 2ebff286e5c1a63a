"""The raw-SQL floor, measured in the same run as durq: what the disk (SQLite) or the server
(PostgreSQL) allows for durq's own rows, with no queue library around the statements.

Each case opens durq's schema (created by durq's migrations, so the rows, indexes and
pragmas are the ones durq writes) and then drives it with plain ``sqlite3`` / ``psycopg``
statements in a loop: the figures are the cost of the commits and the index updates
alone, which no Python queue can beat. durq's ratio to them is its own overhead.
"""

from __future__ import annotations

import time
from typing import Any

from bench.common import case_dir, sqlite_url
from bench.durq_app import make_app

Figures = dict[str, Any]

INSERT = (
    "INSERT INTO jobs (queue, task, payload, priority, run_at, max_attempts, state, created_at)"
    " VALUES ('default', 'noop', '{}', 0, ?, 3, 'queued', ?)"
)
CLAIM = """
UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_token = 1,
       lease_expires_at = ?, worker_id = 'floor', started_at = ?
WHERE id IN (SELECT id FROM jobs WHERE state = 'queued' AND queue = 'default' AND run_at <= ?
             ORDER BY priority, run_at, id LIMIT ?)
RETURNING id
"""
FINISH = (
    "UPDATE jobs SET state = 'succeeded', finished_at = ?, lease_token = NULL,"
    " lease_expires_at = NULL WHERE id = ? AND lease_token = 1 AND state = 'running'"
)


def sqlite_floor(base: str, n: int, synchronous: str | None) -> Figures:
    """On one SQLite file at the given ``synchronous`` level: ``n`` one-row INSERT commits;
    ``n`` rows in transactions of 100; and ``n`` claim-and-complete cycles of one job per
    transaction (claim then finish, one commit), then of 100 jobs per transaction."""
    import sqlite3

    with case_dir(base, "floor") as d:
        app = make_app(sqlite_url(d / "jobs.db", synchronous))
        app.dq.store.migrate()
        app.dq.close()
        conn = sqlite3.connect(d / "jobs.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {(synchronous or 'full').upper()}")
        try:
            start = time.perf_counter()
            for _ in range(n):
                now = time.time()
                conn.execute(INSERT, (now, now))
            one = n / (time.perf_counter() - start)
            start = time.perf_counter()
            for _ in range(n // 100):
                conn.execute("BEGIN IMMEDIATE")
                for _ in range(100):
                    now = time.time()
                    conn.execute(INSERT, (now, now))
                conn.execute("COMMIT")
            hundred = (n // 100 * 100) / (time.perf_counter() - start)
            drain_one = _drain(conn, n, 1)
            drain_hundred = _drain(conn, n // 100 * 100, 100)
        finally:
            conn.close()
    return {
        "enqueue_one_rate": one,
        "enqueue_100_rate": hundred,
        "drain_1_rate": drain_one,
        "drain_100_rate": drain_hundred,
        "jobs": n,
    }


def _drain(conn: Any, n: int, per_tx: int) -> float:
    start = time.perf_counter()
    done = 0
    while done < n:
        conn.execute("BEGIN IMMEDIATE")
        now = time.time()
        ids = [r[0] for r in conn.execute(CLAIM, (now + 30, now, now, per_tx)).fetchall()]
        for job_id in ids:
            conn.execute(FINISH, (time.time(), job_id))
        conn.execute("COMMIT")
        if not ids:
            break
        done += len(ids)
    return done / (time.perf_counter() - start)


PG_INSERT = """
INSERT INTO {s}.jobs (queue, task, payload, priority, run_at, max_attempts, state, created_at)
VALUES ('default', 'noop', '{{}}', 0, {s}.epoch(NULL), 3, 'queued', {s}.epoch(NULL))
"""
PG_CLAIM_FINISH = """
UPDATE {s}.jobs SET state = 'succeeded', attempts = attempts + 1, started_at = {s}.epoch(NULL),
       finished_at = {s}.epoch(NULL)
WHERE id = (SELECT id FROM {s}.jobs WHERE state = 'queued' AND queue = 'default'
            AND run_at <= {s}.epoch(NULL) ORDER BY priority, run_at, id LIMIT 1
            FOR UPDATE SKIP LOCKED)
RETURNING id
"""


def pg_floor(pg_url: str, n: int) -> Figures:
    """On a fresh durq schema: ``n`` one-row INSERT statements (each its own commit), then
    ``n`` jobs claimed and completed one statement (one commit) each."""
    import psycopg

    from bench.pg import durq_schema

    with durq_schema(pg_url) as url:
        app = make_app(url)
        app.dq.store.migrate()
        app.dq.close()
        schema = url.split("schema=", 1)[1].split("&", 1)[0]
        quoted = f'"{schema}"'
        with psycopg.connect(pg_url, autocommit=True) as conn:
            insert = PG_INSERT.format(s=quoted)
            start = time.perf_counter()
            for _ in range(n):
                conn.execute(insert)
            one = n / (time.perf_counter() - start)
            claim = PG_CLAIM_FINISH.format(s=quoted)
            start = time.perf_counter()
            done = 0
            while conn.execute(claim).fetchone() is not None:
                done += 1
            drain = done / (time.perf_counter() - start)
    return {"enqueue_one_rate": one, "drain_1_rate": drain, "jobs": n}
