-- durq schema v13 (PostgreSQL): what workers report about themselves, and the job list's
-- indexes for the dashboard (docs/features/dashboard.md). See the SQLite v14 migration:
-- the same columns and partial indexes (a job enters them only when it ends in that state).
ALTER TABLE {schema}.workers
    ADD COLUMN pool text NOT NULL DEFAULT 'threads',
    ADD COLUMN concurrency integer NOT NULL DEFAULT 0,
    ADD COLUMN version text NOT NULL DEFAULT '',
    ADD COLUMN in_hand text NOT NULL DEFAULT '[]',
    ADD COLUMN done bigint NOT NULL DEFAULT 0,
    ADD COLUMN failed bigint NOT NULL DEFAULT 0;
CREATE INDEX jobs_failed_id ON {schema}.jobs (id) WHERE state = 'failed';
CREATE INDEX jobs_cancelled_id ON {schema}.jobs (id) WHERE state = 'cancelled';
CREATE INDEX jobs_expired_id ON {schema}.jobs (id) WHERE state = 'expired';
CREATE INDEX jobs_parked_id ON {schema}.jobs (id) WHERE state = 'parked';
