"""SQL of parked jobs and deadlines on SQLite (docs/features/parked.md, deadlines.md).

One named constant per statement, like ``queries.py``. Times are REAL epoch seconds from
the store's clock (``:now``).
"""

from __future__ import annotations

from durq.store.sqlite.limits import HOLD_JOBS
from durq.store.sqlite.queries import HISTORY

# After a job's INSERT, in the same transaction: its parked state and its absolute times,
# computed from the created_at the insert stored (NULL arithmetic leaves a column NULL).
SET_EXTRAS = """
UPDATE jobs
SET state = CASE WHEN :park THEN 'parked' ELSE state END,
    park_expires_at = created_at + :park_ttl,
    deadline = coalesce(:deadline, created_at + :deadline_in),
    notice_at = created_at + :notice_after
WHERE id = :id
"""

# parked -> queued. Refused once the park TTL or the deadline has passed (the sweeper expires
# it). A future run_at (an enqueue with delay) is kept: the job is then scheduled.
ADOPT = """
UPDATE jobs
SET state = 'queued', run_at = max(run_at, :now)
WHERE id = :id AND state = 'parked'
  AND (park_expires_at IS NULL OR park_expires_at > :now)
  AND (deadline IS NULL OR deadline > :now)
"""

# parked -> cancelled (terminal). Conditional on 'parked', so exactly one of ADOPT and this wins.
CANCEL_PARKED = """
UPDATE jobs
SET state = 'cancelled', finished_at = :now
WHERE id = :id AND state = 'parked'
"""

_EXPIRE_SET = f"""
UPDATE jobs
SET state = 'expired', finished_at = :now, lease_token = NULL, lease_expires_at = NULL,
    errors = json_insert({HISTORY}, '$[#]', json_object(
        'attempt', CAST(attempts AS INTEGER), 'at', :now, 'type', 'Expired',
        'message', :message, 'traceback', '', 'kind', 'expired',
        -- a running attempt ended by its deadline keeps its start and lease holder
        'started_at', CASE WHEN state = 'running' THEN started_at END,
        'worker_id', CASE WHEN state = 'running' THEN worker_id END))
"""

# (a) Jobs not finished whose deadline has passed (queued, scheduled, parked or running: a
# running job's token is revoked, so its late outcome is fenced out). The subquery reads
# the partial index jobs_deadline.
_PAST_DEADLINE = """
        SELECT id FROM jobs
        WHERE deadline IS NOT NULL AND finished_at IS NULL AND deadline <= :now
          AND state IN ('queued', 'running', 'parked', 'waiting')
        ORDER BY deadline LIMIT :limit"""

EXPIRE_PAST_DEADLINE = (
    _EXPIRE_SET
    + "WHERE id IN ("
    + _PAST_DEADLINE
    + """)
RETURNING id, coalesce(hook_queue, queue), task, priority
"""
)

# (a0) Before (a), same transaction: the running limited jobs (a) expires keep their slots
# as holds until their workers report the bodies gone (docs/features/limits.md).
HOLD_EXPIRING = HOLD_JOBS + "j.id IN (" + _PAST_DEADLINE + ")"

# (a') Parked jobs past their park TTL (index jobs_parked).
EXPIRE_PARKED = (
    _EXPIRE_SET
    + """WHERE id IN (
        SELECT id FROM jobs
        WHERE state = 'parked' AND park_expires_at IS NOT NULL AND park_expires_at <= :now
        ORDER BY park_expires_at LIMIT :limit)
RETURNING id, coalesce(hook_queue, queue), task, priority
"""
)

# (b) Jobs not finished, past notice_at, not noticed yet, and not past their deadline (a job
# past both was expired by (a) in the same transaction and gets no slow notice).
NOTICE_SLOW = """
UPDATE jobs
SET noticed_at = :now
WHERE id IN (
        SELECT id FROM jobs
        WHERE notice_at IS NOT NULL AND noticed_at IS NULL AND finished_at IS NULL
          AND notice_at <= :now AND state IN ('queued', 'running', 'parked')
          AND (deadline IS NULL OR deadline > :now)
        ORDER BY notice_at LIMIT :limit)
RETURNING id, coalesce(hook_queue, queue), task, priority
"""

# A read before the pass, so that an idle worker takes the write lock only when work is due.
ANY_DUE = """
SELECT EXISTS (SELECT 1 FROM jobs
               WHERE deadline IS NOT NULL AND finished_at IS NULL AND deadline <= :now
                 AND state IN ('queued', 'running', 'parked', 'waiting'))
    OR EXISTS (SELECT 1 FROM jobs
               WHERE state = 'parked' AND park_expires_at IS NOT NULL
                 AND park_expires_at <= :now)
    OR EXISTS (SELECT 1 FROM jobs
               WHERE notice_at IS NOT NULL AND noticed_at IS NULL AND finished_at IS NULL
                 AND notice_at <= :now AND state IN ('queued', 'running', 'parked'))
"""

# (Each RETURNING gives the hook queue: the job's hook_queue, else its queue.)
# A hook job; its key (durq.expire:<id> / durq.slow:<id>) makes a second one impossible.
INSERT_HOOK = """
INSERT INTO jobs (queue, task, payload, priority, run_at, max_attempts, state, key, created_at)
VALUES (:queue, :task, :payload, :priority, :now, :max_attempts, 'queued', :key, :now)
ON CONFLICT (queue, key) WHERE key IS NOT NULL DO NOTHING
"""
