"""Batches on PostgreSQL: their SQL (named constants, ``{s}`` = schema) and the steps the
store runs inside a transaction (``conn.transaction()``; the pool is autocommit).

Under READ COMMITTED two workers finishing a batch's last two members at once would each
count the other's member as still running and neither would fire. So every step that may
change a batch locks its row first (``SELECT … FOR UPDATE``, batches in id order, always
*after* the member rows were updated, so no cycle of waits can form), and only then counts
the members, in a new statement: a new snapshot, which sees the commit of whichever
transaction held the lock before. The later transaction fires; the earlier one saw a member
still running and left the batch open.

Every transition that can make a job terminal calls :func:`close_batches` (or
:func:`close_for_jobs`) in its own transaction; a retry calls :func:`reopen_for_jobs`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from durq.errors import ConfigError
from durq.failpoints import hit
from durq.model.batches import (
    BUILDING,
    OPEN,
    PURGED_REASON,
    TERMINAL_SQL,
    BatchRecord,
    NewBatch,
    callback_key,
    callback_payload,
    outcome_of,
)
from durq.store.postgres.connection import render
from durq.store.postgres.queries import PURGEABLE

BATCH_COLUMNS = (
    "id, state, on_complete, queue, priority, max_attempts, meta, size, fired, outcome, "
    "counts, aborted, callback_job_id, created_at, sealed_at, completed_at"
)

INSERT_BATCH = """
INSERT INTO {s}.batches (state, on_complete, queue, priority, max_attempts, meta, created_at)
VALUES ('building', %(on_complete)s, %(queue)s, %(priority)s, %(max_attempts)s, %(meta)s,
        {s}.epoch(%(at)s))
RETURNING id
"""

SELECT_BATCH = "SELECT " + BATCH_COLUMNS + " FROM {s}.batches WHERE id = %(id)s"

# An enqueue into a batch holds its row FOR SHARE: sealing (FOR UPDATE) waits for it.
BATCH_STATE_SHARED = "SELECT state FROM {s}.batches WHERE id = %(id)s FOR SHARE"

LOCK_BATCHES = """
SELECT id, state, on_complete, queue, priority, max_attempts, meta, fired, aborted
FROM {s}.batches WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id FOR UPDATE
"""

JOIN_BATCH = "UPDATE {s}.jobs SET batch_id = %(batch_id)s WHERE id = ANY(%(ids)s::bigint[])"

GROW_BATCH = "UPDATE {s}.batches SET size = size + %(n)s WHERE id = %(id)s"

CANCEL_MEMBERS = (
    """
UPDATE {s}.jobs
SET state = 'cancelled', finished_at = {s}.epoch(%(at)s), lease_token = NULL,
    lease_expires_at = NULL
WHERE batch_id = %(id)s AND state NOT IN """
    + TERMINAL_SQL
    + " RETURNING id"
)

SEAL_BATCH = """
UPDATE {s}.batches SET state = 'open', sealed_at = {s}.epoch(%(at)s), aborted = %(aborted)s
WHERE id = %(id)s AND state = 'building'
"""

BATCHES_OF_JOBS = """
SELECT DISTINCT batch_id FROM {s}.jobs
WHERE id = ANY(%(ids)s::bigint[]) AND batch_id IS NOT NULL
"""

ANY_MEMBER_PENDING = (
    "SELECT EXISTS (SELECT 1 FROM {s}.jobs WHERE batch_id = %(id)s AND state NOT IN "
    + TERMINAL_SQL
    + ")"
)

MEMBER_COUNTS = "SELECT state, count(*) FROM {s}.jobs WHERE batch_id = %(id)s GROUP BY state"

INSERT_CALLBACK = """
WITH ins AS (
    INSERT INTO {s}.jobs (queue, task, payload, priority, run_at, max_attempts, state, key,
                          created_at)
    VALUES (%(queue)s, %(task)s, %(payload)s, %(priority)s, {s}.epoch(%(at)s), %(max_attempts)s,
            'queued', %(key)s, {s}.epoch(%(at)s))
    ON CONFLICT (queue, key) WHERE key IS NOT NULL DO NOTHING
    RETURNING id, queue)
SELECT id, pg_notify(%(channel)s, queue) FROM ins
"""

COMPLETE_BATCH = """
UPDATE {s}.batches
SET state = 'done', outcome = %(outcome)s, counts = %(counts)s, fired = fired + 1,
    callback_job_id = coalesce(%(job_id)s, callback_job_id), completed_at = {s}.epoch(%(at)s)
WHERE id = %(id)s AND state = 'open'
"""

# Before a purge: the batches it will take members from, and whether any of those members
# is unfinished (the batch then loses work it was waiting for).
BATCHES_IN_PURGE = f"""
SELECT batch_id, bool_or(state NOT IN {TERMINAL_SQL}) FROM {{s}}.jobs AS j
WHERE queue = %(queue)s AND state = ANY(%(states)s::text[]) AND batch_id IS NOT NULL
  AND {PURGEABLE}
GROUP BY batch_id
"""

MARK_PURGED = """
UPDATE {s}.batches SET aborted = coalesce(aborted, %(reason)s) WHERE id = ANY(%(ids)s::bigint[])
"""

REOPEN_BATCHES = """
UPDATE {s}.batches SET state = 'open', completed_at = NULL
WHERE id = ANY(%(ids)s::bigint[]) AND state = 'done'
"""

_RENDERED: dict[str, dict[str, Any]] = {}


def _sql(schema: str) -> dict[str, Any]:
    found = _RENDERED.get(schema)
    if found is None:
        found = {
            name: render(value, schema)
            for name, value in globals().items()
            if name.isupper() and isinstance(value, str) and "{s}" in value
        }
        _RENDERED[schema] = found
    return found


class Batches:
    """The batch steps for one schema; every method runs on the caller's connection, inside
    the caller's transaction. ``at`` is the store's injected clock (None: the database's)."""

    def __init__(self, schema: str, channel: str) -> None:
        self.sql = _sql(schema)
        self.channel = channel

    def create(self, conn: psycopg.Connection[Any], spec: NewBatch, at: float | None) -> int:
        row = conn.execute(
            self.sql["INSERT_BATCH"],
            {
                "at": at,
                "on_complete": spec.on_complete,
                "queue": spec.queue,
                "priority": spec.priority,
                "max_attempts": spec.max_attempts,
                "meta": spec.meta,
            },
        ).fetchone()
        assert row is not None
        return int(row[0])

    def require_building(self, conn: psycopg.Connection[Any], batch_id: int) -> None:
        """Raise unless the batch is being built; holds its row FOR SHARE till commit.

        Raises:
            ConfigError: no such batch, or it was sealed (its block has exited).
        """
        row = conn.execute(self.sql["BATCH_STATE_SHARED"], {"id": batch_id}).fetchone()
        if row is None:
            raise ConfigError(f"no batch with id {batch_id}")
        if row[0] != BUILDING:
            raise ConfigError(
                f"batch {batch_id} is sealed (its block exited); jobs can join a batch only "
                "inside its `with dq.batch()` block"
            )

    def add_members(
        self, conn: psycopg.Connection[Any], batch_id: int, job_ids: Sequence[int]
    ) -> None:
        if not job_ids:
            return
        conn.execute(self.sql["JOIN_BATCH"], {"batch_id": batch_id, "ids": list(job_ids)})
        conn.execute(self.sql["GROW_BATCH"], {"id": batch_id, "n": len(job_ids)})

    def seal(
        self,
        conn: psycopg.Connection[Any],
        batch_id: int,
        aborted: str | None,
        at: float | None,
        cancelled: list[int] | None = None,
    ) -> bool:
        """building → open (cancelling unfinished members first when ``aborted``; their ids
        go to ``cancelled``, for their dependents), then close it at once if every member is
        already terminal. False if it was not building."""
        rows = conn.execute(self.sql["LOCK_BATCHES"], {"ids": [batch_id]}).fetchall()
        if not rows or rows[0][1] != BUILDING:
            return False
        if aborted is not None:
            rows = conn.execute(self.sql["CANCEL_MEMBERS"], {"id": batch_id, "at": at}).fetchall()
            if cancelled is not None:
                cancelled.extend(int(r[0]) for r in rows)
        conn.execute(self.sql["SEAL_BATCH"], {"id": batch_id, "at": at, "aborted": aborted})
        self.close_batches(conn, [batch_id], at)
        return True

    def close_batches(
        self, conn: psycopg.Connection[Any], batch_ids: Iterable[int], at: float | None
    ) -> list[int]:
        """THE batch step: lock the batches (id order), and for each open one whose members
        are all terminal enqueue its callback job and mark it done, in the caller's
        transaction. Returns the callback job ids. Idempotent; see the module docstring."""
        ids = sorted(set(batch_ids))
        if not ids:
            return []
        fired: list[int] = []
        locked = conn.execute(self.sql["LOCK_BATCHES"], {"ids": ids}).fetchall()
        for batch_id, state, task, queue, priority, max_attempts, meta, times, aborted in locked:
            if state != OPEN:
                continue
            row = conn.execute(self.sql["ANY_MEMBER_PENDING"], {"id": batch_id}).fetchone()
            if row is None or row[0]:
                continue
            counts = {
                str(s): int(n) for s, n in conn.execute(self.sql["MEMBER_COUNTS"], {"id": batch_id})
            }
            outcome = outcome_of(counts, aborted is not None)
            hit("batch_complete")
            job_id = None
            if task is not None:
                inserted = conn.execute(
                    self.sql["INSERT_CALLBACK"],
                    {
                        "at": at,
                        "queue": queue,
                        "task": task,
                        "payload": callback_payload(int(batch_id), outcome, counts, meta),
                        "priority": priority,
                        "max_attempts": max_attempts,
                        "key": callback_key(int(batch_id), int(times) + 1),
                        "channel": self.channel,
                    },
                ).fetchone()
                if inserted is not None:
                    job_id = int(inserted[0])
                    fired.append(job_id)
            conn.execute(
                self.sql["COMPLETE_BATCH"],
                {
                    "at": at,
                    "id": batch_id,
                    "outcome": outcome,
                    "counts": json.dumps(counts, sort_keys=True),
                    "job_id": job_id,
                },
            )
        return fired

    def batches_of(self, conn: psycopg.Connection[Any], job_ids: Sequence[int]) -> list[int]:
        rows = conn.execute(self.sql["BATCHES_OF_JOBS"], {"ids": list(job_ids)}).fetchall()
        return [int(r[0]) for r in rows]

    def close_for_jobs(
        self, conn: psycopg.Connection[Any], job_ids: Sequence[int], at: float | None
    ) -> list[int]:
        """:meth:`close_batches` for the batches of these jobs (cancel, reaper, release)."""
        if not job_ids:
            return []
        batch_ids = self.batches_of(conn, job_ids)
        return self.close_batches(conn, batch_ids, at) if batch_ids else []

    def batches_in_purge(
        self, conn: psycopg.Connection[Any], queue: str, states: Sequence[str]
    ) -> list[tuple[int, bool]]:
        """The batches a purge of ``queue`` / ``states`` takes members from, each with
        whether it takes an unfinished one (call it before the delete, in its transaction)."""
        rows = conn.execute(
            self.sql["BATCHES_IN_PURGE"], {"queue": queue, "states": list(states)}
        ).fetchall()
        return [(int(r[0]), bool(r[1])) for r in rows]

    def after_purge(
        self,
        conn: psycopg.Connection[Any],
        hit_batches: Sequence[tuple[int, bool]],
        at: float | None,
    ) -> None:
        """After a purge deleted members (same transaction): a batch that lost unfinished
        members is marked aborted (never ``completed``), and every batch it touched is
        closed if nothing is left to wait for (else its callback would never fire)."""
        if not hit_batches:
            return
        lost = [batch_id for batch_id, unfinished in hit_batches if unfinished]
        if lost:
            conn.execute(self.sql["LOCK_BATCHES"], {"ids": sorted(lost)})
            conn.execute(self.sql["MARK_PURGED"], {"ids": lost, "reason": PURGED_REASON})
        self.close_batches(conn, [batch_id for batch_id, _ in hit_batches], at)

    def reopen_for_jobs(self, conn: psycopg.Connection[Any], job_ids: Sequence[int]) -> None:
        """A member went back to the queue (dq.retry): its done batch is open again. The
        lock comes first, so a concurrent close has either committed (we see done) or waits
        for us (and then sees the member queued)."""
        batch_ids = self.batches_of(conn, job_ids)
        if batch_ids:
            conn.execute(self.sql["LOCK_BATCHES"], {"ids": sorted(batch_ids)})
            conn.execute(self.sql["REOPEN_BATCHES"], {"ids": batch_ids})

    def get(self, conn: psycopg.Connection[Any], batch_id: int) -> BatchRecord | None:
        row = conn.execute(self.sql["SELECT_BATCH"], {"id": batch_id}).fetchone()
        if row is None:
            return None
        record = BatchRecord(*row)
        record.members = {
            str(s): int(n) for s, n in conn.execute(self.sql["MEMBER_COUNTS"], {"id": batch_id})
        }
        return record
