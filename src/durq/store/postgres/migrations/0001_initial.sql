-- durq schema v1 (PostgreSQL). {schema} is replaced by the configured schema (quoted).
-- Times are double precision seconds since the Unix epoch, always from the database clock.

CREATE SEQUENCE {schema}.lease_tokens;

-- The database clock in epoch seconds. `at` is NULL except in tests that inject a clock.
CREATE FUNCTION {schema}.epoch(at double precision) RETURNS double precision
    LANGUAGE sql STABLE AS $$ SELECT coalesce(at, extract(epoch FROM now())::double precision) $$;

-- Append one JSON object (text) to a JSON array kept as text (no jsonb: it rejects \u0000).
CREATE FUNCTION {schema}.append_error(errors text, entry text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN errors IS NULL OR errors = '[]' THEN '[' || entry || ']'
                ELSE left(errors, -1) || ',' || entry || ']' END $$;

CREATE TABLE {schema}.jobs (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue             text    NOT NULL,
    task              text    NOT NULL,
    payload           text    NOT NULL,
    priority          integer NOT NULL DEFAULT 0,
    run_at            double precision NOT NULL,
    attempts          integer NOT NULL DEFAULT 0,
    max_attempts      integer NOT NULL,
    state             text    NOT NULL,
    lease_token       bigint,
    lease_expires_at  double precision,
    worker_id         text,
    key               text,
    created_at        double precision NOT NULL,
    started_at        double precision,
    finished_at       double precision,
    result            text,
    progress          text,
    errors            text    NOT NULL DEFAULT '[]',
    meta              text,
    shutdown_requeues integer NOT NULL DEFAULT 0
);

CREATE INDEX jobs_ready ON {schema}.jobs (queue, priority, run_at, id) WHERE state = 'queued';

CREATE INDEX jobs_leases ON {schema}.jobs (lease_expires_at) WHERE state = 'running';

CREATE UNIQUE INDEX jobs_key ON {schema}.jobs (queue, key) WHERE key IS NOT NULL;

CREATE INDEX jobs_finished ON {schema}.jobs (state, queue, finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE {schema}.queues (
    name      text PRIMARY KEY,
    paused    boolean NOT NULL DEFAULT false,
    reason    text,
    source    text,
    paused_at double precision
);

CREATE TABLE {schema}.workers (
    id         text PRIMARY KEY,
    host       text NOT NULL,
    pid        integer NOT NULL,
    queues     text NOT NULL,
    tasks      text NOT NULL,
    started_at double precision NOT NULL,
    last_seen  double precision NOT NULL,
    lease      double precision NOT NULL
);

CREATE TABLE {schema}.meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
