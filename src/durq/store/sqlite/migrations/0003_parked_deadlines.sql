-- durq schema v3 (SQLite): parked jobs and deadlines (docs/features/parked.md, deadlines.md).
-- All four are absolute times in REAL seconds since the epoch, computed from created_at on
-- the store's clock when the job is inserted; NULL means "none".
--   deadline         the job expires (state 'expired', on_expire runs) once this has passed
--   notice_at        on_slow runs once this has passed (unless the deadline passed first)
--   noticed_at       when the sweeper arranged on_slow (the once-only guard)
--   park_expires_at  a parked job expires once this has passed (park_ttl)
ALTER TABLE jobs ADD COLUMN deadline REAL;
ALTER TABLE jobs ADD COLUMN notice_at REAL;
ALTER TABLE jobs ADD COLUMN noticed_at REAL;
ALTER TABLE jobs ADD COLUMN park_expires_at REAL;

-- The sweeper's scans read only jobs that are not finished yet (finished_at IS NULL).
CREATE INDEX jobs_deadline ON jobs (deadline)
    WHERE deadline IS NOT NULL AND finished_at IS NULL;

CREATE INDEX jobs_notice ON jobs (notice_at)
    WHERE notice_at IS NOT NULL AND noticed_at IS NULL AND finished_at IS NULL;

CREATE INDEX jobs_parked ON jobs (park_expires_at) WHERE state = 'parked';
