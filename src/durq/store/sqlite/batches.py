"""Batches on SQLite: their SQL (named constants) and the steps the store runs inside its
own write transaction (``BEGIN IMMEDIATE``), which already serialises every writer: two
workers finishing a batch's last two members take turns, and the second sees the first.

Every transition that can make a job terminal calls :func:`close_batches` (or
:func:`close_for_jobs`) in the same transaction; a retry calls :func:`reopen_for_jobs`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence

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
from durq.store.sqlite.queries import PURGEABLE

BATCH_COLUMNS = (
    "id, state, on_complete, queue, priority, max_attempts, meta, size, fired, outcome, "
    "counts, aborted, callback_job_id, created_at, sealed_at, completed_at"
)

INSERT_BATCH = """
INSERT INTO batches (state, on_complete, queue, priority, max_attempts, meta, created_at)
VALUES ('building', :on_complete, :queue, :priority, :max_attempts, :meta, :now)
RETURNING id
"""

SELECT_BATCH = f"SELECT {BATCH_COLUMNS} FROM batches WHERE id = :id"

BATCH_STATE = "SELECT state FROM batches WHERE id = :id"

JOIN_BATCH = """
UPDATE jobs SET batch_id = :batch_id WHERE id IN (SELECT value FROM json_each(:ids))
"""

GROW_BATCH = "UPDATE batches SET size = size + :n WHERE id = :id"

# The block raised: members it stored that have not finished are cancelled (a running one's
# lease is revoked, as dq.cancel does), so the callback reports what was really done.
CANCEL_MEMBERS = f"""
UPDATE jobs
SET state = 'cancelled', finished_at = :now, lease_token = NULL, lease_expires_at = NULL
WHERE batch_id = :id AND state NOT IN {TERMINAL_SQL}
RETURNING id
"""

SEAL_BATCH = """
UPDATE batches SET state = 'open', sealed_at = :now, aborted = :aborted
WHERE id = :id AND state = 'building'
"""

BATCHES_OF_JOBS = """
SELECT DISTINCT batch_id FROM jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND batch_id IS NOT NULL
"""

BATCH_FOR_CLOSE = """
SELECT state, on_complete, queue, priority, max_attempts, meta, fired, aborted
FROM batches WHERE id = :id
"""

# Reads jobs_batch (batch_id, state): stops at the first member that is not terminal.
ANY_MEMBER_PENDING = f"""
SELECT EXISTS (SELECT 1 FROM jobs WHERE batch_id = :id AND state NOT IN {TERMINAL_SQL})
"""

MEMBER_COUNTS = "SELECT state, count(*) FROM jobs WHERE batch_id = :id GROUP BY state"

INSERT_CALLBACK = """
INSERT INTO jobs (queue, task, payload, priority, run_at, max_attempts, state, key, created_at)
VALUES (:queue, :task, :payload, :priority, :now, :max_attempts, 'queued', :key, :now)
ON CONFLICT (queue, key) WHERE key IS NOT NULL DO NOTHING
RETURNING id
"""

COMPLETE_BATCH = """
UPDATE batches
SET state = 'done', outcome = :outcome, counts = :counts, fired = fired + 1,
    callback_job_id = coalesce(:job_id, callback_job_id), completed_at = :now
WHERE id = :id AND state = 'open'
"""

# Before a purge: the batches it will take members from, and whether any of those members
# is unfinished (the batch then loses work it was waiting for).
BATCHES_IN_PURGE = f"""
SELECT batch_id, max(state NOT IN {TERMINAL_SQL}) FROM jobs
WHERE queue = :queue AND state IN (SELECT value FROM json_each(:states))
  AND batch_id IS NOT NULL AND {PURGEABLE}
GROUP BY batch_id
"""

MARK_PURGED = """
UPDATE batches SET aborted = coalesce(aborted, :reason)
WHERE id IN (SELECT value FROM json_each(:ids))
"""

REOPEN_BATCHES = """
UPDATE batches SET state = 'open', completed_at = NULL
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'done'
"""


def create(conn: sqlite3.Connection, spec: NewBatch, now: float) -> int:
    row = conn.execute(
        INSERT_BATCH,
        {
            "on_complete": spec.on_complete,
            "queue": spec.queue,
            "priority": spec.priority,
            "max_attempts": spec.max_attempts,
            "meta": spec.meta,
            "now": now,
        },
    ).fetchone()
    return int(row[0])


def require_building(conn: sqlite3.Connection, batch_id: int) -> None:
    """Raise unless the batch exists and is still being built (its block is open).

    Raises:
        ConfigError: no such batch, or it was sealed (its block has exited).
    """
    row = conn.execute(BATCH_STATE, {"id": batch_id}).fetchone()
    if row is None:
        raise ConfigError(f"no batch with id {batch_id}")
    if row[0] != BUILDING:
        raise ConfigError(
            f"batch {batch_id} is sealed (its block exited); jobs can join a batch only "
            "inside its `with dq.batch()` block"
        )


def add_members(conn: sqlite3.Connection, batch_id: int, job_ids: Sequence[int]) -> None:
    """Mark freshly inserted jobs as members (same transaction as their insert)."""
    if not job_ids:
        return
    conn.execute(JOIN_BATCH, {"batch_id": batch_id, "ids": json.dumps(list(job_ids))})
    conn.execute(GROW_BATCH, {"id": batch_id, "n": len(job_ids)})


def seal(
    conn: sqlite3.Connection,
    batch_id: int,
    aborted: str | None,
    now: float,
    cancelled: list[int] | None = None,
) -> bool:
    """building → open (cancelling unfinished members first when ``aborted``; their ids go
    to ``cancelled``, for their dependents), then close it at once if every member is
    already terminal. False when it was not building."""
    if conn.execute(BATCH_STATE, {"id": batch_id}).fetchone() != (BUILDING,):
        return False
    if aborted is not None:
        rows = conn.execute(CANCEL_MEMBERS, {"id": batch_id, "now": now}).fetchall()
        if cancelled is not None:
            cancelled.extend(r[0] for r in rows)
    conn.execute(SEAL_BATCH, {"id": batch_id, "now": now, "aborted": aborted})
    close_batches(conn, [batch_id], now)
    return True


def close_batches(conn: sqlite3.Connection, batch_ids: Iterable[int], now: float) -> list[int]:
    """THE batch step: for each open batch whose members are all terminal, enqueue its
    callback job and mark it done, in the caller's transaction. Returns the callback ids.

    Call it in the same transaction as any change that can make a member terminal; it is
    idempotent (a batch that is not ``open``, or still has an unfinished member, is left
    alone), so calling it for a batch that did not complete costs two index reads.
    """
    fired: list[int] = []
    for batch_id in sorted(set(batch_ids)):
        row = conn.execute(BATCH_FOR_CLOSE, {"id": batch_id}).fetchone()
        if row is None or row[0] != OPEN:
            continue
        if conn.execute(ANY_MEMBER_PENDING, {"id": batch_id}).fetchone()[0]:
            continue
        _state, task, queue, priority, max_attempts, meta, times, aborted = row
        counts = {str(s): int(n) for s, n in conn.execute(MEMBER_COUNTS, {"id": batch_id})}
        outcome = outcome_of(counts, aborted is not None)
        hit("batch_complete")
        job_id = None
        if task is not None:
            inserted = conn.execute(
                INSERT_CALLBACK,
                {
                    "queue": queue,
                    "task": task,
                    "payload": callback_payload(batch_id, outcome, counts, meta),
                    "priority": priority,
                    "max_attempts": max_attempts,
                    "key": callback_key(batch_id, int(times) + 1),
                    "now": now,
                },
            ).fetchone()
            if inserted is not None:
                job_id = int(inserted[0])
                fired.append(job_id)
        conn.execute(
            COMPLETE_BATCH,
            {
                "id": batch_id,
                "outcome": outcome,
                "counts": json.dumps(counts, sort_keys=True),
                "job_id": job_id,
                "now": now,
            },
        )
    return fired


def batches_of(conn: sqlite3.Connection, job_ids: Sequence[int]) -> list[int]:
    rows = conn.execute(BATCHES_OF_JOBS, {"ids": json.dumps(list(job_ids))}).fetchall()
    return [int(r[0]) for r in rows]


def close_for_jobs(conn: sqlite3.Connection, job_ids: Sequence[int], now: float) -> list[int]:
    """:func:`close_batches` for the batches of these jobs (for transitions that do not know
    their rows' batch: cancel, the reaper, a shutdown release that failed a job)."""
    if not job_ids:
        return []
    batch_ids = batches_of(conn, job_ids)
    return close_batches(conn, batch_ids, now) if batch_ids else []


def batches_in_purge(
    conn: sqlite3.Connection, queue: str, states_json: str
) -> list[tuple[int, bool]]:
    """The batches that a purge of ``queue`` / ``states`` takes members from, each with
    whether it takes an unfinished one. Call it before the delete, in its transaction."""
    rows = conn.execute(BATCHES_IN_PURGE, {"queue": queue, "states": states_json}).fetchall()
    return [(int(r[0]), bool(r[1])) for r in rows]


def after_purge(
    conn: sqlite3.Connection, hit_batches: Sequence[tuple[int, bool]], now: float
) -> None:
    """After a purge deleted members (same transaction): a batch that lost unfinished
    members is marked aborted (its outcome can no longer be ``completed``), and every batch
    it touched is closed if nothing is left to wait for. Without this a purge of the last
    queued members left their batch open for ever and its callback never fired."""
    if not hit_batches:
        return
    lost = [batch_id for batch_id, unfinished in hit_batches if unfinished]
    if lost:
        conn.execute(MARK_PURGED, {"ids": json.dumps(lost), "reason": PURGED_REASON})
    close_batches(conn, [batch_id for batch_id, _ in hit_batches], now)


def reopen_for_jobs(conn: sqlite3.Connection, job_ids: Sequence[int]) -> None:
    """A member was put back in the queue (dq.retry): its done batch is open again."""
    batch_ids = batches_of(conn, job_ids)
    if batch_ids:
        conn.execute(REOPEN_BATCHES, {"ids": json.dumps(batch_ids)})


def get(conn: sqlite3.Connection, batch_id: int) -> BatchRecord | None:
    row = conn.execute(SELECT_BATCH, {"id": batch_id}).fetchone()
    if row is None:
        return None
    record = BatchRecord(*row)
    record.members = {str(s): int(n) for s, n in conn.execute(MEMBER_COUNTS, {"id": batch_id})}
    return record
