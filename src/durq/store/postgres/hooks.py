"""SQL of on_fail hooks, hook queues and key lookups on PostgreSQL (docs/features/hooks.md).

One named constant per statement, like ``queries.py``; ``{s}`` is the schema. Every time is
``{s}.epoch(%(at)s)``, the database clock. :func:`sql` renders a statement for a schema.
"""

from __future__ import annotations

from typing import Any

from durq.store.postgres.connection import render

# After the jobs' INSERT, in the same transaction: their on_fail flags and hook queues.
SET_HOOKS = """
UPDATE {s}.jobs AS j SET on_fail = x.on_fail, hook_queue = x.hook_queue
FROM unnest(%(ids)s::bigint[], %(flags)s::boolean[], %(queues)s::text[])
     AS x(id, on_fail, hook_queue)
WHERE j.id = x.id
"""

# In the transaction that failed them: one hook job (task durq.hook:<task>, key
# durq.fail:<id>, on the job's hook queue) for each job among %(ids)s that is 'failed' now,
# and a wake-up per hook queue. With %(flagged)s only jobs whose task had on_fail at enqueue
# or is one of %(tasks)s (the reaper: the worker's tasks with on_fail); else every one of
# the ids (the worker marked them). The key makes a second insert for the same job a no-op.
INSERT_FAIL_HOOKS = """
WITH hooks AS (
    INSERT INTO {s}.jobs (queue, task, payload, priority, run_at, max_attempts, state, key,
                          created_at)
    SELECT coalesce(hook_queue, queue), %(prefix)s || task,
           json_build_object('job_id', id, 'hook', 'fail')::text, priority,
           {s}.epoch(%(at)s), %(max_attempts)s, 'queued', 'durq.fail:' || id, {s}.epoch(%(at)s)
    FROM {s}.jobs
    WHERE id = ANY(%(ids)s::bigint[]) AND state = 'failed' AND (NOT %(flagged)s OR on_fail OR task = ANY(%(tasks)s::text[]))
    ON CONFLICT (queue, key) WHERE key IS NOT NULL DO NOTHING
    RETURNING queue)
SELECT pg_notify(%(channel)s, queue) FROM (SELECT DISTINCT queue FROM hooks) AS woken
"""

_rendered: dict[tuple[str, str], Any] = {}


def sql(name: str, schema: str) -> Any:
    """The statement ``name`` of this module for ``schema`` (rendered once, then cached)."""
    key = (name, schema)
    if key not in _rendered:
        _rendered[key] = render(globals()[name], schema)
    return _rendered[key]
