-- Batches (docs/features/batches.md): jobs enqueued inside `with dq.batch(...)` share a
-- batch_id; when the last member is terminal the batch's callback job is inserted in the
-- same transaction. state: building (the block is open) -> open (sealed) -> done (fired);
-- a retried member puts a done batch back to open. Every change to a batch's state locks
-- its row first (FOR UPDATE, in id order), so two transactions closing it take turns.
CREATE TABLE {schema}.batches (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    state           text    NOT NULL DEFAULT 'building',
    on_complete     text,
    queue           text    NOT NULL,
    priority        integer NOT NULL DEFAULT 0,
    max_attempts    integer NOT NULL DEFAULT 3,
    meta            text    NOT NULL DEFAULT '{}',
    size            bigint  NOT NULL DEFAULT 0,
    fired           integer NOT NULL DEFAULT 0,
    outcome         text,
    counts          text,
    aborted         text,
    callback_job_id bigint,
    created_at      double precision NOT NULL,
    sealed_at       double precision,
    completed_at    double precision
);

ALTER TABLE {schema}.jobs ADD COLUMN batch_id bigint;

CREATE INDEX jobs_batch ON {schema}.jobs (batch_id, state) WHERE batch_id IS NOT NULL;
