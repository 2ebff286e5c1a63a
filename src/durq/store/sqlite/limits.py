"""The SQLite statements of limits (concurrency / rate per key, named holds).

Every write runs inside the store's ``BEGIN IMMEDIATE`` transaction: one writer at a time,
so counting the slots in use and claiming under them cannot interleave with another claim.
"""

from __future__ import annotations

from durq.model.limits import MAX_RATE_PERIOD

# After the rows are inserted (same transaction): the limit of one new job.
SET_JOB_LIMIT = """
UPDATE jobs SET limit_key = :key, limit_concurrency = :concurrency, limit_rate = :rate,
                limit_per = :per
WHERE id = :id
"""

# Slots in use per key: running limited jobs plus holds whose lease has not expired.
_BUSY = """
busy AS MATERIALIZED (
    SELECT name, sum(n) AS n FROM (
        SELECT limit_key AS name, count(*) AS n FROM jobs INDEXED BY jobs_limited_running
        WHERE state = 'running' AND limit_key IS NOT NULL GROUP BY limit_key
        UNION ALL
        SELECT name, count(*) FROM limit_holds WHERE expires_at > :now GROUP BY name)
    GROUP BY name)"""

# The limited claim of one queue. Candidates are the ready limited jobs in claim order whose
# key still has room (so a full key's backlog never hides another key's jobs: they are skipped,
# not counted); at most :scan of them are ranked per key (ROW_NUMBER), and the n-th job of a key
# in this batch is taken only if used + n <= its concurrency and starts in its window + n <= its
# rate. So one batch never takes more than a key's free slots, however many of its jobs it sees.
# Whether the queue holds limited jobs waiting at all is probed first (queries.CLAIM_PASSES,
# a read of the partial index: about 2 µs against about 180 µs for CLAIM_LIMITED on an empty
# index), so queues without limited jobs pay almost nothing for the limited pass.

CLAIM_LIMITED = (
    "WITH"
    + _BUSY
    + """,
cand AS (
    SELECT * FROM (
        SELECT j.id, j.limit_key, j.priority, j.run_at, j.limit_concurrency AS cap,
               j.limit_rate AS rate,
               coalesce((SELECT n FROM busy WHERE busy.name = j.limit_key), 0) AS used,
               CASE WHEN j.limit_rate IS NULL THEN 0 ELSE
                   (SELECT count(*) FROM limit_starts s
                    WHERE s.name = j.limit_key AND s.at > :now - j.limit_per) END AS started
        FROM jobs j INDEXED BY jobs_limited_ready
        WHERE j.state = 'queued' AND j.limit_key IS NOT NULL AND j.queue = :queue
          AND j.run_at <= :now AND j.task IN (SELECT value FROM json_each(:tasks))
        ORDER BY j.priority, j.run_at, j.id)
    WHERE (cap IS NULL OR used < cap) AND (rate IS NULL OR started < rate)
    LIMIT :scan),
ranked AS (
    SELECT id, priority, run_at, cap, rate, used, started,
           row_number() OVER (PARTITION BY limit_key ORDER BY priority, run_at, id) AS rn
    FROM cand)
UPDATE jobs
SET state = 'running',
    attempts = attempts + 1,
    lease_token = (random() & 9223372036854775807),
    lease_expires_at = :expires,
    worker_id = :worker_id,
    started_at = :now
WHERE id IN (
        SELECT id FROM ranked
        WHERE (cap IS NULL OR used + rn <= cap) AND (rate IS NULL OR started + rn <= rate)
        ORDER BY priority, run_at, id
        LIMIT :limit)
  AND NOT EXISTS (SELECT 1 FROM queues WHERE name = :queue AND paused = 1)
RETURNING id, queue, task, payload, CAST(attempts AS INTEGER), CAST(max_attempts AS INTEGER),
          lease_token, CAST(shutdown_requeues AS INTEGER), CAST(priority AS INTEGER),
          CAST(run_at AS REAL), batch_id, limit_key, limit_rate
"""
)

# One start of a rate-limited key (the sliding log), and the pruning of starts that no
# period can count any more.
RECORD_START = "INSERT INTO limit_starts (name, at) VALUES (?, ?)"
PRUNE_STARTS = f"DELETE FROM limit_starts WHERE at <= :now - {MAX_RATE_PERIOD}"

ACQUIRE_HOLD = """
INSERT INTO limit_holds (name, holder, acquired_at, expires_at)
SELECT :name, :holder, :now, :expires
WHERE (SELECT count(*) FROM jobs INDEXED BY jobs_limited_running
       WHERE state = 'running' AND limit_key IS NOT NULL AND limit_key = :name)
    + (SELECT count(*) FROM limit_holds WHERE name = :name AND expires_at > :now)
    < :concurrency
RETURNING id
"""

# Expired holds of a key are deleted when someone next asks for it.
DELETE_EXPIRED_HOLDS = "DELETE FROM limit_holds WHERE name = :name AND expires_at <= :now"

EXTEND_HOLD = """
UPDATE limit_holds SET expires_at = :expires WHERE id = :id AND expires_at > :now
"""

RELEASE_HOLD = "DELETE FROM limit_holds WHERE id = :id"

LIMIT_USAGE = """
SELECT name, sum(running), sum(held), sum(queued), max(cap) FROM (
    SELECT limit_key AS name, count(*) AS running, 0 AS held, 0 AS queued,
           max(limit_concurrency) AS cap
    FROM jobs INDEXED BY jobs_limited_running
    WHERE state = 'running' AND limit_key IS NOT NULL GROUP BY limit_key
    UNION ALL
    SELECT name, 0, count(*), 0, NULL FROM limit_holds WHERE expires_at > :now GROUP BY name
    UNION ALL
    SELECT limit_key, 0, 0, count(*), max(limit_concurrency) FROM jobs
    WHERE state = 'queued' AND limit_key IS NOT NULL GROUP BY limit_key)
GROUP BY name ORDER BY name
"""

# A running limited job cancelled or expired keeps its slot as a hold of its key until the
# worker reports its body gone (docs/features/limits.md): inserted in the cancel's (or the
# sweep's) transaction, before the row leaves 'running', for the lease the job had (a dead
# worker's hold lapses then). NOT EXISTS: a job never holds twice.
HOLD_JOBS = """
INSERT INTO limit_holds (name, holder, acquired_at, expires_at, job_id, job_token)
SELECT j.limit_key, 'job ' || j.id, :now, j.lease_expires_at, j.id, j.lease_token
FROM jobs j
WHERE j.state = 'running' AND j.limit_key IS NOT NULL AND j.lease_expires_at > :now
  AND NOT EXISTS (SELECT 1 FROM limit_holds h
                  WHERE h.job_id = j.id AND h.job_token = j.lease_token)
  AND """

HOLD_CANCELLED = HOLD_JOBS + "j.id = :id"

# The worker's heartbeat, while the stopped body still runs; and its release once it is gone.
EXTEND_JOB_HOLD = """
UPDATE limit_holds SET expires_at = :expires
WHERE job_id = :id AND job_token = :token AND expires_at > :now
"""

RELEASE_JOB_HOLD = "DELETE FROM limit_holds WHERE job_id = :id AND job_token = :token"
