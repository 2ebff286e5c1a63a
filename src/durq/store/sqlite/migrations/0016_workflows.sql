-- durq schema v16 (SQLite): jobs that depend on jobs, tags, uniqueness while active, fair
-- claims (docs/features/dependencies.md, tags.md, uniqueness.md, fairness.md).
--   job_deps      one row per dependency edge: the child waits (state 'waiting') until every
--                 parent is terminal; on_failure 'cancel' cancels the child when that parent
--                 ends other than succeeded, 'run' lets it run anyway. pass_as names the
--                 child's argument that receives the parent's result (dq.chain: the value;
--                 pass_list 1, dq.group(...).then: the list of the group's results).
--   has_children  1 once any child names the job as a parent (PostgreSQL's finish reads it;
--                 kept on SQLite for the same schema).
--   job_tags      one row per (tag, job): dq.jobs(tag=...), durq jobs list --tag.
--   unique_key    the key of options(key=..., unique="active"|"period:N"); unique_until is
--                 created_at + N for a period, NULL while-active. jobs_unique_active makes
--                 two live jobs with one active key impossible.
--   fair_key      the task's fair_key(payload) at enqueue: claims go round-robin over it.
CREATE TABLE job_deps (
    child_id INTEGER NOT NULL,
    parent_id INTEGER NOT NULL,
    on_failure TEXT NOT NULL DEFAULT 'cancel',
    pass_as TEXT,
    pass_list INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (child_id, parent_id)
) WITHOUT ROWID;
CREATE INDEX job_deps_parent ON job_deps (parent_id);
ALTER TABLE jobs ADD COLUMN has_children INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_waiting ON jobs (id) WHERE state = 'waiting';

CREATE TABLE job_tags (
    tag TEXT NOT NULL,
    job_id INTEGER NOT NULL,
    PRIMARY KEY (tag, job_id)
) WITHOUT ROWID;
CREATE INDEX job_tags_job ON job_tags (job_id);
CREATE TRIGGER jobs_delete_deps_tags AFTER DELETE ON jobs BEGIN
    DELETE FROM job_tags WHERE job_id = old.id;
    DELETE FROM job_deps WHERE child_id = old.id;
END;

ALTER TABLE jobs ADD COLUMN unique_key TEXT;
ALTER TABLE jobs ADD COLUMN unique_until REAL;
CREATE UNIQUE INDEX jobs_unique_active ON jobs (queue, unique_key)
    WHERE unique_key IS NOT NULL AND unique_until IS NULL
      AND state IN ('queued', 'running', 'waiting', 'parked');
CREATE INDEX jobs_unique_period ON jobs (queue, unique_key, unique_until)
    WHERE unique_until IS NOT NULL;

ALTER TABLE jobs ADD COLUMN fair_key TEXT;
CREATE INDEX jobs_fair_ready ON jobs (queue, fair_key, priority, run_at, id)
    WHERE state = 'queued' AND fair_key IS NOT NULL;
-- fair_turns: a counter per queue stamped on each fair key when a job of it is claimed; the
-- fair claim serves the key with the lowest turn first (round-robin; unseen keys: 0).
CREATE TABLE fair_turns (
    queue TEXT NOT NULL,
    fair_key TEXT NOT NULL,
    turn INTEGER NOT NULL,
    PRIMARY KEY (queue, fair_key)
) WITHOUT ROWID;
