"""Every SQL statement the PostgreSQL store runs, one named constant each.

``{s}`` stands for the configured schema (quoted identifier); the store formats each
statement once when it opens. Parameters are psycopg named placeholders. Every time is
``{s}.epoch(%(at)s)``: the database clock (``now()``), never the worker's; ``at`` is NULL
except in tests that inject a clock.
"""

from __future__ import annotations

JOB_COLUMNS = (
    "id, queue, task, payload, priority, run_at, attempts, max_attempts, state, lease_token, "
    "lease_expires_at, worker_id, key, created_at, started_at, finished_at, result, progress, "
    "errors, meta, shutdown_requeues, deadline, notice_at, noticed_at, park_expires_at, "
    "batch_id, snoozes"
)

CLOCK = "SELECT {s}.epoch(%(at)s)"

# The server's wall clock right now (not the transaction's start), to estimate its offset.
WALL_CLOCK = "SELECT extract(epoch FROM clock_timestamp())::double precision"

# Many rows in one statement: arrays of columns, unnested in order (WITH ORDINALITY keeps it).
INSERT_MANY = """
INSERT INTO {s}.jobs (queue, task, payload, priority, run_at, max_attempts, state, created_at, meta)
SELECT q, t, p, pr, coalesce(ra, {s}.epoch(%(at)s) + d), ma, 'queued', {s}.epoch(%(at)s), m
FROM unnest(%(queues)s::text[], %(tasks)s::text[], %(payloads)s::text[], %(priorities)s::int[],
            %(run_ats)s::float8[], %(delays)s::float8[], %(max_attempts)s::int[], %(metas)s::text[])
     WITH ORDINALITY AS x(q, t, p, pr, ra, d, ma, m, n)
ORDER BY n
RETURNING id, run_at, created_at
"""

# enqueue_many by COPY (store/postgres/jobs.py): the database's time and n fresh ids from
# the identity's sequence in one round trip, then the rows with those ids. The sequence is
# looked up once (an InitPlan), not once per id: pg_get_serial_sequence per row and its
# text-to-regclass cast cost 2.3 µs of server CPU a row, nextval itself 0.3 µs.
RESERVE_IDS = """
SELECT {s}.epoch(%(at)s),
       array(SELECT nextval((SELECT pg_get_serial_sequence('{s}.jobs', 'id')::regclass))
             FROM generate_series(1, %(n)s))
"""

COPY_JOBS = """
COPY {s}.jobs (id, queue, task, payload, priority, run_at, max_attempts, state, created_at,
               meta)
FROM STDIN (FORMAT BINARY)
"""

# One job in one statement (its own transaction). Its wake-up is sent after the commit,
# in a transaction of its own (store/postgres/wakes.py: a NOTIFY inside this one would
# serialise the commits of concurrent producers).
INSERT_ONE = """
INSERT INTO {s}.jobs (queue, task, payload, priority, run_at, max_attempts, state,
                      created_at, meta)
VALUES (%(queue)s, %(task)s, %(payload)s, %(priority)s,
        coalesce(%(run_at)s::float8, {s}.epoch(%(at)s) + %(delay)s), %(max_attempts)s,
        'queued', {s}.epoch(%(at)s), %(meta)s)
RETURNING id, run_at, created_at
"""

INSERT_KEYED = """
INSERT INTO {s}.jobs (queue, task, payload, priority, run_at, max_attempts, state, key,
                      created_at, meta)
VALUES (%(queue)s, %(task)s, %(payload)s, %(priority)s,
        coalesce(%(run_at)s::float8, {s}.epoch(%(at)s) + %(delay)s), %(max_attempts)s, 'queued',
        %(key)s, {s}.epoch(%(at)s), %(meta)s)
ON CONFLICT (queue, key) WHERE key IS NOT NULL DO NOTHING
RETURNING id, run_at, created_at
"""

NOTIFY = "SELECT pg_notify(%(channel)s, %(queue)s)"
#: The payload of the NOTIFY sent when a running job's lease may have ended elsewhere (a
#: cancel, an expiry, a rescue, a replay): the workers' cancel watches read their leases.
CANCEL_PAYLOAD = "durq:cancel"

# Of the (id, token) leases a worker holds, those no longer held (its cancel watch): the
# row gone, or not running under that token; why: 'cancelled' / 'expired', else
# 'lease_lost' (reaped, rescued, replayed and maybe claimed again).
LOST_AMONG = """
SELECT l.id, l.token,
       CASE WHEN j.state IN ('cancelled', 'expired') THEN j.state ELSE 'lease_lost' END
FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS l(id, token)
LEFT JOIN {s}.jobs AS j ON j.id = l.id
WHERE j.id IS NULL OR j.state != 'running' OR j.lease_token IS DISTINCT FROM l.token
"""

SELECT_JOB = "SELECT " + JOB_COLUMNS + " FROM {s}.jobs WHERE id = %(id)s"

SELECT_JOB_BY_KEY = (
    "SELECT " + JOB_COLUMNS + " FROM {s}.jobs WHERE queue = %(queue)s AND key = %(key)s"
)

# A row (NULL, -1, ...) saying that the queue has ready jobs with a fair key, which the
# claims below leave to the fair claim (store/postgres/fairness.py).
_FAIR_WAITING = """
SELECT NULL, -1::bigint, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
WHERE EXISTS (SELECT 1 FROM {s}.jobs
              WHERE state = 'queued' AND fair_key IS NOT NULL AND queue = %(queue)s
                AND run_at <= {s}.epoch(%(at)s) AND task = ANY(%(tasks)s::text[]))
"""

# A row (NULL, ...) saying that the queue has ready jobs with a limit, which the claims below
# leave to the limited claim (store/postgres/limits.py): it must lock their keys first.
_LIMITED_WAITING = """
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
WHERE EXISTS (SELECT 1 FROM {s}.jobs
              WHERE state = 'queued' AND limit_key IS NOT NULL AND queue = %(queue)s
                AND run_at <= {s}.epoch(%(at)s) AND task = ANY(%(tasks)s::text[]))
"""

# Pick up to %(limit)s ready rows of one queue that this worker runs, in priority / run_at / id
# order, skipping rows another worker is locking right now; lease each with its own token.
# Rows are (true, job columns...), plus the _LIMITED_WAITING row.
# The UPDATE finds the picked rows by `id = ANY(ARRAY(SELECT id FROM picked))`, not by a
# join: the generic plan of a prepared statement does not know %(limit)s and guesses a
# tenth of the ready rows, for which a join hashes a sequential scan of the whole table;
# the array is looked up in the primary key whatever the guess. With the join the server
# kept planning the hot statement afresh each time (~1 ms of its CPU per statement).
CLAIM = (
    """
WITH picked AS (
    SELECT id FROM {s}.jobs
    WHERE state = 'queued' AND queue = %(queue)s AND run_at <= {s}.epoch(%(at)s)
      AND task = ANY(%(tasks)s::text[]) AND limit_key IS NULL AND fair_key IS NULL
      AND NOT EXISTS (SELECT 1 FROM {s}.queues WHERE name = %(queue)s AND paused)
    ORDER BY priority, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED),
claimed AS (
    UPDATE {s}.jobs AS j
    SET state = 'running',
        attempts = j.attempts + 1,
        lease_token = nextval('{s}.lease_tokens'),
        lease_expires_at = {s}.epoch(%(at)s) + %(lease)s,
        worker_id = %(worker_id)s,
        started_at = {s}.epoch(%(at)s)
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.lease_token,
              j.shutdown_requeues, j.priority, j.run_at, j.batch_id)
SELECT true, id, queue, task, payload, attempts, max_attempts, lease_token, shutdown_requeues,
       priority, run_at, batch_id FROM claimed
UNION ALL"""
    + _LIMITED_WAITING
    + "UNION ALL"
    + _FAIR_WAITING
)

# Grouped finishes: one statement for a whole batch, each row still conditional on its token.
# A snooze (durq.Snooze) goes back like a retry but hands its attempt back and counts one
# more snooze; past o.cap (the task's max_snoozes) it fails with a 'snooze_limit' entry.
_SNOOZED = "(o.kind = 'snooze' AND j.snoozes < o.cap)"
_REQUEUED = "((o.kind = 'retry' AND j.attempts < j.max_attempts) OR " + _SNOOZED + ")"
_FINISHED = (
    (
        """
UPDATE {s}.jobs AS j
SET state = CASE WHEN o.kind = 'succeeded' THEN 'succeeded'
                 WHEN __REQUEUED__ THEN 'queued'
                 ELSE 'failed' END,  -- a retry with no attempts left fails: the store bounds it
    result = CASE WHEN o.kind = 'succeeded' THEN o.result ELSE j.result END,
    finished_at = CASE WHEN __REQUEUED__ THEN NULL ELSE {s}.epoch(%(at)s) END,
    run_at = CASE WHEN o.kind = 'retry' OR __SNOOZED__ THEN {s}.epoch(%(at)s) + o.delay
                  ELSE j.run_at END,
    attempts = CASE WHEN __SNOOZED__ THEN greatest(j.attempts - 1, 0) ELSE j.attempts END,
    snoozes = CASE WHEN __SNOOZED__ THEN j.snoozes + 1 ELSE j.snoozes END,
    errors = CASE WHEN o.kind = 'snooze' AND NOT __SNOOZED__
                  THEN {s}.append_error(j.errors, json_build_object(
                      'attempt', j.attempts, 'at', {s}.epoch(%(at)s), 'type', 'SnoozeLimit',
                      'message', 'snoozed ' || j.snoozes || ' times, the most its task allows '
                                 || '(max_snoozes=' || o.cap || '); the job fails',
                      'traceback', '', 'kind', 'snooze_limit')::text)
                  WHEN o.error IS NULL THEN j.errors
                  ELSE {s}.append_attempt(j.errors, o.error, j.started_at, j.worker_id) END,
    worker_id = CASE WHEN __REQUEUED__ THEN NULL ELSE j.worker_id END,
    lease_token = NULL, lease_expires_at = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[], %(kinds)s::text[], %(results)s::text[],
            %(errors)s::text[], %(delays)s::float8[], %(caps)s::int[])
     AS o(id, token, kind, result, error, delay, cap)
WHERE"""
    )
    .replace("__REQUEUED__", _REQUEUED)
    .replace("__SNOOZED__", _SNOOZED)
)
# RETURNING names each row written by (id, token): one batch may hold two outcomes of one
# job (an attempt whose lease went and the attempt that replaced it), and only the one
# whose token held was applied.
# `j.state || '' = 'running'` is `j.state = 'running'` that the planner cannot match to the
# partial indexes on running rows (jobs_leases, jobs_worker_running): it took them for
# small and read every running row of every worker (and their dead index entries) to
# hash-join a batch, where the primary key finds each row at once.
_FINISHED += """ j.id = o.id AND j.lease_token = o.token AND j.state || '' = 'running'
  AND __PARENTS__
RETURNING __RETURNING__
"""

# Jobs with children (has_children) are left to FINISH_PARENTS, which runs in a transaction
# with the children's settle (store/postgres/dependencies.py).
FINISH_MANY = _FINISHED.replace("__PARENTS__", "NOT j.has_children").replace(
    "__RETURNING__", "j.id, o.token"
)

FINISH_PARENTS = _FINISHED.replace("__PARENTS__", "j.has_children").replace(
    "__RETURNING__", "j.id, j.state, o.token"
)

# The worker's hot path in one statement (one round trip, one commit): record the outcomes
# and claim the next jobs of one queue. Data-modifying CTEs share one snapshot, so the claim
# cannot see a job this same statement just sent back to the queue.
FINISH_AND_CLAIM = (
    "WITH fin AS ("
    + FINISH_MANY
    + """),
picked AS (
    SELECT id FROM {s}.jobs
    WHERE state = 'queued' AND queue = %(queue)s AND run_at <= {s}.epoch(%(at)s)
      AND task = ANY(%(tasks)s::text[]) AND limit_key IS NULL AND fair_key IS NULL
      AND NOT EXISTS (SELECT 1 FROM {s}.queues WHERE name = %(queue)s AND paused)
    ORDER BY priority, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED),
claimed AS (
    UPDATE {s}.jobs AS j
    SET state = 'running', attempts = j.attempts + 1, lease_token = nextval('{s}.lease_tokens'),
        lease_expires_at = {s}.epoch(%(at)s) + %(lease)s, worker_id = %(worker_id)s,
        started_at = {s}.epoch(%(at)s)
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.queue, j.task, j.payload, j.attempts, j.max_attempts, j.lease_token,
              j.shutdown_requeues, j.priority, j.run_at, j.batch_id)
SELECT true, id, queue, task, payload, attempts, max_attempts, lease_token, shutdown_requeues,
       priority, run_at, batch_id FROM claimed
UNION ALL
SELECT false, id, NULL, NULL, NULL, NULL, NULL, token, NULL, NULL, NULL, NULL FROM fin
UNION ALL"""
    + _LIMITED_WAITING
    + "UNION ALL"
    + _FAIR_WAITING
)

EXTEND_LEASES = """
UPDATE {s}.jobs AS j SET lease_expires_at = {s}.epoch(%(at)s) + %(lease)s
FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS l(id, token)
WHERE j.id = l.id AND j.lease_token = l.token AND j.state = 'running'
RETURNING j.id, j.lease_token
"""

SET_PROGRESS = """
UPDATE {s}.jobs SET progress = %(progress)s
WHERE id = %(id)s AND lease_token = %(token)s AND state = 'running'
"""

RELEASE = """
UPDATE {s}.jobs
SET state = CASE WHEN shutdown_requeues >= %(free)s AND attempts >= max_attempts
                 THEN 'failed' ELSE 'queued' END,
    finished_at = CASE WHEN shutdown_requeues >= %(free)s AND attempts >= max_attempts
                       THEN {s}.epoch(%(at)s) ELSE NULL END,
    attempts = CASE WHEN shutdown_requeues >= %(free)s THEN attempts ELSE attempts - 1 END,
    errors = CASE WHEN shutdown_requeues >= %(free)s
                  THEN {s}.append_attempt(errors, %(error)s, started_at, worker_id)
                  ELSE errors END,
    shutdown_requeues = shutdown_requeues + 1,
    lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
WHERE id = %(id)s AND lease_token = %(token)s AND state = 'running'
RETURNING state, attempts
"""

# Prefetch: a job claimed ahead that never started goes back as it was (attempt handed back,
# no error entry, run_at kept so it goes first), with a wake-up for its queue.
GIVE_BACK = """
WITH back AS (
    UPDATE {s}.jobs AS j
    SET state = 'queued', attempts = greatest(j.attempts - 1, 0),
        lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
    FROM unnest(%(ids)s::bigint[], %(tokens)s::bigint[]) AS l(id, token)
    WHERE j.id = l.id AND j.lease_token = l.token AND j.state = 'running'
    RETURNING j.id, j.queue)
SELECT id, pg_notify(%(channel)s, queue) FROM back
"""

PAUSED_AMONG = "SELECT name FROM {s}.queues WHERE paused AND name = ANY(%(queues)s::text[])"

REAP = """
UPDATE {s}.jobs
SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
    finished_at = CASE WHEN attempts >= max_attempts THEN {s}.epoch(%(at)s) ELSE NULL END,
    errors = {s}.append_error(errors, json_build_object(
        'attempt', attempts, 'at', {s}.epoch(%(at)s), 'type', 'LeaseExpired',
        'message', 'lease expired: worker ' || coalesce(worker_id, '?') || ' stopped heartbeating',
        'traceback', '', 'kind', 'lease_lost', 'started_at', started_at,
        'worker_id', worker_id)::text),
    lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
WHERE state = 'running' AND lease_expires_at < {s}.epoch(%(at)s)
RETURNING id, state
"""

# Replay (dq.retry): see the SQLite statements. The SET clause reads the row's old values.
_REPLAY_SET = """
SET state = 'queued', attempts = 0, shutdown_requeues = 0, snoozes = 0,
    run_at = {s}.epoch(%(at)s), finished_at = NULL, result = NULL, lease_token = NULL,
    lease_expires_at = NULL, worker_id = NULL,
    errors = {s}.append_error(errors, json_build_object(
        'attempt', attempts, 'at', {s}.epoch(%(at)s), 'type', 'Replayed',
        'message', 'the job ended ' || state || ' after ' || attempts
                   || ' attempt(s); it runs again with a fresh budget of ' || max_attempts,
        'traceback', '', 'kind', 'replayed')::text),
    deadline = CASE WHEN deadline <= {s}.epoch(%(at)s) THEN NULL ELSE deadline END
"""

_REPLAYABLE = "('succeeded', 'failed', 'cancelled', 'expired')"

# RETURNING the fair key: a replayed job's key gets its turn row again (admin.py)
RETRY = (
    "UPDATE {s}.jobs"
    + _REPLAY_SET
    + "WHERE id = %(id)s AND state IN "
    + _REPLAYABLE
    + "\nRETURNING queue, fair_key"
)

REPLAY_CANDIDATES = (
    """SELECT id FROM {s}.jobs
WHERE state = %(state)s::text AND state IN """
    + _REPLAYABLE
    + """
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND id > %(after)s AND id <= %(upto)s
ORDER BY id LIMIT %(limit)s
"""
)

# The chunk's candidates in one statement, except those whose unique key a live job holds.
RETRY_IDS = (
    "UPDATE {s}.jobs AS c"
    + _REPLAY_SET
    + "WHERE id = ANY(%(ids)s::bigint[]) AND state IN "
    + _REPLAYABLE
    + """
  AND NOT (c.unique_key IS NOT NULL AND c.unique_until IS NULL AND EXISTS (
      SELECT 1 FROM {s}.jobs AS h
      WHERE h.queue = c.queue AND h.unique_key = c.unique_key AND h.unique_until IS NULL
        AND h.state IN ('queued', 'running', 'waiting', 'parked') AND h.id != c.id))
RETURNING id, queue, fair_key
"""
)

# A job the purge of (queue, states) may delete: it has no child that has not ended, other
# than children this same purge deletes. A finished parent whose child still waits is kept
# (as retention keeps it, steps.PRUNE_JOBS): the child takes its result when it is queued,
# and a deleted unfinished parent would leave its child waiting for ever.
PURGEABLE = """(NOT j.has_children OR NOT EXISTS (
    SELECT 1 FROM {s}.job_deps d JOIN {s}.jobs c ON c.id = d.child_id
    WHERE d.parent_id = j.id
      AND c.state NOT IN ('succeeded', 'failed', 'cancelled', 'expired')
      AND NOT (c.queue = %(queue)s AND c.state = ANY(%(states)s::text[]))))"""

PURGE = (
    "DELETE FROM {s}.jobs AS j WHERE j.queue = %(queue)s AND j.state = ANY(%(states)s::text[])"
    " AND " + PURGEABLE
)

# The jobs a purge of (queue, states) keeps, because a child that has not ended needs them.
PURGE_HELD = (
    "SELECT count(*) FROM {s}.jobs AS j WHERE j.queue = %(queue)s"
    " AND j.state = ANY(%(states)s::text[]) AND NOT " + PURGEABLE
)

# The dashboard's delete-matching: the ids it found, still failed now, except a parent
# that a child not yet ended waits for (on_parent_failure='run': it takes the parent's
# result, None, in its list), as PURGEABLE keeps one.
DELETE_FAILED = """
DELETE FROM {s}.jobs AS j WHERE j.id = ANY(%(ids)s::bigint[]) AND j.state = 'failed'
  AND (NOT j.has_children OR NOT EXISTS (
      SELECT 1 FROM {s}.job_deps d JOIN {s}.jobs c ON c.id = d.child_id
      WHERE d.parent_id = j.id
        AND c.state NOT IN ('succeeded', 'failed', 'cancelled', 'expired')))
"""

# A running limited job keeps its slot as a hold of its key, for the lease it had, until
# its worker reports the body gone (docs/features/limits.md); the row lock (FOR UPDATE)
# makes the hold and the cancel read the same, current row. The rowcount is the UPDATE's.
# A running job's cancel ends its attempt: a 'cancelled' entry with its start and lease
# holder keeps that attempt in the history (see the SQLite statement).
CANCEL = """
WITH old AS (
    SELECT id, state, limit_key, lease_expires_at, lease_token FROM {s}.jobs
    WHERE id = %(id)s AND state IN ('queued', 'running', 'waiting')
    FOR UPDATE),
held AS (
    INSERT INTO {s}.limit_holds (name, holder, acquired_at, expires_at, job_id, job_token)
    SELECT limit_key, 'job ' || id, {s}.epoch(%(at)s), lease_expires_at, id, lease_token
    FROM old
    WHERE state = 'running' AND limit_key IS NOT NULL
      AND lease_expires_at > {s}.epoch(%(at)s))
UPDATE {s}.jobs AS j
SET state = 'cancelled', finished_at = {s}.epoch(%(at)s), lease_token = NULL, lease_expires_at = NULL,
    errors = CASE WHEN old.state = 'running' THEN {s}.append_attempt(j.errors, json_build_object(
        'attempt', j.attempts, 'at', {s}.epoch(%(at)s), 'type', 'Cancelled',
        'message', 'cancelled while it ran', 'traceback', '', 'kind', 'cancelled')::text,
        j.started_at, j.worker_id) ELSE j.errors END
FROM old WHERE j.id = old.id
"""

LIST_JOBS = (
    "SELECT "
    + JOB_COLUMNS
    + """ FROM {s}.jobs
WHERE (%(state)s::text IS NULL OR state = %(state)s::text)
  AND (%(ready)s::int IS NULL
       OR (CASE WHEN run_at > {s}.epoch(%(at)s) THEN 0 ELSE 1 END) = %(ready)s::int)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(tag)s::text IS NULL
       OR id IN (SELECT job_id FROM {s}.job_tags WHERE tag = %(tag)s::text))
ORDER BY id DESC
LIMIT %(limit)s
"""
)

# The non-finished states by queue; the queued ones are QUEUED_SUMMARY's.
COUNT_BY_STATE = """
SELECT queue, 'running', 0, 0, count(*) FROM {s}.jobs WHERE state = 'running' GROUP BY queue
UNION ALL
SELECT queue, 'parked', 0, 0, count(*) FROM {s}.jobs WHERE state = 'parked' GROUP BY queue
UNION ALL
SELECT queue, 'waiting', 0, 0, count(*) FROM {s}.jobs WHERE state = 'waiting' GROUP BY queue
"""

# Every figure of the queued jobs in one pass over them (they were three, each reading
# every queued row from the heap): counts by queue, task, later (run_at ahead) and retried
# (an attempt used), with the oldest run_at among those ready.
QUEUED_SUMMARY = """
SELECT queue, task, (CASE WHEN run_at > {s}.epoch(%(at)s) THEN 1 ELSE 0 END) AS later,
       (CASE WHEN attempts > 0 THEN 1 ELSE 0 END) AS retried, count(*),
       min(run_at) FILTER (WHERE run_at <= {s}.epoch(%(at)s))
FROM {s}.jobs WHERE state = 'queued' GROUP BY queue, task, later, retried
"""

# The finished states by (state, queue) without reading every finished row: a skip scan of
# jobs_finished finds the pairs, then each pair is counted up to %(cap)s entries of that
# index (an index-only range scan: the ORDER BY is the index's order, so the planner
# does not take a sequential scan with a LIMIT that a rare state runs to the end of); a
# pair at the cap is a big one, and its figure comes
# from FINISHED_ESTIMATE (status_data marks it estimated).
FINISHED_COUNTS = """
WITH RECURSIVE k(state, queue) AS (
    (SELECT state, queue FROM {s}.jobs WHERE finished_at IS NOT NULL
     ORDER BY state, queue LIMIT 1)
    UNION ALL
    SELECT n.state, n.queue FROM k CROSS JOIN LATERAL (
        SELECT j.state, j.queue FROM {s}.jobs j
        WHERE j.finished_at IS NOT NULL AND (j.state, j.queue) > (k.state, k.queue)
        ORDER BY j.state, j.queue LIMIT 1) n
)
SELECT k.queue, k.state, (
    SELECT count(*) FROM (
        SELECT 1 FROM {s}.jobs j
        WHERE j.finished_at IS NOT NULL AND j.state = k.state AND j.queue = k.queue
        ORDER BY j.finished_at LIMIT %(cap)s) x)
FROM k
"""

# The planner's row estimate for one (state, queue) of finished jobs: reltuples scaled to
# the table's current size, times the pair's frequency from the jobs_state_queue
# statistics (migration 0018), which autovacuum's ANALYZE keeps current.
FINISHED_ESTIMATE = """
EXPLAIN (FORMAT JSON) SELECT 1 FROM {s}.jobs
WHERE finished_at IS NOT NULL AND state = %(state)s AND queue = %(queue)s
"""

HAS_PENDING = """
SELECT EXISTS (SELECT 1 FROM {s}.jobs WHERE state = 'queued' AND queue = ANY(%(queues)s::text[])
                 AND task = ANY(%(tasks)s::text[]))
    OR EXISTS (SELECT 1 FROM {s}.jobs WHERE state = 'running' AND queue = ANY(%(queues)s::text[])
                 AND task = ANY(%(tasks)s::text[]))
"""

SELECT_QUEUES = "SELECT name, paused, reason, source, paused_at FROM {s}.queues"

UPSERT_WORKER = """
INSERT INTO {s}.workers (id, host, pid, queues, tasks, started_at, last_seen, lease)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s, %(tasks)s, {s}.epoch(%(at)s), {s}.epoch(%(at)s),
        %(lease)s)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    tasks = excluded.tasks, started_at = excluded.started_at, last_seen = excluded.last_seen,
    lease = excluded.lease
"""

TOUCH_WORKER = (
    "UPDATE {s}.workers SET last_seen = {s}.epoch(%(at)s), wedged = %(wedged)s, "
    "loop_blocked = %(loop_blocked)s WHERE id = %(id)s"
)

DELETE_WORKER = "DELETE FROM {s}.workers WHERE id = %(id)s"

DELETE_DEAD_WORKERS = "DELETE FROM {s}.workers WHERE last_seen + 10 * lease < {s}.epoch(%(at)s)"

SELECT_WORKERS = (
    "SELECT id, host, pid, queues, tasks, started_at, last_seen, lease, wedged, loop_blocked, "
    "rescue_after, proc FROM {s}.workers "
    "ORDER BY id"
)

PUT_META = """
INSERT INTO {s}.meta (key, value) VALUES (%(key)s, %(value)s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""

GET_META = "SELECT value FROM {s}.meta WHERE key = %(key)s"

STAMP_LEADER = """
INSERT INTO {s}.meta (key, value) VALUES (%(key)s, {s}.epoch(%(at)s)::text)
ON CONFLICT (key) DO UPDATE SET value = excluded.value
"""

LEADER_AGE = "SELECT {s}.epoch(%(at)s) - value::double precision FROM {s}.meta WHERE key = %(key)s"

# Migrations and leadership.
SCHEMA_EXISTS = "SELECT 1 FROM pg_namespace WHERE nspname = %(name)s"
CREATE_SCHEMA = "CREATE SCHEMA IF NOT EXISTS {s}"
CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS {s}.schema_version (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
CURRENT_VERSION = "SELECT coalesce(max(version), 0) FROM {s}.schema_version"
RECORD_VERSION = "INSERT INTO {s}.schema_version (version) VALUES (%(version)s)"
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(%(key)s)"
TRY_LEAD = "SELECT pg_try_advisory_lock(%(key)s)"
