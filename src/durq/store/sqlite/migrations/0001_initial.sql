-- durq schema v1 (SQLite). Times are REAL seconds since the Unix epoch.
-- Statements are applied one by one inside a single BEGIN IMMEDIATE transaction.

CREATE TABLE jobs (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    queue             TEXT    NOT NULL,
    task              TEXT    NOT NULL,
    payload           TEXT    NOT NULL,
    priority          INTEGER NOT NULL DEFAULT 0,
    run_at            REAL    NOT NULL,
    attempts          INTEGER NOT NULL DEFAULT 0,
    max_attempts      INTEGER NOT NULL,
    state             TEXT    NOT NULL,
    lease_token       INTEGER,
    lease_expires_at  REAL,
    worker_id         TEXT,
    key               TEXT,
    created_at        REAL    NOT NULL,
    started_at        REAL,
    finished_at       REAL,
    result            TEXT,
    progress          TEXT,
    errors            TEXT    NOT NULL DEFAULT '[]',
    meta              TEXT,
    shutdown_requeues INTEGER NOT NULL DEFAULT 0
);

-- The ready set: claims scan this in (priority, run_at, id) order for one queue.
CREATE INDEX jobs_ready ON jobs (queue, priority, run_at, id) WHERE state = 'queued';

-- Running leases, for the reaper.
CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE state = 'running';

-- Idempotency: one job per (queue, key).
CREATE UNIQUE INDEX jobs_key ON jobs (queue, key) WHERE key IS NOT NULL;

CREATE TABLE queues (
    name      TEXT PRIMARY KEY,
    paused    INTEGER NOT NULL DEFAULT 0,
    reason    TEXT,
    source    TEXT,
    paused_at REAL
);

CREATE TABLE workers (
    id         TEXT PRIMARY KEY,
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    queues     TEXT NOT NULL,
    tasks      TEXT NOT NULL,
    started_at REAL NOT NULL,
    last_seen  REAL NOT NULL,
    lease      REAL NOT NULL
);

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
