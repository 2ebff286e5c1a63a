"""SQL of steps and retention on PostgreSQL (``ctx.step``, ``dq.prune``), one constant each.

``{s}`` is the schema (the store renders these like ``queries.py``); every time is
``{s}.epoch(%(at)s)``, the database clock.
"""

from __future__ import annotations

from durq.store.postgres.queries import JOB_COLUMNS

# The stored result (NULL when not recorded) and whether this attempt holds the lease.
STEP_STATE = """
SELECT (SELECT result FROM {s}.steps WHERE job_id = %(job_id)s AND name = %(name)s),
       EXISTS (SELECT 1 FROM {s}.jobs
               WHERE id = %(job_id)s AND lease_token = %(token)s AND state = 'running')
"""

# Record a step, fenced by the lease token. FOR SHARE locks the job row and, under READ
# COMMITTED, re-checks the condition against a concurrent reap or cancel that commits
# first, so a step can never be recorded after its attempt lost the lease.
SAVE_STEP = """
INSERT INTO {s}.steps (job_id, name, result, attempt, created_at)
SELECT id, %(name)s, %(result)s, attempts, {s}.epoch(%(at)s) FROM {s}.jobs
WHERE id = %(job_id)s AND lease_token = %(token)s AND state = 'running'
FOR SHARE
ON CONFLICT (job_id, name) DO NOTHING
"""

LIST_STEPS = """
SELECT name, result, attempt, created_at FROM {s}.steps WHERE job_id = %(job_id)s
ORDER BY created_at, name
"""

CLEAR_STEPS = """
DELETE FROM {s}.steps WHERE job_id = %(job_id)s
  AND NOT EXISTS (SELECT 1 FROM {s}.jobs WHERE id = %(job_id)s AND state = 'running')
"""

# Retention: one bounded chunk of one terminal state, finished more than older_than seconds
# ago on the database clock, optionally of one queue. Rows are locked (SKIP LOCKED: a row
# being retried right now is left for the next pass) and the state is tested again on the
# row deleted, so no non-terminal job can ever be deleted. Steps go too (ON DELETE CASCADE).
# Further conditions (open batches, blobs) belong in this one statement. Parents of a child
# that has not ended are kept (a fan-in's released child gets every parent's result in its
# payload; ctx.parent_results() reads them when it runs).
PRUNE_JOBS = """
WITH doomed AS (
    SELECT j.id FROM {s}.jobs AS j
    WHERE j.state = %(state)s AND j.finished_at IS NOT NULL
      AND j.finished_at < {s}.epoch(%(at)s) - %(older_than)s
      AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
      AND (j.batch_id IS NULL
           OR j.batch_id IN (SELECT id FROM {s}.batches WHERE state = 'done'))
      AND (NOT j.has_children
           OR NOT EXISTS (SELECT 1 FROM {s}.job_deps d JOIN {s}.jobs c ON c.id = d.child_id
                          WHERE d.parent_id = j.id
                            AND c.state NOT IN ('succeeded', 'failed',
                                                'cancelled', 'expired')))
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
DELETE FROM {s}.jobs AS j USING doomed
WHERE j.id = doomed.id AND j.state IN ('succeeded', 'failed', 'cancelled', 'expired')
"""

# The running jobs for status (with their progress); the partial index jobs_leases holds
# exactly the running rows.
RUNNING_JOBS = (
    "SELECT " + JOB_COLUMNS + " FROM {s}.jobs WHERE state = 'running' ORDER BY id DESC "
    "LIMIT %(limit)s"
)
