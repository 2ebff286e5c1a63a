"""The SQL of rescue in seconds on SQLite: liveness beats and the return of a dead worker's
jobs (docs/guarantees.md, "Rescue of a dead worker's jobs")."""

from __future__ import annotations

from durq.store.sqlite.queries import HISTORY

# A worker's liveness beat: cheap (one row by primary key). It returns the count of rescues
# of this worker, so that a worker that was frozen learns at once that its jobs were taken.
BEAT_WORKER = """
UPDATE workers SET last_seen = :now, rescue_after = :rescue_after, proc = :proc
WHERE id = :id
RETURNING CAST(rescues AS INTEGER)
"""

# Workers on one host that stamped their process (the leader checks their pids).
LOCAL_WORKERS = "SELECT id, pid, proc FROM workers WHERE host = :host AND proc IS NOT NULL"

# A read, without the write lock: stale workers that still hold running jobs.
STALE_HOLDERS = """
SELECT w.id FROM workers AS w
WHERE w.rescue_after IS NOT NULL AND w.last_seen < :now - w.rescue_after
  AND EXISTS (SELECT 1 FROM jobs WHERE state = 'running' AND worker_id = w.id)
"""

# The workers to rescue, checked again under the write lock: a worker that beat meanwhile
# is alive and keeps its jobs. :dead lists the ids whose process is gone (same host).
DEAD_WORKERS = """
SELECT id FROM workers
WHERE id IN (SELECT value FROM json_each(:dead))
   OR (rescue_after IS NOT NULL AND last_seen < :now - rescue_after
       AND EXISTS (SELECT 1 FROM jobs WHERE state = 'running' AND worker_id = workers.id))
"""

# The same effect as a lease expiry (REAP): back to the queue keeping run_at (so the job
# goes first), the attempt stays counted, a lease_lost entry is appended, the fencing token
# is cleared (the dead worker's late outcomes are dropped); failed when no attempts are left.
RESCUE_JOBS = f"""
UPDATE jobs
SET state = CASE WHEN CAST(attempts AS INTEGER) >= CAST(max_attempts AS INTEGER) THEN 'failed' ELSE 'queued' END,
    finished_at = CASE WHEN CAST(attempts AS INTEGER) >= CAST(max_attempts AS INTEGER) THEN :now ELSE NULL END,
    errors = json_insert({HISTORY}, '$[#]', json_object(
        'attempt', attempts, 'at', :now, 'type', 'WorkerLost',
        'message', 'worker ' || coalesce(worker_id, '?') || ' found dead ('
                   || CASE WHEN worker_id IN (SELECT value FROM json_each(:dead))
                           THEN 'its process is gone' ELSE 'no liveness beat' END
                   || '); the job was rescued before its lease expired',
        'traceback', '', 'kind', 'lease_lost', 'started_at', started_at, 'worker_id', worker_id)),
    lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
WHERE state = 'running' AND worker_id IN (SELECT value FROM json_each(:ids))
RETURNING id, state
"""

MARK_RESCUED = """
UPDATE workers SET rescues = rescues + 1 WHERE id IN (SELECT value FROM json_each(:ids))
"""

# A worker whose process is gone will not come back: its row goes.
FORGET_WORKERS = "DELETE FROM workers WHERE id IN (SELECT value FROM json_each(:ids))"
