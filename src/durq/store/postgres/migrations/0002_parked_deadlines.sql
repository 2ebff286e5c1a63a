-- durq schema v2 (PostgreSQL): parked jobs and deadlines (docs/features/parked.md,
-- deadlines.md). Absolute times in epoch seconds from the database clock, computed from
-- created_at when the job is inserted; NULL means "none".
--   deadline         the job expires (state 'expired', on_expire runs) once this has passed
--   notice_at        on_slow runs once this has passed (unless the deadline passed first)
--   noticed_at       when the sweeper arranged on_slow (the once-only guard)
--   park_expires_at  a parked job expires once this has passed (park_ttl)
ALTER TABLE {schema}.jobs
    ADD COLUMN deadline double precision,
    ADD COLUMN notice_at double precision,
    ADD COLUMN noticed_at double precision,
    ADD COLUMN park_expires_at double precision;

CREATE INDEX jobs_deadline ON {schema}.jobs (deadline)
    WHERE deadline IS NOT NULL AND finished_at IS NULL;

CREATE INDEX jobs_notice ON {schema}.jobs (notice_at)
    WHERE notice_at IS NOT NULL AND noticed_at IS NULL AND finished_at IS NULL;

CREATE INDEX jobs_parked ON {schema}.jobs (park_expires_at) WHERE state = 'parked';
