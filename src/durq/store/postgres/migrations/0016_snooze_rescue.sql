-- durq schema v16 (PostgreSQL): snooze and rescue in seconds. See the SQLite v17
-- migration: the same columns and the same partial index.
ALTER TABLE {schema}.jobs ADD COLUMN snoozes integer NOT NULL DEFAULT 0;
ALTER TABLE {schema}.workers
    ADD COLUMN rescue_after double precision,
    ADD COLUMN proc text,
    ADD COLUMN rescues bigint NOT NULL DEFAULT 0;
CREATE INDEX jobs_worker_running ON {schema}.jobs (worker_id) WHERE state = 'running';
