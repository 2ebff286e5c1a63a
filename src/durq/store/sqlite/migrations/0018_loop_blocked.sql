-- durq schema v18 (SQLite): how long the event loop of a worker's `async def` tasks has
-- been blocked (seconds, 0 while it runs), written with every heartbeat and shown per
-- worker by `durq status` (issue 11: a body blocking the loop stalls every async job).
ALTER TABLE workers ADD COLUMN loop_blocked REAL NOT NULL DEFAULT 0;
