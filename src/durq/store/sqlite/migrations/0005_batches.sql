-- Batches (docs/features/batches.md): jobs enqueued inside `with dq.batch(...)` share a
-- batch_id; when the last member is terminal the batch's callback job is inserted in the
-- same transaction. state: building (the block is open) -> open (sealed) -> done (fired);
-- a retried member puts a done batch back to open.
CREATE TABLE batches (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    state           TEXT    NOT NULL DEFAULT 'building',
    on_complete     TEXT,
    queue           TEXT    NOT NULL,
    priority        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL DEFAULT 3,
    meta            TEXT    NOT NULL DEFAULT '{}',
    size            INTEGER NOT NULL DEFAULT 0,
    fired           INTEGER NOT NULL DEFAULT 0,
    outcome         TEXT,
    counts          TEXT,
    aborted         TEXT,
    callback_job_id INTEGER,
    created_at      REAL    NOT NULL,
    sealed_at       REAL,
    completed_at    REAL
);

ALTER TABLE jobs ADD COLUMN batch_id INTEGER;

-- Members by batch and state: "is any member not terminal?" and the counts read this;
-- rows outside a batch are not in it, so plain jobs pay nothing.
CREATE INDEX jobs_batch ON jobs (batch_id, state) WHERE batch_id IS NOT NULL;
