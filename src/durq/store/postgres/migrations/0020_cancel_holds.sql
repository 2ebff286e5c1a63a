-- durq schema v20 (PostgreSQL): a cancelled or expired job keeps its limit slot until its
-- body is gone (issue 11, item 4). The cancel (or the deadline sweep) of a running limited
-- job inserts a limit_holds row of its key for the lease it had, tagged with the job and
-- its lease token; the worker that ran it extends the hold with its heartbeat while the
-- body still runs and deletes it once the body has returned. A dead worker's hold lapses
-- with the lease it had (expires_at), as the job's own slot would have.
ALTER TABLE {schema}.limit_holds ADD COLUMN job_id bigint;
ALTER TABLE {schema}.limit_holds ADD COLUMN job_token bigint;
CREATE INDEX limit_holds_job ON {schema}.limit_holds (job_id) WHERE job_id IS NOT NULL;
