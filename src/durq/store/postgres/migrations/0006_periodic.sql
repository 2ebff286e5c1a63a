-- durq periodic jobs: the last slot enqueued per periodic schedule. Each slot's job also
-- carries a unique idempotency key, but retention may delete old jobs (and their keys);
-- this row only moves forward (a conditional update in the enqueue's transaction), so a
-- scheduler never enqueues a slot at or before it again.
CREATE TABLE {schema}.periodic (
    name       text PRIMARY KEY,
    last_slot  double precision NOT NULL,
    job_id     bigint,
    updated_at double precision NOT NULL
);
