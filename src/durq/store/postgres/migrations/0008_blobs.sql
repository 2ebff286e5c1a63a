-- durq schema v8: the blob store (durq.blobs). Bytes live in files under a root directory
-- (every process must see the same directory), named by their sha256; these tables say
-- which blobs exist, who holds them, and the external ids that outlive the bytes.
--   stored: true while the bytes are (meant to be) on disk, false once they were released
--           and only the record is kept for its external_id.
--   holds:  the number of blob_refs rows of the blob, kept by arithmetic (holds + 1,
--           holds - 1) in the same transaction as the row: a release is conditional on the
--           blob row itself ("holds = 0"), which a concurrent ref has locked and changed.
--   touched_at: the last put or ref; gc spares blobs touched within its grace period.
CREATE TABLE {schema}.blobs (
    key         text PRIMARY KEY,
    size        bigint  NOT NULL,
    stored      boolean NOT NULL DEFAULT true,
    holds       integer NOT NULL DEFAULT 0,
    external_id text,
    name        text,
    created_at  double precision NOT NULL,
    touched_at  double precision NOT NULL
);

CREATE INDEX blobs_idle ON {schema}.blobs (touched_at) WHERE stored AND holds = 0;

-- holder is the holder's name, or 'job:<id>' for a job (then job_id is set): a job's
-- reference dies when its job row no longer exists (no foreign key: retention prunes jobs).
CREATE TABLE {schema}.blob_refs (
    key        text NOT NULL,
    holder     text NOT NULL,
    job_id     bigint,
    created_at double precision NOT NULL,
    PRIMARY KEY (key, holder)
);

CREATE INDEX blob_refs_job ON {schema}.blob_refs (job_id) WHERE job_id IS NOT NULL;

-- A logical name (e.g. 'youtube:dQw4w9WgXcQ:22') for a blob; not a reference. It goes
-- with the blob's record.
CREATE TABLE {schema}.blob_aliases (
    name       text PRIMARY KEY,
    key        text NOT NULL,
    created_at double precision NOT NULL
);

CREATE INDEX blob_aliases_key ON {schema}.blob_aliases (key);
