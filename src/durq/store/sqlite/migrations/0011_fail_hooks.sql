-- durq schema v11 (SQLite): on_fail hooks and hook queues (docs/features/hooks.md).
--   on_fail     1 when the job's task had an on_fail hook at enqueue: the reaper and a
--               charged shutdown release that fail the job insert its hook job
--               (durq.fail:<id>) in the same transaction. The worker's finish path does
--               not read it (the worker knows its tasks and marks their outcomes).
--   hook_queue  the queue of the job's hook jobs (on_expire, on_slow, on_fail); NULL: the
--               job's own queue.
ALTER TABLE jobs ADD COLUMN on_fail INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN hook_queue TEXT;
