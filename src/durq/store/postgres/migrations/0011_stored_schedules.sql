-- durq schema v11 (PostgreSQL): periodic schedules stored in the database (issue 13).
-- Every worker that registers a schedule writes its definition here, so the leader fires
-- every stored schedule by name, whether or not its own code defines it (a rolling deploy:
-- an older leader fires the schedule only newer workers know; the job waits, stranded,
-- for a worker that knows the task).
--   cron, tz, task  the schedule as last registered
--   definition      JSON text: payload, queue, priority, max_attempts, catch_up, grace,
--                   slot_arg (queue, priority and attempts resolved from the defining
--                   worker's task)
--   code_version    the defining worker's code version (DURQ_CODE_VERSION, or durq's)
--   defined_by      the worker id that last registered it
--   seen_at         the last time (database clock) a live worker that defines it said so;
--                   a schedule not seen for a while is reported as orphaned and not fired
-- Rows from before v11 have NULL definitions until a worker registers the schedule again.
ALTER TABLE {schema}.periodic
    ADD COLUMN cron text,
    ADD COLUMN tz text,
    ADD COLUMN task text,
    ADD COLUMN definition text,
    ADD COLUMN code_version text,
    ADD COLUMN defined_by text,
    ADD COLUMN seen_at double precision;

-- Slots of a worker held by task bodies past their timeout (a `def` task that never
-- returns keeps its thread): written with every heartbeat, shown per worker by
-- `durq status` so that a wedged worker is not shown as merely idle.
ALTER TABLE {schema}.workers ADD COLUMN wedged integer NOT NULL DEFAULT 0;
