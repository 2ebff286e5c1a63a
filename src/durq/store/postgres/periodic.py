"""The SQL of periodic jobs on PostgreSQL (the ``periodic`` table of migration 0006).

One row per periodic schedule: the last slot enqueued (epoch seconds), the job enqueued for
it, and when; since v12 (PostgreSQL v11) also the schedule as a worker registered it (name,
cron, tz, task, definition, code version, who, last seen), so a leader fires it by name;
the slot part of the row only moves forward.
"""

from __future__ import annotations

SELECT_SLOTS = "SELECT name, last_slot, job_id FROM {s}.periodic"

# Advance to %(slot)s only if it is later than the stored last slot: one row back when this
# transaction advanced it, none when another scheduler got there first (or the slot is old).
# A concurrent advance of the same row waits for the first to commit, then re-checks.
ADVANCE = """
INSERT INTO {s}.periodic AS p (name, last_slot, job_id, updated_at)
VALUES (%(name)s, %(slot)s, NULL, {s}.epoch(%(at)s))
ON CONFLICT (name) DO UPDATE SET last_slot = excluded.last_slot, job_id = NULL,
                                 updated_at = excluded.updated_at
    WHERE p.last_slot < excluded.last_slot
RETURNING name
"""

SET_JOB = (
    "UPDATE {s}.periodic SET job_id = %(job_id)s WHERE name = %(name)s AND last_slot = %(slot)s"
)

# -- stored schedules (v11) --

SELECT_SCHEDULES = """
SELECT name, last_slot, job_id, cron, tz, task, definition, code_version, defined_by, seen_at
FROM {s}.periodic ORDER BY name
"""

# Register a schedule: a new row is anchored at now (its first slot is the next one); an
# existing row keeps its last slot and takes the definition, unless nothing changed and it
# was seen lately (so a worker that ticks every second does not write every second).
DEFINE = """
INSERT INTO {s}.periodic AS p (name, last_slot, job_id, updated_at, cron, tz, task,
                               definition, code_version, defined_by, seen_at)
VALUES (%(name)s, {s}.epoch(%(at)s), NULL, {s}.epoch(%(at)s), %(cron)s, %(tz)s, %(task)s,
        %(definition)s, %(code_version)s, %(defined_by)s, {s}.epoch(%(at)s))
ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, tz = excluded.tz,
    task = excluded.task, definition = excluded.definition,
    code_version = excluded.code_version, defined_by = excluded.defined_by,
    seen_at = excluded.seen_at
    WHERE p.definition IS DISTINCT FROM excluded.definition
       OR p.cron IS DISTINCT FROM excluded.cron OR p.tz IS DISTINCT FROM excluded.tz
       OR p.task IS DISTINCT FROM excluded.task
       OR p.code_version IS DISTINCT FROM excluded.code_version
       OR p.seen_at IS NULL OR p.seen_at < {s}.epoch(%(at)s) - %(window)s
"""

TOUCH = """
UPDATE {s}.periodic SET seen_at = {s}.epoch(%(at)s) WHERE name = ANY(%(names)s::text[])
"""
