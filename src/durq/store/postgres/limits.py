"""The PostgreSQL statements of limits (concurrency / rate per key, named holds).

Under READ COMMITTED two claimers could each count 3 running jobs of a key with limit 4
and each start one (5 running). So every statement that can *add* to a key's slots in use
(a limited claim, a hold) runs in a transaction that first takes a transaction-scoped
advisory lock per key (``LOCK_KEY``, keys in one global order), and only then, in a later
statement with a fresh snapshot, counts and claims: the previous holder of the lock has
committed by the time we get it, so its running rows and holds are visible to our count.
Statements that only *free* slots (finish, reap, release, cancel, hold release) need no lock.

``NOW`` is the statement's start on the database clock (``statement_timestamp()``, i.e.
after the lock was granted, not the transaction's start), or the test clock ``at``.
"""

from __future__ import annotations

from durq.model.limits import MAX_RATE_PERIOD

NOW = "coalesce(%(at)s::float8, extract(epoch FROM statement_timestamp())::float8)"

SET_JOB_LIMITS = """
UPDATE {s}.jobs AS j SET limit_key = l.key, limit_concurrency = l.concurrency,
                         limit_rate = l.rate, limit_per = l.per
FROM unnest(%(ids)s::bigint[], %(keys)s::text[], %(concurrencies)s::int[], %(rates)s::int[],
            %(pers)s::float8[]) AS l(id, key, concurrency, rate, per)
WHERE j.id = l.id
"""

# Two-part advisory lock: (namespace of this schema's limits, the key's number). The
# one-bigint locks of migrations and leadership live in another space and never collide.
LOCK_KEY = "SELECT pg_advisory_xact_lock(%(ns)s, %(key)s)"

# The slots in use of some keys: running limited jobs plus holds whose lease has not expired.
_BUSY = (
    """
busy AS MATERIALIZED (
    SELECT name, sum(n)::bigint AS n FROM (
        SELECT limit_key AS name, count(*) AS n FROM {s}.jobs
        WHERE state = 'running' AND limit_key IS NOT NULL AND limit_key = ANY(%(keys)s::text[])
        GROUP BY limit_key
        UNION ALL
        SELECT name, count(*) FROM {s}.limit_holds
        WHERE name = ANY(%(keys)s::text[]) AND expires_at > """
    + NOW
    + """ GROUP BY name) AS u
    GROUP BY name)"""
)

# Step 1, no lock, no transaction: the keys of the first ready limited jobs of a queue whose
# key seems to have room (a hint; step 3 re-checks under the locks). Slots in use are counted
# once per key (a hash join), not once per waiting job.
LIMITED_KEYS = """
WITH busy AS MATERIALIZED (
    SELECT name, sum(n)::bigint AS n FROM (
        SELECT limit_key AS name, count(*) AS n FROM {s}.jobs
        WHERE state = 'running' AND limit_key IS NOT NULL GROUP BY limit_key
        UNION ALL
        SELECT name, count(*) FROM {s}.limit_holds
        WHERE expires_at > {s}.epoch(%(at)s) GROUP BY name) AS u
    GROUP BY name)
SELECT DISTINCT limit_key FROM (
    SELECT j.limit_key FROM {s}.jobs AS j LEFT JOIN busy AS b ON b.name = j.limit_key
    WHERE j.state = 'queued' AND j.limit_key IS NOT NULL AND j.queue = %(queue)s
      AND j.run_at <= {s}.epoch(%(at)s) AND j.task = ANY(%(tasks)s::text[])
      AND NOT EXISTS (SELECT 1 FROM {s}.queues WHERE name = %(queue)s AND paused)
      AND (j.limit_concurrency IS NULL OR coalesce(b.n, 0) < j.limit_concurrency)
      AND (j.limit_rate IS NULL OR j.limit_rate > (
            SELECT count(*) FROM {s}.limit_starts AS st
            WHERE st.name = j.limit_key AND st.at > {s}.epoch(%(at)s) - j.limit_per))
    ORDER BY j.priority, j.run_at, j.id
    LIMIT %(limit)s) AS c
"""

# Step 3, after LOCK_KEY for every key in %(keys)s (same transaction): claim under the limits.
# The n-th job of a key in this batch (ROW_NUMBER) is taken only if used + n <= concurrency and
# starts in the window + n <= rate; starts of rate-limited keys are logged in the same statement.
CLAIM_LIMITED = (
    "WITH"
    + _BUSY
    + """,
cand AS (
    SELECT j.id, j.limit_key, j.priority, j.run_at, j.limit_concurrency AS cap,
           j.limit_rate AS rate, j.limit_per AS per
    FROM {s}.jobs AS j
    WHERE j.state = 'queued' AND j.limit_key IS NOT NULL AND j.limit_key = ANY(%(keys)s::text[])
      AND j.queue = %(queue)s AND j.run_at <= """
    + NOW
    + """
      AND j.task = ANY(%(tasks)s::text[])
      AND NOT EXISTS (SELECT 1 FROM {s}.queues WHERE name = %(queue)s AND paused)
    ORDER BY j.priority, j.run_at, j.id
    LIMIT %(scan)s
    FOR UPDATE OF j SKIP LOCKED),
ranked AS (
    SELECT c.id, c.priority, c.run_at, c.cap, c.rate, coalesce(b.n, 0) AS used,
           CASE WHEN c.rate IS NULL THEN 0 ELSE
               (SELECT count(*) FROM {s}.limit_starts AS st
                WHERE st.name = c.limit_key AND st.at > """
    + NOW
    + """ - c.per) END AS started,
           row_number() OVER (PARTITION BY c.limit_key ORDER BY c.priority, c.run_at, c.id) AS rn
    FROM cand AS c LEFT JOIN busy AS b ON b.name = c.limit_key),
picked AS (
    SELECT id FROM ranked
    WHERE (cap IS NULL OR used + rn <= cap) AND (rate IS NULL OR started + rn <= rate)
    ORDER BY priority, run_at, id
    LIMIT %(limit)s),
claimed AS (
    UPDATE {s}.jobs AS j
    SET state = 'running', attempts = j.attempts + 1, lease_token = nextval('{s}.lease_tokens'),
        lease_expires_at = """
    + NOW
    + """ + %(lease)s, worker_id = %(worker_id)s,
        started_at = """
    + NOW
    + """
    FROM picked WHERE j.id = picked.id
    RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.lease_token,
              j.shutdown_requeues, j.priority, j.run_at, j.batch_id, j.limit_key,
              j.limit_rate),
starts AS (
    INSERT INTO {s}.limit_starts (name, at)
    SELECT limit_key, """
    + NOW
    + """ FROM claimed WHERE limit_rate IS NOT NULL
    RETURNING 1),
pruned AS (
    DELETE FROM {s}.limit_starts
    WHERE at <= """
    + NOW
    + f""" - {MAX_RATE_PERIOD} AND EXISTS (SELECT 1 FROM starts))
SELECT id, queue, task, payload, attempts, max_attempts, lease_token, shutdown_requeues,
       priority, run_at, batch_id, limit_key FROM claimed
"""
)

DELETE_EXPIRED_HOLDS = "DELETE FROM {s}.limit_holds WHERE name = %(name)s AND expires_at <= " + NOW

# After LOCK_KEY for the hold's key (same transaction).
ACQUIRE_HOLD = (
    """
INSERT INTO {s}.limit_holds (name, holder, acquired_at, expires_at)
SELECT %(name)s, %(holder)s, """
    + NOW
    + ", "
    + NOW
    + """ + %(lease)s
WHERE (SELECT count(*) FROM {s}.jobs
       WHERE state = 'running' AND limit_key IS NOT NULL AND limit_key = %(name)s)
    + (SELECT count(*) FROM {s}.limit_holds WHERE name = %(name)s AND expires_at > """
    + NOW
    + """)
    < %(concurrency)s
RETURNING id
"""
)

EXTEND_HOLD = (
    "UPDATE {s}.limit_holds SET expires_at = "
    + NOW
    + " + %(lease)s WHERE id = %(id)s AND expires_at > "
    + NOW
)

RELEASE_HOLD = "DELETE FROM {s}.limit_holds WHERE id = %(id)s"

LIMIT_USAGE = (
    """
SELECT name, sum(running)::bigint, sum(held)::bigint, sum(queued)::bigint, max(cap) FROM (
    SELECT limit_key AS name, count(*) AS running, 0 AS held, 0 AS queued,
           max(limit_concurrency) AS cap
    FROM {s}.jobs WHERE state = 'running' AND limit_key IS NOT NULL GROUP BY limit_key
    UNION ALL
    SELECT name, 0, count(*), 0, NULL FROM {s}.limit_holds WHERE expires_at > """
    + NOW
    + """ GROUP BY name
    UNION ALL
    SELECT limit_key, 0, 0, count(*), max(limit_concurrency) FROM {s}.jobs
    WHERE state = 'queued' AND limit_key IS NOT NULL GROUP BY limit_key) AS u
GROUP BY name ORDER BY name
"""
)

NOTIFY = "SELECT pg_notify(%(channel)s, 'limits')"

# The holds a cancel or an expiry left for running limited jobs (store/postgres/queries.py
# CANCEL, deadlines.py): the worker's heartbeat extends them while the stopped bodies still
# run, and deletes them once they are gone. (job id, lease token) pairs, as unnest arrays.
EXTEND_JOB_HOLDS = (
    """
UPDATE {s}.limit_holds AS h SET expires_at = """
    + NOW
    + """ + %(lease)s
FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS l(id, token)
WHERE h.job_id = l.id AND h.job_token = l.token AND h.expires_at > """
    + NOW
)

RELEASE_JOB_HOLDS = """
DELETE FROM {s}.limit_holds AS h
USING unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS l(id, token)
WHERE h.job_id = l.id AND h.job_token = l.token
"""
