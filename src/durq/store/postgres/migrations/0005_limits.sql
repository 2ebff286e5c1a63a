-- durq schema: limits (concurrency per key, rate per key, named holds).
-- A job's limit is computed at enqueue and stored on its row; NULL limit_key = no limit.
ALTER TABLE {schema}.jobs ADD COLUMN limit_key text;
ALTER TABLE {schema}.jobs ADD COLUMN limit_concurrency integer;
ALTER TABLE {schema}.jobs ADD COLUMN limit_rate integer;
ALTER TABLE {schema}.jobs ADD COLUMN limit_per double precision;

-- The ready limited jobs of a queue, read by the limited claim.
CREATE INDEX jobs_limited_ready ON {schema}.jobs (queue, priority, run_at, id)
    WHERE state = 'queued' AND limit_key IS NOT NULL;

-- Slots in use: running limited jobs per key.
CREATE INDEX jobs_limited_running ON {schema}.jobs (limit_key)
    WHERE state = 'running' AND limit_key IS NOT NULL;

-- Slots held by code outside the queue (Durq.limit); a hold past expires_at no longer counts.
CREATE TABLE {schema}.limit_holds (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL,
    holder      text NOT NULL,
    acquired_at double precision NOT NULL,
    expires_at  double precision NOT NULL
);
CREATE INDEX limit_holds_name ON {schema}.limit_holds (name, expires_at);

-- The start times of rate-limited jobs (a sliding log): at most limit_rate starts of one key
-- in any limit_per seconds. Rows older than an hour (the longest period) are pruned.
CREATE TABLE {schema}.limit_starts (
    name text NOT NULL,
    at   double precision NOT NULL
);
CREATE INDEX limit_starts_name ON {schema}.limit_starts (name, at);
CREATE INDEX limit_starts_at ON {schema}.limit_starts (at);
