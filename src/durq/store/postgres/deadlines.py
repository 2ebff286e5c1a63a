"""SQL of parked jobs and deadlines on PostgreSQL (docs/features/parked.md, deadlines.md).

One named constant per statement, like ``queries.py``; ``{s}`` is the schema. Every time is
``{s}.epoch(%(at)s)``, the database clock. :func:`sql` renders a statement for a schema.
"""

from __future__ import annotations

from typing import Any

from durq.store.postgres.connection import render

SET_EXTRAS = """
UPDATE {s}.jobs
SET state = CASE WHEN %(park)s THEN 'parked' ELSE state END,
    park_expires_at = created_at + %(park_ttl)s::float8,
    deadline = coalesce(%(deadline)s::float8, created_at + %(deadline_in)s::float8),
    notice_at = created_at + %(notice_after)s::float8
WHERE id = %(id)s
"""

ADOPT = """
UPDATE {s}.jobs
SET state = 'queued', run_at = greatest(run_at, {s}.epoch(%(at)s))
WHERE id = %(id)s AND state = 'parked'
  AND (park_expires_at IS NULL OR park_expires_at > {s}.epoch(%(at)s))
  AND (deadline IS NULL OR deadline > {s}.epoch(%(at)s))
"""

CANCEL_PARKED = """
UPDATE {s}.jobs
SET state = 'cancelled', finished_at = {s}.epoch(%(at)s)
WHERE id = %(id)s AND state = 'parked'
"""

# Expire the picked rows and enqueue one hook job per expired job, in one statement. Rows
# another transaction holds (a finish, a claim) are skipped and taken by the next pass.
_EXPIRE = """
held AS (  -- a running limited job keeps its slot until its body is gone: limits.md
    INSERT INTO {s}.limit_holds (name, holder, acquired_at, expires_at, job_id, job_token)
    SELECT limit_key, 'job ' || id, {s}.epoch(%(at)s), lease_expires_at, id, lease_token
    FROM picked
    WHERE state = 'running' AND limit_key IS NOT NULL
      AND lease_expires_at > {s}.epoch(%(at)s)),
done AS (
    UPDATE {s}.jobs AS j
    SET state = 'expired', finished_at = {s}.epoch(%(at)s), lease_token = NULL,
        lease_expires_at = NULL,
        errors = {s}.append_error(j.errors, json_build_object(
            'attempt', j.attempts, 'at', {s}.epoch(%(at)s), 'type', 'Expired',
            'message', %(message)s::text, 'traceback', '', 'kind', 'expired',
            -- a running attempt ended by its deadline keeps its start and lease holder
            'started_at', CASE WHEN j.state = 'running' THEN j.started_at END,
            'worker_id', CASE WHEN j.state = 'running' THEN j.worker_id END)::text)
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, coalesce(j.hook_queue, j.queue) AS queue, j.task, j.priority),
hooks AS (
    INSERT INTO {s}.jobs (queue, task, payload, priority, run_at, max_attempts, state, key,
                          created_at)
    SELECT queue, %(prefix)s || task, json_build_object('job_id', id, 'hook', 'expire')::text,
           priority, {s}.epoch(%(at)s), %(max_attempts)s, 'queued', 'durq.expire:' || id,
           {s}.epoch(%(at)s)
    FROM done
    ON CONFLICT (queue, key) WHERE key IS NOT NULL DO NOTHING)
SELECT id, queue FROM done
"""

EXPIRE_PAST_DEADLINE = (
    """
WITH picked AS (
    SELECT id, state, limit_key, lease_expires_at, lease_token FROM {s}.jobs
    WHERE deadline IS NOT NULL AND finished_at IS NULL AND deadline <= {s}.epoch(%(at)s)
      AND state IN ('queued', 'running', 'parked', 'waiting')
    ORDER BY deadline LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED),
"""
    + _EXPIRE
)

EXPIRE_PARKED = (
    """
WITH picked AS (
    SELECT id, state, limit_key, lease_expires_at, lease_token FROM {s}.jobs
    WHERE state = 'parked' AND park_expires_at IS NOT NULL
      AND park_expires_at <= {s}.epoch(%(at)s)
    ORDER BY park_expires_at LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED),
"""
    + _EXPIRE
)

NOTICE_SLOW = """
WITH picked AS (
    SELECT id FROM {s}.jobs
    WHERE notice_at IS NOT NULL AND noticed_at IS NULL AND finished_at IS NULL
      AND notice_at <= {s}.epoch(%(at)s) AND state IN ('queued', 'running', 'parked')
      AND (deadline IS NULL OR deadline > {s}.epoch(%(at)s))
    ORDER BY notice_at LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED),
done AS (
    UPDATE {s}.jobs AS j SET noticed_at = {s}.epoch(%(at)s)
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, coalesce(j.hook_queue, j.queue) AS queue, j.task, j.priority),
hooks AS (
    INSERT INTO {s}.jobs (queue, task, payload, priority, run_at, max_attempts, state, key,
                          created_at)
    SELECT queue, %(prefix)s || task, json_build_object('job_id', id, 'hook', 'slow')::text,
           priority, {s}.epoch(%(at)s), %(max_attempts)s, 'queued', 'durq.slow:' || id,
           {s}.epoch(%(at)s)
    FROM done
    ON CONFLICT (queue, key) WHERE key IS NOT NULL DO NOTHING)
SELECT id, queue FROM done
"""

_rendered: dict[tuple[str, str], Any] = {}


def sql(name: str, schema: str) -> Any:
    """The statement ``name`` of this module for ``schema`` (rendered once, then cached)."""
    key = (name, schema)
    if key not in _rendered:
        _rendered[key] = render(globals()[name], schema)
    return _rendered[key]
