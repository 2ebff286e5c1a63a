-- durq schema v18 (PostgreSQL): operating a big table, and every attempt's start and
-- worker (issue 12).
--   append_attempt  append_error with the attempt's start and lease holder (the row's
--                   started_at and worker_id, as the recording statement reads them before
--                   its SET) added to the entry: the failed-attempt statements write them
--                   in the same UPDATE, so no extra write, and a success never calls it.
--   jobs_state_queue  statistics on (state, queue) together: the status snapshot counts a
--                     finished (state, queue) exactly up to 10,000 rows and shows the
--                     planner's estimate above that; with these the estimate follows the
--                     pair's own frequency, not state's times queue's. They cost ANALYZE a
--                     little and the writes nothing.
CREATE STATISTICS {schema}.jobs_state_queue (mcv) ON state, queue FROM {schema}.jobs;

CREATE FUNCTION {schema}.append_attempt(
    errors text, entry text, started_at double precision, worker_id text
) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT {schema}.append_error(errors,
        left(entry, -1) || ', "started_at": ' || coalesce(to_json(started_at)::text, 'null')
        || ', "worker_id": ' || coalesce(to_json(worker_id)::text, 'null') || '}') $$;
