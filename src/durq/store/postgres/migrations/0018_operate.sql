-- durq schema v18 (PostgreSQL): operating a big table (issue 12).
--   jobs_state_queue  statistics on (state, queue) together: the status snapshot counts a
--                     finished (state, queue) exactly up to 10,000 rows and shows the
--                     planner's estimate above that; with these the estimate follows the
--                     pair's own frequency, not state's times queue's. They cost ANALYZE a
--                     little and the writes nothing.
CREATE STATISTICS {schema}.jobs_state_queue (mcv) ON state, queue FROM {schema}.jobs;
