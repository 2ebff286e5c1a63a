"""Every SQL statement the SQLite store runs, one named constant each.

Parameters are named (``:name``). Times are REAL seconds since the epoch, passed in by
the store from its clock so that tests can move time.
"""

from __future__ import annotations

import functools

from durq.model.jobs import HISTORY_KEPT, HISTORY_TRIMMED_KIND

ATTEMPTS_LEFT = "CAST(attempts AS INTEGER) < CAST(max_attempts AS INTEGER)"

# The error history with room for one more entry, as every statement that appends one reads
# it (``json_insert(HISTORY, '$[#]', entry)``):
# - when a damaged row's history is not a JSON array, that damage kept as one entry, so
#   that appending to it can never fail (a corrupt row must not stop the reaper);
# - when it holds more than the first entry and the last HISTORY_KEPT - 1, it is rebuilt as
#   the first, a 'history_trimmed' marker that counts the entries dropped (those before,
#   plus the ones dropped now) and the last HISTORY_KEPT - 1 (durq.model.jobs.HISTORY_KEPT).
#   Only a full history is rebuilt (SQLite caches the parse of the text in a statement).
_N = HISTORY_KEPT
_MARKED = f"coalesce(json_extract(errors, '$[1].kind') = '{HISTORY_TRIMMED_KIND}', 0)"
_DROPPED = (
    f"(CASE WHEN {_MARKED} THEN CAST(json_extract(errors, '$[1].dropped') AS INTEGER) "
    f"ELSE 0 END + json_array_length(errors) - 1 - {_MARKED} - {_N - 1})"
)
# An element of json_each as JSON text (a subquery's column loses the JSON subtype).
_ELEMENT = "CASE WHEN type IN ('object', 'array') THEN value ELSE json_quote(value) END"
HISTORY = f"""(CASE
    WHEN NOT (json_valid(errors) AND json_type(errors) = 'array') THEN json_array(json_object(
        'attempt', 0, 'at', 0, 'type', 'UnreadableHistory', 'message', CAST(errors AS TEXT),
        'traceback', '', 'kind', 'corrupt'))
    WHEN json_array_length(errors) <= {_N} THEN errors
    ELSE (SELECT json_group_array(json(v)) FROM (
        SELECT 0 AS o, {_ELEMENT} AS v FROM json_each(errors) WHERE key = 0
        UNION ALL
        SELECT 1, json_object('attempt', 0, 'at', json_extract(errors, '$[1].at'),
            'type', 'HistoryTrimmed', 'message', {_DROPPED} || ' earlier entries not kept',
            'traceback', '', 'kind', '{HISTORY_TRIMMED_KIND}', 'dropped', {_DROPPED})
        UNION ALL
        SELECT 2 + key, {_ELEMENT} FROM json_each(errors) WHERE key > json_array_length(errors) - {_N}
        ORDER BY o))
    END)"""

# A failed attempt's error entry with the attempt's start and lease holder, read from the
# row by the statement that records it (UPDATE sees the values before its SET): no extra
# write, and nothing on the success path.
WITH_ATTEMPT = "json_set(json(:error), '$.started_at', started_at, '$.worker_id', worker_id)"

JOB_COLUMNS = (
    "id, queue, task, payload, priority, run_at, attempts, max_attempts, state, lease_token, "
    "lease_expires_at, worker_id, key, created_at, started_at, finished_at, result, progress, "
    "errors, meta, shutdown_requeues, deadline, notice_at, noticed_at, park_expires_at, "
    "batch_id, snoozes"
)

#: Parameters of one plain row of :func:`insert_jobs` with ``meta``: id, queue, task,
#: payload, priority, run_at, max_attempts, created_at, meta (without ``meta``: the first
#: eight). ``key`` is always NULL there: a keyed row is inserted on its own.
INSERT_JOB_COLUMNS = 9
_INSERT_ROW = "(?, ?, ?, ?, ?, ?, ?, 'queued', NULL, ?, ?)"
_INSERT_ROW_BARE = "(?, ?, ?, ?, ?, ?, ?, 'queued', NULL, ?, NULL)"


@functools.lru_cache(maxsize=16)
def insert_jobs(rows: int, meta: bool = True) -> str:
    """One statement inserting ``rows`` plain rows (multi-row VALUES, explicit ids).

    Without ``meta`` the column is the literal NULL rather than a parameter: the sqlite3
    module binds ``None`` through its adapter lookup (a failed attribute lookup that builds
    an exception message, about 0.5 µs a value), ``int``, ``float`` and ``str`` directly.
    """
    return (
        "INSERT INTO jobs (id, queue, task, payload, priority, run_at, max_attempts, state, key,"
        " created_at, meta) VALUES " + ", ".join([_INSERT_ROW if meta else _INSERT_ROW_BARE] * rows)
    )


@functools.lru_cache(maxsize=16)
def insert_payloads(rows: int, meta: bool) -> str:
    """One statement inserting ``rows`` rows that differ only in id and payload: the
    template's values bound once (``?1`` … ``?6``: queue, task, priority, run_at,
    max_attempts, created_at, and with ``meta`` ``?7``, else NULL written in the
    statement), then ``(id, payload)`` per row: ``enqueue_many``'s plain rows, six values
    fewer bound a row than :func:`insert_jobs`."""
    return (
        "INSERT INTO jobs (id, queue, task, payload, priority, run_at, max_attempts, state, key,"
        " created_at, meta) SELECT column1, ?1, ?2, column2, ?3, ?4, ?5, 'queued', NULL, ?6, "
        + ("?7" if meta else "NULL")
        + " FROM (VALUES "
        + ", ".join(["(?, ?)"] * rows)
        + ")"
    )


INSERT_ONE = """
INSERT INTO jobs (queue, task, payload, priority, run_at, max_attempts, state, key,
                  created_at, meta)
VALUES (:queue, :task, :payload, :priority, :run_at, :max_attempts, 'queued', :key,
        :created_at, :meta)
RETURNING id
"""

# The plain one-row enqueue (no key, no extras): positional parameters, one statement.
INSERT_ONE_PLAIN = """
INSERT INTO jobs (queue, task, payload, priority, run_at, max_attempts, state, created_at, meta)
VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?)
"""

# The same without meta: NULL written in the statement, not bound (see insert_jobs).
INSERT_ONE_PLAIN_BARE = """
INSERT INTO jobs (queue, task, payload, priority, run_at, max_attempts, state, created_at)
VALUES (?, ?, ?, ?, ?, ?, 'queued', ?)
"""

INSERT_JOB_KEYED = """
INSERT INTO jobs (queue, task, payload, priority, run_at, max_attempts, state, key,
                  created_at, meta)
VALUES (:queue, :task, :payload, :priority, :run_at, :max_attempts, 'queued', :key,
        :created_at, :meta)
ON CONFLICT (queue, key) WHERE key IS NOT NULL DO NOTHING
RETURNING id
"""

LAST_JOB_ID = "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0)"

SELECT_JOB = f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = :id"

SELECT_JOB_BY_KEY = f"SELECT {JOB_COLUMNS} FROM jobs WHERE queue = :queue AND key = :key"

# One statement: pick up to :limit ready rows of one queue that this worker can run (its task
# names, queue not paused), in priority / run_at / id order, and lease them. Jobs with a limit
# (limit_key) are left to limits.CLAIM_LIMITED, which runs first. random() is
# evaluated per row, so every claimed row gets its own fresh 63-bit fencing token.
CLAIM = """
UPDATE jobs
SET state = 'running',
    attempts = attempts + 1,
    lease_token = (random() & 9223372036854775807),
    lease_expires_at = :expires,
    worker_id = :worker_id,
    started_at = :now
WHERE id IN (
        SELECT id FROM jobs
        WHERE state = 'queued' AND queue = :queue AND run_at <= :now
          AND task IN (SELECT value FROM json_each(:tasks))
          AND limit_key IS NULL AND fair_key IS NULL
        ORDER BY priority, run_at, id
        LIMIT :limit)
  AND NOT EXISTS (SELECT 1 FROM queues WHERE name = :queue AND paused = 1)
RETURNING id, queue, task, payload, CAST(attempts AS INTEGER), CAST(max_attempts AS INTEGER),
          lease_token, CAST(shutdown_requeues AS INTEGER), CAST(priority AS INTEGER),
          CAST(run_at AS REAL), batch_id
"""

# Before the claim of one queue, in its transaction: does it hold limited jobs waiting
# (the limited pass runs first) and fair-keyed ones (the fair pass)? Two probes of partial
# indexes (jobs_limited_ready, jobs_fair_ready) in one statement: a queue without either
# pays one cheap read for both passes.
CLAIM_PASSES = """
SELECT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_limited_ready
               WHERE state = 'queued' AND limit_key IS NOT NULL AND queue = :queue),
       EXISTS (SELECT 1 FROM jobs
               WHERE state = 'queued' AND queue = :queue AND fair_key IS NOT NULL)
"""

# A read before a claim, so that an idle worker takes the write lock only when work is due
# in a queue that is not paused.
ANY_READY = """
SELECT EXISTS (SELECT 1 FROM jobs
               WHERE state = 'queued' AND queue IN (SELECT value FROM json_each(:queues))
                 AND run_at <= :now AND task IN (SELECT value FROM json_each(:tasks))
                 AND queue NOT IN (SELECT name FROM queues WHERE paused = 1))
"""

FINISH_SUCCEEDED = """
UPDATE jobs
SET state = 'succeeded', result = :result, finished_at = :now,
    lease_token = NULL, lease_expires_at = NULL
WHERE id = :id AND lease_token = :token AND state = 'running'
"""

# Many successes in one statement: the claimer's batch, as a JSON array of
# [id, token, result] (a result is JSON text). Each row stays fenced by its own token;
# RETURNING names the rows written. One statement instead of one per job: each
# statement is a round trip through the sqlite3 module that gives up the GIL (the
# worker's runner threads then hold it while the claimer waits to go on).
# json_extract, not the ->> operator: that needs SQLite 3.38 and durq accepts 3.35
# (connection.MIN_SQLITE). SQLite's JSON strings end at an escaped NUL, so a result
# holding one (a codec's stored text) is written one statement on its own (jobs.py).
FINISH_SUCCEEDED_MANY = """
UPDATE jobs
SET state = 'succeeded', result = o.result, finished_at = :now,
    lease_token = NULL, lease_expires_at = NULL
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token,
             json_extract(value, '$[2]') AS result
      FROM json_each(:rows)) AS o
WHERE jobs.id = o.id AND jobs.lease_token = o.token AND jobs.state = 'running'
RETURNING jobs.id
"""

# A retry of a job with no attempts left fails it instead: the store bounds attempts
# itself, whatever the caller decided.
FINISH_RETRY = f"""
UPDATE jobs
SET state = CASE WHEN {ATTEMPTS_LEFT} THEN 'queued' ELSE 'failed' END,
    finished_at = CASE WHEN {ATTEMPTS_LEFT} THEN NULL ELSE :now END,
    run_at = :run_at, errors = json_insert({HISTORY}, '$[#]', {WITH_ATTEMPT}),
    lease_token = NULL, lease_expires_at = NULL,
    worker_id = CASE WHEN {ATTEMPTS_LEFT} THEN NULL ELSE worker_id END
WHERE id = :id AND lease_token = :token AND state = 'running'
"""

FINISH_FAILED = f"""
UPDATE jobs
SET state = 'failed', finished_at = :now, errors = json_insert({HISTORY}, '$[#]', {WITH_ATTEMPT}),
    lease_token = NULL, lease_expires_at = NULL
WHERE id = :id AND lease_token = :token AND state = 'running'
"""

# A snooze (durq.Snooze): back to the queue at :run_at with the attempt handed back and one
# more snooze counted, the 'snoozed' entry appended; a job that used :max_snoozes already
# fails instead with a 'snooze_limit' entry. Fenced like every finish.
_SNOOZES_LEFT = "CAST(snoozes AS INTEGER) < :max_snoozes"
FINISH_SNOOZE = f"""
UPDATE jobs
SET state = CASE WHEN {_SNOOZES_LEFT} THEN 'queued' ELSE 'failed' END,
    finished_at = CASE WHEN {_SNOOZES_LEFT} THEN NULL ELSE :now END,
    attempts = CASE WHEN {_SNOOZES_LEFT} THEN max(CAST(attempts AS INTEGER) - 1, 0)
                    ELSE attempts END,
    snoozes = CASE WHEN {_SNOOZES_LEFT} THEN snoozes + 1 ELSE snoozes END,
    run_at = CASE WHEN {_SNOOZES_LEFT} THEN :run_at ELSE run_at END,
    errors = json_insert({HISTORY}, '$[#]', CASE WHEN {_SNOOZES_LEFT} THEN {WITH_ATTEMPT}
        ELSE json_object('attempt', attempts, 'at', :now, 'type', 'SnoozeLimit',
            'message', 'snoozed ' || snoozes || ' times, the most its task allows '
                       || '(max_snoozes=' || :max_snoozes || '); the job fails',
            'traceback', '', 'kind', 'snooze_limit') END),
    lease_token = NULL, lease_expires_at = NULL,
    worker_id = CASE WHEN {_SNOOZES_LEFT} THEN NULL ELSE worker_id END
WHERE id = :id AND lease_token = :token AND state = 'running'
"""

EXTEND_LEASE = """
UPDATE jobs SET lease_expires_at = :expires
WHERE id = :id AND lease_token = :token AND state = 'running'
"""

SET_PROGRESS = """
UPDATE jobs SET progress = :progress
WHERE id = :id AND lease_token = :token AND state = 'running'
"""

# Shutdown: give a running job back. The first :free requeues of a job hand its attempt back;
# later ones keep it (and fail the job when none are left), so restarts cannot loop a job forever.
RELEASE = f"""
UPDATE jobs
SET state = CASE WHEN shutdown_requeues >= :free AND CAST(attempts AS INTEGER) >= CAST(max_attempts AS INTEGER)
                 THEN 'failed' ELSE 'queued' END,
    finished_at = CASE WHEN shutdown_requeues >= :free AND CAST(attempts AS INTEGER) >= CAST(max_attempts AS INTEGER)
                       THEN :now ELSE NULL END,
    attempts = CASE WHEN shutdown_requeues >= :free THEN attempts ELSE attempts - 1 END,
    errors = CASE WHEN shutdown_requeues >= :free
                  THEN json_insert({HISTORY}, '$[#]', {WITH_ATTEMPT}) ELSE errors END,
    shutdown_requeues = shutdown_requeues + 1,
    lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
WHERE id = :id AND lease_token = :token AND state = 'running'
RETURNING state, attempts
"""

# Prefetch: a job claimed ahead that never started goes back as it was (attempt handed back,
# no error entry, run_at kept so it goes first). See durq/worker/prefetch.py.
GIVE_BACK = """
UPDATE jobs
SET state = 'queued', attempts = max(CAST(attempts AS INTEGER) - 1, 0),
    lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
WHERE id = :id AND lease_token = :token AND state = 'running'
"""

PAUSED_AMONG = """
SELECT name FROM queues WHERE paused = 1 AND name IN (SELECT value FROM json_each(:queues))
"""

# Reaper: leases past expiry go back to the queue (their attempt stays counted), or fail
# when no attempts are left. The lost delivery is written into the error history. run_at is
# left alone, so a recovered job keeps its place at the head of the queue instead of waiting
# behind the whole backlog.
REAP = f"""
UPDATE jobs
SET state = CASE WHEN CAST(attempts AS INTEGER) >= CAST(max_attempts AS INTEGER) THEN 'failed' ELSE 'queued' END,
    finished_at = CASE WHEN CAST(attempts AS INTEGER) >= CAST(max_attempts AS INTEGER) THEN :now ELSE NULL END,
    errors = json_insert({HISTORY}, '$[#]', json_object(
        'attempt', attempts, 'at', :now, 'type', 'LeaseExpired',
        'message', 'lease expired: worker ' || coalesce(worker_id, '?') || ' stopped heartbeating',
        'traceback', '', 'kind', 'lease_lost', 'started_at', started_at, 'worker_id', worker_id)),
    lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
WHERE state = 'running' AND lease_expires_at < :now
RETURNING id, state
"""

# Replay (dq.retry): a finished job runs again with a fresh attempt budget. Its history is
# kept and gets one 'replayed' entry that records how the run before ended (so a succeeded
# run, which has no error entry, stays in the history too); attempt numbers start again at 1.
_REPLAY_SET = f"""
SET state = 'queued', attempts = 0, shutdown_requeues = 0, snoozes = 0, run_at = :now,
    finished_at = NULL, result = NULL, lease_token = NULL, lease_expires_at = NULL,
    worker_id = NULL,
    errors = json_insert({HISTORY}, '$[#]', json_object(
        'attempt', attempts, 'at', :now, 'type', 'Replayed',
        'message', 'the job ended ' || state || ' after ' || attempts
                   || ' attempt(s); it runs again with a fresh budget of ' || max_attempts,
        'traceback', '', 'kind', 'replayed')),
    deadline = CASE WHEN deadline <= :now THEN NULL ELSE deadline END  -- else it re-expires
"""

REPLAYABLE = "('succeeded', 'failed', 'cancelled', 'expired')"

# A job whose active unique key (unique="active") another live job holds now cannot be
# replayed (jobs_unique_active): the bulk replay skips it, dq.retry says so.
_KEY_HELD = (
    "({j}.unique_key IS NOT NULL AND {j}.unique_until IS NULL AND EXISTS ("
    "SELECT 1 FROM jobs AS h WHERE h.queue = {j}.queue AND h.unique_key = {j}.unique_key"
    " AND h.unique_until IS NULL AND h.state IN ('queued', 'running', 'waiting', 'parked')"
    " AND h.id != {j}.id))"
)

RETRY = f"""
UPDATE jobs {_REPLAY_SET}
WHERE id = :id AND state IN {REPLAYABLE}
"""

# durq retry --state: one chunk of the matches, in id order after :after and up to :upto
# (the newest id when the command began, so that a job failing again meanwhile is not
# retried twice by one command).
REPLAY_CANDIDATES = f"""
SELECT id FROM jobs
WHERE state = :state AND state IN {REPLAYABLE}
  AND (:queue IS NULL OR queue = :queue) AND (:task IS NULL OR task = :task)
  AND id > :after AND id <= :upto
ORDER BY id LIMIT :limit
"""

# The chunk's candidates in one statement, except those whose unique key a live job holds.
RETRY_IDS = f"""
UPDATE jobs {_REPLAY_SET}
WHERE id IN (SELECT value FROM json_each(:ids)) AND state IN {REPLAYABLE}
  AND NOT {_KEY_HELD.format(j="jobs")}
RETURNING id
"""

# A job the purge of (:queue, :states) may delete: it has no child that has not ended,
# other than children this same purge deletes. A finished parent whose child still waits is
# kept (as retention keeps it, steps.PRUNE_JOBS): the child takes its result when it is
# queued, and a deleted unfinished parent would leave its child waiting for ever.
PURGEABLE = """(jobs.has_children = 0 OR NOT EXISTS (
    SELECT 1 FROM job_deps d JOIN jobs c ON c.id = d.child_id
    WHERE d.parent_id = jobs.id
      AND c.state NOT IN ('succeeded', 'failed', 'cancelled', 'expired')
      AND NOT (c.queue = :queue AND c.state IN (SELECT value FROM json_each(:states)))))"""

PURGE = f"""
DELETE FROM jobs WHERE queue = :queue AND state IN (SELECT value FROM json_each(:states))
  AND {PURGEABLE}
"""

# The jobs a purge of (:queue, :states) keeps, because a child that has not ended needs them.
PURGE_HELD = f"""
SELECT count(*) FROM jobs WHERE queue = :queue AND state IN (SELECT value FROM json_each(:states))
  AND NOT {PURGEABLE}
"""

# The dashboard's delete-matching: the ids it found, still failed now, except a parent
# that a child not yet ended waits for (on_parent_failure='run': it takes the parent's
# result, None, in its list), as PURGEABLE keeps one.
DELETE_FAILED = """
DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'failed'
  AND (has_children = 0 OR NOT EXISTS (
      SELECT 1 FROM job_deps d JOIN jobs c ON c.id = d.child_id
      WHERE d.parent_id = jobs.id
        AND c.state NOT IN ('succeeded', 'failed', 'cancelled', 'expired')))
"""

# A running job's cancel ends its attempt: a 'cancelled' entry with its start and lease
# holder keeps that attempt in the history (a queued or waiting job's history is unchanged).
CANCEL = f"""
UPDATE jobs
SET state = 'cancelled', finished_at = :now, lease_token = NULL, lease_expires_at = NULL,
    errors = CASE WHEN state = 'running' THEN json_insert({HISTORY}, '$[#]', json_object(
        'attempt', attempts, 'at', :now, 'type', 'Cancelled',
        'message', 'cancelled while it ran', 'traceback', '', 'kind', 'cancelled',
        'started_at', started_at, 'worker_id', worker_id)) ELSE errors END
WHERE id = :id AND state IN ('queued', 'running', 'waiting')
"""

LIST_JOBS = f"""
SELECT {JOB_COLUMNS} FROM jobs
WHERE (:state IS NULL OR state = :state)
  AND (:ready IS NULL OR (CASE WHEN run_at > :now THEN 0 ELSE 1 END) = :ready)
  AND (:queue IS NULL OR queue = :queue)
  AND (:task IS NULL OR task = :task)
  AND (:tag IS NULL OR id IN (SELECT job_id FROM job_tags WHERE tag = :tag))
ORDER BY id DESC
LIMIT :limit
"""

# Each branch reads the index of its states: jobs_leases, jobs_finished, the partial ones;
# the queued rows are QUEUED_SUMMARY's.
COUNT_BY_STATE = """
SELECT queue, 'running', 0, 0, count(*) FROM jobs WHERE state = 'running' GROUP BY queue
UNION ALL
SELECT queue, state, 0, 0, count(*) FROM jobs INDEXED BY jobs_finished
WHERE finished_at IS NOT NULL GROUP BY state, queue
UNION ALL
SELECT queue, 'parked', 0, 0, count(*) FROM jobs WHERE state = 'parked' GROUP BY queue
UNION ALL
SELECT queue, 'waiting', 0, 0, count(*) FROM jobs WHERE state = 'waiting' GROUP BY queue
"""

# Every figure of the queued jobs in one pass over them through jobs_ready (they were
# three): counts by queue, task, later (run_at ahead) and retried (an attempt used), with
# the oldest run_at among those ready.
QUEUED_SUMMARY = """
SELECT queue, task, (CASE WHEN run_at > :now THEN 1 ELSE 0 END) AS later,
       (CASE WHEN attempts > 0 THEN 1 ELSE 0 END) AS retried, count(*),
       min(CASE WHEN run_at <= :now THEN run_at END)
FROM jobs WHERE state = 'queued' GROUP BY queue, task, later, retried
"""

HAS_PENDING = """
SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 'queued'
                 AND queue IN (SELECT value FROM json_each(:queues))
                 AND task IN (SELECT value FROM json_each(:tasks)))
    OR EXISTS (SELECT 1 FROM jobs WHERE state = 'running'
                 AND queue IN (SELECT value FROM json_each(:queues))
                 AND task IN (SELECT value FROM json_each(:tasks)))
"""

SELECT_QUEUES = "SELECT name, paused, reason, source, paused_at FROM queues"

UPSERT_WORKER = """
INSERT INTO workers (id, host, pid, queues, tasks, started_at, last_seen, lease)
VALUES (:id, :host, :pid, :queues, :tasks, :now, :now, :lease)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
    queues = excluded.queues, tasks = excluded.tasks, started_at = excluded.started_at,
    last_seen = excluded.last_seen, lease = excluded.lease
"""

TOUCH_WORKER = (
    "UPDATE workers SET last_seen = :now, wedged = :wedged, loop_blocked = :loop_blocked "
    "WHERE id = :id"
)

DELETE_WORKER = "DELETE FROM workers WHERE id = :id"

# Workers not seen for ten leases are forgotten (their jobs were reaped long before).
DELETE_DEAD_WORKERS = "DELETE FROM workers WHERE last_seen + 10 * lease < :now"

SELECT_WORKERS = (
    "SELECT id, host, pid, queues, tasks, started_at, last_seen, lease, wedged, loop_blocked, "
    "rescue_after, proc FROM workers "
    "ORDER BY id"
)

PUT_META = "INSERT OR REPLACE INTO meta (key, value) VALUES (:key, :value)"

GET_META = "SELECT value FROM meta WHERE key = :key"

DATA_VERSION = "PRAGMA data_version"

# Of the (id, token) leases a worker holds, those no longer held (its cancel watch): the
# row gone, or not running under that token; why: 'cancelled' / 'expired', else
# 'lease_lost' (reaped, rescued, replayed and maybe claimed again). :leases is a JSON
# array of [id, token]; json_extract, not ->> (SQLite 3.38; durq accepts 3.35).
LOST_AMONG = """
SELECT l.id, l.token,
       CASE WHEN j.state IN ('cancelled', 'expired') THEN j.state ELSE 'lease_lost' END
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token
      FROM json_each(:leases)) AS l
LEFT JOIN jobs AS j ON j.id = l.id
WHERE j.id IS NULL OR j.state != 'running' OR j.lease_token IS NOT l.token
"""

# The store-wide high-water mark of store time (durq.store.sqlite.clock): only ever raised.
RAISE_CLOCK_MARK = """
INSERT INTO meta (key, value) VALUES ('clock_high_water', :now)
ON CONFLICT (key) DO UPDATE SET value = max(CAST(value AS REAL), CAST(excluded.value AS REAL))
RETURNING CAST(value AS REAL)
"""
READ_CLOCK_MARK = """
SELECT max(coalesce((SELECT CAST(value AS REAL) FROM meta WHERE key = 'clock_high_water'), 0),
           coalesce((SELECT CAST(created_at AS REAL) FROM jobs ORDER BY id DESC LIMIT 1), 0))
"""
