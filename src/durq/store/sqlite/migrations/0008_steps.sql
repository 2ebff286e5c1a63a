-- durq steps (SQLite): the memoised results of ctx.step(name, fn), one row per
-- (job, step name). `result` is JSON text; `attempt` is the attempt that recorded it.
CREATE TABLE steps (
    job_id     INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    result     TEXT    NOT NULL,
    attempt    INTEGER NOT NULL,
    created_at REAL    NOT NULL,
    PRIMARY KEY (job_id, name)
) WITHOUT ROWID;

-- Deleting a job (prune, purge, anything) deletes its steps in the same transaction.
-- A trigger rather than a foreign key: durq does not turn on PRAGMA foreign_keys.
CREATE TRIGGER jobs_delete_steps AFTER DELETE ON jobs
BEGIN
    DELETE FROM steps WHERE job_id = old.id;
END;
