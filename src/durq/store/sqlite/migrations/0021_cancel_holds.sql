-- durq schema v21 (SQLite): a cancelled or expired job keeps its limit slot until its body
-- is gone (issue 11, item 4). The cancel (or the deadline sweep) of a running limited job
-- inserts a limit_holds row of its key for the lease it had, tagged with the job and its
-- lease token; the worker that ran it extends the hold with its heartbeat while the body
-- still runs and deletes it once the body has returned. A dead worker's hold lapses with
-- the lease it had (expires_at), as the job's own slot would have.
ALTER TABLE limit_holds ADD COLUMN job_id INTEGER;
ALTER TABLE limit_holds ADD COLUMN job_token INTEGER;
CREATE INDEX limit_holds_job ON limit_holds (job_id) WHERE job_id IS NOT NULL;
