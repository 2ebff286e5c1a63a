-- durq schema: limits (concurrency per key, rate per key, named holds).
-- A job's limit is computed at enqueue and stored on its row; NULL limit_key = no limit.
ALTER TABLE jobs ADD COLUMN limit_key TEXT;
ALTER TABLE jobs ADD COLUMN limit_concurrency INTEGER;
ALTER TABLE jobs ADD COLUMN limit_rate INTEGER;
ALTER TABLE jobs ADD COLUMN limit_per REAL;

-- The ready limited jobs of a queue, read by the limited claim (jobs without a limit are
-- never in it, so their inserts and claims do not pay for it).
CREATE INDEX jobs_limited_ready ON jobs (queue, priority, run_at, id)
    WHERE state = 'queued' AND limit_key IS NOT NULL;

-- Slots in use: running limited jobs per key.
CREATE INDEX jobs_limited_running ON jobs (limit_key)
    WHERE state = 'running' AND limit_key IS NOT NULL;

-- Slots held by code outside the queue (Durq.limit); a hold past expires_at no longer counts.
CREATE TABLE limit_holds (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL,
    holder      TEXT NOT NULL,
    acquired_at REAL NOT NULL,
    expires_at  REAL NOT NULL
);
CREATE INDEX limit_holds_name ON limit_holds (name, expires_at);

-- The start times of rate-limited jobs (a sliding log): at most limit_rate starts of one key
-- in any limit_per seconds. Rows older than an hour (the longest period) are pruned.
CREATE TABLE limit_starts (
    name TEXT NOT NULL,
    at   REAL NOT NULL
);
CREATE INDEX limit_starts_name ON limit_starts (name, at);
CREATE INDEX limit_starts_at ON limit_starts (at);
