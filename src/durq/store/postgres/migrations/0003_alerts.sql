-- durq alerts: one row per alert key, so that the same alert within its cooldown is
-- counted instead of sent again, across processes and restarts. Times are epoch seconds
-- from the database clock.
CREATE TABLE {schema}.alerts (
    key             text PRIMARY KEY,
    message         text NOT NULL,
    severity        text NOT NULL,
    last_sent_at    double precision NOT NULL,
    last_at         double precision NOT NULL,
    suppressed      integer NOT NULL DEFAULT 0,
    pending_since   double precision,
    reported        integer NOT NULL DEFAULT 0,
    reported_since  double precision,
    sent_count      bigint NOT NULL DEFAULT 0,
    raised_count    bigint NOT NULL DEFAULT 0
);
