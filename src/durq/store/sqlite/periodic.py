"""The SQL of periodic jobs on SQLite (the ``periodic`` table of migration 0007).

One row per periodic schedule: the last slot enqueued (epoch seconds), the job enqueued for
it, and when. The row only moves forward.
"""

from __future__ import annotations

SELECT_SLOTS = "SELECT name, last_slot, job_id FROM periodic"

# A schedule seen for the first time starts at :at (no slot at or before it is enqueued);
# an existing row is left alone.
ANCHOR = """
INSERT INTO periodic (name, last_slot, job_id, updated_at)
VALUES (:name, :at, NULL, :now)
ON CONFLICT (name) DO NOTHING
"""

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
