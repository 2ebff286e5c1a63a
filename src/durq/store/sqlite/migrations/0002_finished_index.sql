-- durq schema v2: finished jobs by state, queue and age, so that status counts and
-- retention read an index instead of the whole table. No index covers every state:
-- queued and running rows are found through their partial indexes (jobs_ready,
-- jobs_leases), and every insert stays as cheap as it can be.
CREATE INDEX jobs_finished ON jobs (state, queue, finished_at) WHERE finished_at IS NOT NULL;
