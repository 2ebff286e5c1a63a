-- durq schema v15 (PostgreSQL): jobs that depend on jobs, tags, uniqueness while active,
-- fair claims; the same as SQLite's v16 (see there for every column).
--   has_children  true once any child names the job as a parent: the hot finish statement
--                 leaves such jobs to a transaction that also settles their children, and
--                 an enqueue naming a parent sets it with an UPDATE (a row lock), so a
--                 finish and a new child cannot miss each other.
CREATE TABLE {schema}.job_deps (
    child_id bigint NOT NULL,
    parent_id bigint NOT NULL,
    on_failure text NOT NULL DEFAULT 'cancel',
    pass_as text,
    pass_list boolean NOT NULL DEFAULT false,
    PRIMARY KEY (child_id, parent_id)
);
CREATE INDEX job_deps_parent ON {schema}.job_deps (parent_id);
ALTER TABLE {schema}.jobs ADD COLUMN has_children boolean NOT NULL DEFAULT false;
CREATE INDEX jobs_waiting ON {schema}.jobs (id) WHERE state = 'waiting';

CREATE TABLE {schema}.job_tags (
    tag text NOT NULL,
    job_id bigint NOT NULL REFERENCES {schema}.jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (tag, job_id)
);
CREATE INDEX job_tags_job ON {schema}.job_tags (job_id);
ALTER TABLE {schema}.job_deps ADD FOREIGN KEY (child_id)
    REFERENCES {schema}.jobs (id) ON DELETE CASCADE;

ALTER TABLE {schema}.jobs ADD COLUMN unique_key text, ADD COLUMN unique_until double precision;
CREATE UNIQUE INDEX jobs_unique_active ON {schema}.jobs (queue, unique_key)
    WHERE unique_key IS NOT NULL AND unique_until IS NULL
      AND state IN ('queued', 'running', 'waiting', 'parked');
CREATE INDEX jobs_unique_period ON {schema}.jobs (queue, unique_key, unique_until)
    WHERE unique_until IS NOT NULL;

ALTER TABLE {schema}.jobs ADD COLUMN fair_key text;
CREATE INDEX jobs_fair_ready ON {schema}.jobs (queue, fair_key, priority, run_at, id)
    WHERE state = 'queued' AND fair_key IS NOT NULL;
CREATE TABLE {schema}.fair_turns (
    queue text NOT NULL,
    fair_key text NOT NULL,
    turn bigint NOT NULL,
    PRIMARY KEY (queue, fair_key)
);
