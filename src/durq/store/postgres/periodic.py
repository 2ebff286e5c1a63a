"""The SQL of periodic jobs on PostgreSQL (the ``periodic`` table of migration 0006).

One row per periodic schedule: the last slot enqueued (epoch seconds), the job enqueued for
it, and when (database clock). The row only moves forward.
"""

from __future__ import annotations

SELECT_SLOTS = "SELECT name, last_slot, job_id FROM {s}.periodic"

# A schedule seen for the first time starts at %(at_slot)s (no slot at or before it is
# enqueued); an existing row is left alone.
ANCHOR = """
INSERT INTO {s}.periodic (name, last_slot, job_id, updated_at)
SELECT n, %(at_slot)s, NULL, {s}.epoch(%(at)s) FROM unnest(%(names)s::text[]) AS n
ON CONFLICT (name) DO NOTHING
"""

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
