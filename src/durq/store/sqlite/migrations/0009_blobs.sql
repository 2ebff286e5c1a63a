-- durq schema v9: the blob store (durq.blobs). Bytes live in files under a root directory,
-- named by their sha256; these tables say which blobs exist, who holds them, and the
-- external ids (a CDN or chat-service file id) that outlive the bytes.
--   stored: 1 while the bytes are (meant to be) on disk, 0 once they were released and
--           only the record is kept for its external_id.
--   holds:  the number of blob_refs rows of the blob, kept by arithmetic (holds + 1,
--           holds - 1) in the same transaction as the row, so that releases are
--           conditional on the blob row itself ("holds = 0").
--   touched_at: the last put or ref; gc spares blobs touched within its grace period.
CREATE TABLE blobs (
    key         TEXT PRIMARY KEY,
    size        INTEGER NOT NULL,
    stored      INTEGER NOT NULL DEFAULT 1,
    holds       INTEGER NOT NULL DEFAULT 0,
    external_id TEXT,
    name        TEXT,
    created_at  REAL NOT NULL,
    touched_at  REAL NOT NULL
);

CREATE INDEX blobs_idle ON blobs (touched_at) WHERE stored = 1 AND holds = 0;

-- holder is the holder's name, or 'job:<id>' for a job (then job_id is set): a job's
-- reference dies when its job row no longer exists (no foreign key: retention prunes jobs).
CREATE TABLE blob_refs (
    key        TEXT NOT NULL,
    holder     TEXT NOT NULL,
    job_id     INTEGER,
    created_at REAL NOT NULL,
    PRIMARY KEY (key, holder)
);

CREATE INDEX blob_refs_job ON blob_refs (job_id) WHERE job_id IS NOT NULL;

-- A logical name (e.g. 'youtube:dQw4w9WgXcQ:22') for a blob; not a reference. It goes
-- with the blob's record.
CREATE TABLE blob_aliases (
    name       TEXT PRIMARY KEY,
    key        TEXT NOT NULL,
    created_at REAL NOT NULL
);

CREATE INDEX blob_aliases_key ON blob_aliases (key);
