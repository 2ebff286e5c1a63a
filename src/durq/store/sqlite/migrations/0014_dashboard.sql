-- durq schema v14 (SQLite): what workers report about themselves, and the job list's
-- indexes for the dashboard (docs/features/dashboard.md).
--   workers.pool         how the worker runs attempts ('threads')
--   workers.concurrency  attempts at once
--   workers.version      the durq version it runs
--   workers.in_hand      JSON list of {"id", "task", "started_at"}: the jobs it holds
--   workers.done/failed  attempts that succeeded / failed since it started
-- The three partial indexes let the job list page the rare end states by id (keyset,
-- newest first) without reading the succeeded rows; a job enters them only when it ends
-- in that state, so the hot path (queued -> running -> succeeded) never writes them.
ALTER TABLE workers ADD COLUMN pool TEXT NOT NULL DEFAULT 'threads';
ALTER TABLE workers ADD COLUMN concurrency INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN version TEXT NOT NULL DEFAULT '';
ALTER TABLE workers ADD COLUMN in_hand TEXT NOT NULL DEFAULT '[]';
ALTER TABLE workers ADD COLUMN done INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN failed INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_failed_id ON jobs (id) WHERE state = 'failed';
CREATE INDEX jobs_cancelled_id ON jobs (id) WHERE state = 'cancelled';
CREATE INDEX jobs_expired_id ON jobs (id) WHERE state = 'expired';
CREATE INDEX jobs_parked_id ON jobs (id) WHERE state = 'parked';
