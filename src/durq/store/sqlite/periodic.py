"""The SQL of periodic jobs on SQLite (the ``periodic`` table of migration 0007).

One row per periodic schedule: the last slot enqueued (epoch seconds), the job enqueued for
it, and when; since v12 (PostgreSQL v11) also the schedule as a worker registered it (name,
cron, tz, task, definition, code version, who, last seen), so a leader fires it by name;
the slot part of the row only moves forward.
"""

from __future__ import annotations

SELECT_SLOTS = "SELECT name, last_slot, job_id FROM periodic"

# Advance to :slot only if it is later than the stored last slot: one row back when this
# transaction advanced it, none when another scheduler got there first (or :slot is old).
ADVANCE = """
INSERT INTO periodic (name, last_slot, job_id, updated_at)
VALUES (:name, :slot, NULL, :now)
ON CONFLICT (name) DO UPDATE SET last_slot = excluded.last_slot, job_id = NULL,
                                 updated_at = excluded.updated_at
    WHERE periodic.last_slot < excluded.last_slot
RETURNING name
"""

SET_JOB = "UPDATE periodic SET job_id = :job_id WHERE name = :name AND last_slot = :slot"

# -- stored schedules (v12) --

SELECT_SCHEDULES = """
SELECT name, last_slot, job_id, cron, tz, task, definition, code_version, defined_by, seen_at
FROM periodic ORDER BY name
"""

# Register a schedule: a new row is anchored at :now (its first slot is the next one); an
# existing row keeps its last slot and takes the definition, unless nothing changed and it
# was seen lately (so a worker that ticks every second does not write every second).
DEFINE = """
INSERT INTO periodic (name, last_slot, job_id, updated_at, cron, tz, task, definition,
                      code_version, defined_by, seen_at)
VALUES (:name, :now, NULL, :now, :cron, :tz, :task, :definition, :code_version, :defined_by,
        :now)
ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, tz = excluded.tz,
    task = excluded.task, definition = excluded.definition,
    code_version = excluded.code_version, defined_by = excluded.defined_by,
    seen_at = excluded.seen_at
    WHERE periodic.definition IS NOT excluded.definition OR periodic.cron IS NOT excluded.cron
       OR periodic.tz IS NOT excluded.tz OR periodic.task IS NOT excluded.task
       OR periodic.code_version IS NOT excluded.code_version
       OR periodic.seen_at IS NULL OR periodic.seen_at < :stale_before
"""

TOUCH = "UPDATE periodic SET seen_at = :now WHERE name = :name"
