-- durq steps (PostgreSQL): the memoised results of ctx.step(name, fn), one row per
-- (job, step name). `result` is JSON text (not jsonb, like every JSON column here);
-- `attempt` is the attempt that recorded it. Deleting a job deletes its steps (cascade).
CREATE TABLE {schema}.steps (
    job_id     bigint  NOT NULL REFERENCES {schema}.jobs (id) ON DELETE CASCADE,
    name       text    NOT NULL,
    result     text    NOT NULL,
    attempt    integer NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (job_id, name)
);
