"""SQL for queue pauses and alerts on PostgreSQL (one named constant per statement).

``{s}`` is the schema; every time is ``{s}.epoch(%(at)s)``, the database clock.
"""

from __future__ import annotations

# Pause a queue unless it is paused already: the first pause wins and keeps its reason and
# source. A row comes back only when this statement paused the queue.
PAUSE_QUEUE = """
INSERT INTO {s}.queues AS q (name, paused, reason, source, paused_at)
VALUES (%(queue)s, true, %(reason)s, %(source)s, {s}.epoch(%(at)s))
ON CONFLICT (name) DO UPDATE SET paused = true, reason = excluded.reason,
    source = excluded.source, paused_at = excluded.paused_at
WHERE NOT q.paused
RETURNING name
"""

RESUME_QUEUE = """
UPDATE {s}.queues SET paused = false, reason = NULL, source = NULL, paused_at = NULL
WHERE name = %(queue)s AND paused AND (%(source)s::text IS NULL OR source = %(source)s::text)
"""

SELECT_PAUSE = """
SELECT name, reason, source, paused_at FROM {s}.queues WHERE name = %(queue)s AND paused
"""

# See the SQLite statement: back to queued, the claim's attempt handed back, run_at kept.
REQUEUE_PAUSED = """
UPDATE {s}.jobs
SET state = 'queued', attempts = greatest(attempts - 1, 0),
    lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
WHERE id = %(id)s AND lease_token = %(token)s AND state = 'running'
"""

# See the SQLite statement. ON CONFLICT DO UPDATE locks the row, so two processes raising
# the same key at once are serialised: one sends, the other counts.
RAISE_ALERT = """
INSERT INTO {s}.alerts AS a (key, message, severity, last_sent_at, last_at, suppressed,
                             pending_since, reported, reported_since, sent_count, raised_count)
VALUES (%(key)s, %(message)s, %(severity)s, {s}.epoch(%(at)s), {s}.epoch(%(at)s), 0, NULL, 0,
        NULL, 1, 1)
ON CONFLICT (key) DO UPDATE SET
    reported = CASE WHEN {s}.epoch(%(at)s) >= a.last_sent_at + %(cooldown)s
                    THEN a.suppressed ELSE a.reported END,
    reported_since = CASE WHEN {s}.epoch(%(at)s) >= a.last_sent_at + %(cooldown)s
                          THEN a.pending_since ELSE a.reported_since END,
    suppressed = CASE WHEN {s}.epoch(%(at)s) >= a.last_sent_at + %(cooldown)s
                      THEN 0 ELSE a.suppressed + 1 END,
    pending_since = CASE WHEN {s}.epoch(%(at)s) >= a.last_sent_at + %(cooldown)s
                         THEN NULL ELSE coalesce(a.pending_since, {s}.epoch(%(at)s)) END,
    sent_count = a.sent_count
                 + (CASE WHEN {s}.epoch(%(at)s) >= a.last_sent_at + %(cooldown)s THEN 1 ELSE 0 END),
    last_sent_at = CASE WHEN {s}.epoch(%(at)s) >= a.last_sent_at + %(cooldown)s
                        THEN {s}.epoch(%(at)s) ELSE a.last_sent_at END,
    raised_count = a.raised_count + 1,
    last_at = {s}.epoch(%(at)s),
    message = excluded.message,
    severity = excluded.severity
RETURNING suppressed = 0, reported, reported_since, last_sent_at
"""
