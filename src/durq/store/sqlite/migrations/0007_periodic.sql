-- durq periodic jobs: the last slot enqueued per periodic schedule. Each slot's job also
-- carries a unique idempotency key, but retention may delete old jobs (and their keys);
-- this row only moves forward (a conditional update in the enqueue's transaction), so a
-- scheduler never enqueues a slot at or before it again.
CREATE TABLE periodic (
    name       TEXT PRIMARY KEY,
    last_slot  REAL    NOT NULL,
    job_id     INTEGER,
    updated_at REAL    NOT NULL
);
