-- durq schema v2: find finished jobs by age without scanning the table (retention, pruning).
CREATE INDEX jobs_finished ON jobs (state, finished_at) WHERE finished_at IS NOT NULL;
