"""The SQL of rescue in seconds on PostgreSQL: liveness beats and the return of a dead
worker's jobs (docs/guarantees.md, "Rescue of a dead worker's jobs"). Times come from
``{s}.epoch(at)``: the database's clock decides staleness, never a worker's."""

from __future__ import annotations

# A worker's liveness beat: one row by primary key, autocommit. It returns the count of
# rescues of this worker, so that a worker that was frozen learns at once that its jobs
# were taken.
BEAT_WORKER = """
UPDATE {s}.workers SET last_seen = {s}.epoch(%(at)s), rescue_after = %(rescue_after)s,
    proc = %(proc)s
WHERE id = %(id)s
RETURNING rescues
"""

LOCAL_WORKERS = "SELECT id, pid, proc FROM {s}.workers WHERE host = %(host)s AND proc IS NOT NULL"

# A read, without locks: stale workers that still hold running jobs.
STALE_HOLDERS = """
SELECT w.id FROM {s}.workers AS w
WHERE w.rescue_after IS NOT NULL AND w.last_seen < {s}.epoch(%(at)s) - w.rescue_after
  AND EXISTS (SELECT 1 FROM {s}.jobs AS j WHERE j.state = 'running' AND j.worker_id = w.id)
"""

# The workers to rescue, checked again in the transaction with their rows locked: a worker
# whose beat commits first is alive and keeps its jobs; one beating meanwhile waits for us.
DEAD_WORKERS = """
SELECT id FROM {s}.workers AS w
WHERE id = ANY(%(dead)s::text[])
   OR (rescue_after IS NOT NULL AND last_seen < {s}.epoch(%(at)s) - rescue_after
       AND EXISTS (SELECT 1 FROM {s}.jobs AS j WHERE j.state = 'running' AND j.worker_id = w.id))
ORDER BY id
FOR UPDATE
"""

# Workers forgotten by an earlier rescue that hold running jobs again: a statement a dead
# process sent before it died (a claim) can still commit after the rescue's snapshot, and
# its jobs would then wait for their leases (see ``RescuingMixin.rescue``).
LATE_HOLDERS = """
SELECT DISTINCT worker_id FROM {s}.jobs
WHERE state = 'running' AND worker_id = ANY(%(ids)s::text[])
  AND NOT EXISTS (SELECT 1 FROM {s}.workers AS w WHERE w.id = worker_id)
"""

# The same effect as a lease expiry (REAP); see the SQLite statement.
RESCUE_JOBS = """
UPDATE {s}.jobs
SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
    finished_at = CASE WHEN attempts >= max_attempts THEN {s}.epoch(%(at)s) ELSE NULL END,
    errors = {s}.append_error(errors, json_build_object(
        'attempt', attempts, 'at', {s}.epoch(%(at)s), 'type', 'WorkerLost',
        'message', 'worker ' || coalesce(worker_id, '?') || ' found dead ('
                   || CASE WHEN worker_id = ANY(%(dead)s::text[])
                           THEN 'its process is gone' ELSE 'no liveness beat' END
                   || '); the job was rescued before its lease expired',
        'traceback', '', 'kind', 'lease_lost', 'started_at', started_at,
        'worker_id', worker_id)::text),
    lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
WHERE state = 'running' AND worker_id = ANY(%(ids)s::text[])
RETURNING id, state
"""

MARK_RESCUED = "UPDATE {s}.workers SET rescues = rescues + 1 WHERE id = ANY(%(ids)s::text[])"

FORGET_WORKERS = "DELETE FROM {s}.workers WHERE id = ANY(%(ids)s::text[])"
