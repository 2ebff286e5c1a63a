-- durq schema v17 (SQLite): snooze and rescue in seconds (docs/features/snooze.md,
-- docs/guarantees.md "Rescue of a dead worker's jobs").
--   jobs.snoozes          times the job was put back by a snooze (no attempt spent);
--                         bounded by the task's max_snoozes, reset by a replay
--   workers.rescue_after  seconds without a liveness beat after which the worker counts as
--                         dead and the leader returns its jobs (NULL: a worker that does not
--                         beat, i.e. an older durq: only its leases' expiry recovers its jobs)
--   workers.proc          "<boot id>/<pid namespace>/<process start time>" of the worker's
--                         process, so that a leader on the same host and in the same pid
--                         namespace can tell a dead pid (or a reused one) at once
--   workers.rescues       times the leader returned this worker's jobs; the worker reads it
--                         at each beat and, when it grew, checks its leases at once
ALTER TABLE jobs ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN rescue_after REAL;
ALTER TABLE workers ADD COLUMN proc TEXT;
ALTER TABLE workers ADD COLUMN rescues INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_worker_running ON jobs (worker_id) WHERE state = 'running';
