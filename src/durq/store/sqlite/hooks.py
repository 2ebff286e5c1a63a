"""SQL of on_fail hooks, hook queues and key lookups on SQLite (docs/features/hooks.md).

One named constant per statement, like ``queries.py``. Times are REAL epoch seconds from
the store's clock (``:now``).
"""

from __future__ import annotations

# After a job's INSERT, in the same transaction: its on_fail flag and hook queue.
SET_HOOKS = "UPDATE jobs SET on_fail = :on_fail, hook_queue = :hook_queue WHERE id = :id"

# In the transaction that failed them: one hook job (task durq.hook:<task>, key
# durq.fail:<id>, on the job's hook queue) for each job among :ids that is 'failed' now.
# With :flagged = 1 only jobs whose task had on_fail at enqueue or is one of :tasks (the
# reaper: the worker's tasks with on_fail); with 0 every one of :ids (the worker marked
# them: it knows its tasks' hooks). The key makes a second insert for the same job a no-op.
INSERT_FAIL_HOOKS = """
INSERT INTO jobs (queue, task, payload, priority, run_at, max_attempts, state, key, created_at)
SELECT coalesce(hook_queue, queue), :prefix || task, json_object('job_id', id, 'hook', 'fail'),
       priority, :now, :max_attempts, 'queued', 'durq.fail:' || id, :now
FROM jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'failed'
  AND (:flagged = 0 OR on_fail = 1 OR task IN (SELECT value FROM json_each(:tasks)))
ON CONFLICT (queue, key) WHERE key IS NOT NULL DO NOTHING
"""
