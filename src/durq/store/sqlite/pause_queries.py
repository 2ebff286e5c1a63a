"""SQL for queue pauses and alerts on SQLite (one named constant per statement).

Times are REAL seconds since the epoch, passed in by the store from its clock.
"""

from __future__ import annotations

# Pause a queue unless it is paused already: the first pause wins and keeps its reason and
# source (so an app's own pause is not overwritten by an admin's, nor by an automatic one).
# A row comes back only when this statement paused the queue.
PAUSE_QUEUE = """
INSERT INTO queues (name, paused, reason, source, paused_at)
VALUES (:queue, 1, :reason, :source, :now)
ON CONFLICT (name) DO UPDATE SET paused = 1, reason = excluded.reason,
    source = excluded.source, paused_at = excluded.paused_at
WHERE queues.paused = 0
RETURNING name
"""

# Resume a paused queue; with :source, only a pause made by that source.
RESUME_QUEUE = """
UPDATE queues SET paused = 0, reason = NULL, source = NULL, paused_at = NULL
WHERE name = :queue AND paused = 1 AND (:source IS NULL OR source = :source)
"""

SELECT_PAUSE = """
SELECT name, reason, source, paused_at FROM queues WHERE name = :queue AND paused = 1
"""

# A task raised PauseQueue: its job goes back to the queue and the attempt the claim counted
# is handed back (the job did not fail; its queue did). run_at is kept, so it goes first when
# the queue is resumed. Conditional on the lease token, like every write to a running job.
REQUEUE_PAUSED = """
UPDATE jobs
SET state = 'queued',
    attempts = max(CAST(attempts AS INTEGER) - 1, 0),
    lease_token = NULL, lease_expires_at = NULL, worker_id = NULL
WHERE id = :id AND lease_token = :token AND state = 'running'
"""

# Raise an alert: sent (suppressed = 0 afterwards) when the key is new or its last send is
# :cooldown seconds ago or more; otherwise counted (suppressed + 1). The SET expressions read
# the row as it was, so `reported` keeps the count of raises this send stands for.
RAISE_ALERT = """
INSERT INTO alerts (key, message, severity, last_sent_at, last_at, suppressed, pending_since,
                    reported, reported_since, sent_count, raised_count)
VALUES (:key, :message, :severity, :now, :now, 0, NULL, 0, NULL, 1, 1)
ON CONFLICT (key) DO UPDATE SET
    reported = CASE WHEN :now >= alerts.last_sent_at + :cooldown
                    THEN alerts.suppressed ELSE alerts.reported END,
    reported_since = CASE WHEN :now >= alerts.last_sent_at + :cooldown
                          THEN alerts.pending_since ELSE alerts.reported_since END,
    suppressed = CASE WHEN :now >= alerts.last_sent_at + :cooldown
                      THEN 0 ELSE alerts.suppressed + 1 END,
    pending_since = CASE WHEN :now >= alerts.last_sent_at + :cooldown
                         THEN NULL ELSE coalesce(alerts.pending_since, :now) END,
    sent_count = alerts.sent_count
                 + (CASE WHEN :now >= alerts.last_sent_at + :cooldown THEN 1 ELSE 0 END),
    last_sent_at = CASE WHEN :now >= alerts.last_sent_at + :cooldown
                        THEN :now ELSE alerts.last_sent_at END,
    raised_count = alerts.raised_count + 1,
    last_at = :now,
    message = excluded.message,
    severity = excluded.severity
RETURNING suppressed = 0, reported, reported_since, last_sent_at
"""
