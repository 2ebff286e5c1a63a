"""SQL of steps and retention on SQLite (``ctx.step``, ``dq.prune``), one constant each.

Parameters are named (``:name``); times are REAL seconds from the store's clock.
"""

from __future__ import annotations

from durq.store.sqlite.queries import JOB_COLUMNS

# What a step needs to know in one read: its stored result (NULL when not recorded) and
# whether this attempt still holds the job's lease.
STEP_STATE = """
SELECT (SELECT result FROM steps WHERE job_id = :job_id AND name = :name),
       EXISTS (SELECT 1 FROM jobs
               WHERE id = :job_id AND lease_token = :token AND state = 'running')
"""

# Record a step, fenced by the lease token: nothing is inserted unless the attempt still
# holds the lease. A name already recorded is kept (first write wins).
SAVE_STEP = """
INSERT INTO steps (job_id, name, result, attempt, created_at)
SELECT id, :name, :result, attempts, :now FROM jobs
WHERE id = :job_id AND lease_token = :token AND state = 'running'
ON CONFLICT (job_id, name) DO NOTHING
"""

LIST_STEPS = """
SELECT name, result, attempt, created_at FROM steps WHERE job_id = :job_id
ORDER BY created_at, name
"""

# Forget a job's steps, unless it is running (an attempt may be using them right now).
CLEAR_STEPS = """
DELETE FROM steps WHERE job_id = :job_id
  AND NOT EXISTS (SELECT 1 FROM jobs WHERE id = :job_id AND state = 'running')
"""

# Retention: one bounded chunk of one terminal state, finished more than :older_than
# seconds before :now, optionally of one queue. The outer state test makes it impossible
# for any non-terminal job to be deleted, whatever the caller passes as :state. Its steps
# go with it (trigger jobs_delete_steps). Members of a batch that has not fired yet are
# kept: deleting them would change its counts or keep it from ever firing. So are parents
# of a child that has not ended: a fan-in's child gets its parents' results in its payload
# when it is released (a deleted parent's would be missing), and ctx.parent_results()
# reads them when it runs.
PRUNE_JOBS = """
DELETE FROM jobs
WHERE id IN (SELECT j.id FROM jobs AS j INDEXED BY jobs_finished
             WHERE j.state = :state AND j.finished_at IS NOT NULL
               AND j.finished_at < :now - :older_than
               AND (:queue IS NULL OR j.queue = :queue)
               AND (j.batch_id IS NULL
                    OR j.batch_id IN (SELECT id FROM batches WHERE state = 'done'))
               AND (j.has_children = 0
                    OR NOT EXISTS (SELECT 1 FROM job_deps d JOIN jobs c ON c.id = d.child_id
                                   WHERE d.parent_id = j.id
                                     AND c.state NOT IN ('succeeded', 'failed',
                                                         'cancelled', 'expired')))
             LIMIT :limit)
  AND state IN ('succeeded', 'failed', 'cancelled', 'expired')
"""

# The running jobs for status (with their progress), through the partial index of running
# rows rather than a scan of the whole table.
RUNNING_JOBS = f"""
SELECT {JOB_COLUMNS} FROM jobs INDEXED BY jobs_leases
WHERE state = 'running'
ORDER BY id DESC
LIMIT :limit
"""
