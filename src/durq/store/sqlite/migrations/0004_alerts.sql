-- durq alerts: one row per alert key, so that the same alert within its cooldown is
-- counted instead of sent again, across processes and restarts. Times are REAL epoch seconds.
CREATE TABLE alerts (
    key             TEXT PRIMARY KEY,
    message         TEXT NOT NULL,
    severity        TEXT NOT NULL,
    last_sent_at    REAL NOT NULL,     -- when it was last delivered
    last_at         REAL NOT NULL,     -- when it was last raised (sent or not)
    suppressed      INTEGER NOT NULL DEFAULT 0,  -- raised, not sent, since last_sent_at
    pending_since   REAL,              -- first suppressed raise since last_sent_at
    reported        INTEGER NOT NULL DEFAULT 0,  -- the suppressed count the last send reported
    reported_since  REAL,              -- the pending_since the last send reported
    sent_count      INTEGER NOT NULL DEFAULT 0,
    raised_count    INTEGER NOT NULL DEFAULT 0
);
